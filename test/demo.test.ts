/**
 * `npm run -s demo` (issue 18, part 6): a first run shows something. The script fills a new workspace through
 * the services' own code paths and prints its owner key; the API then shows its tickets, time, satisfaction
 * and a webhook transcript.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { bearer } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

const ROOT = path.resolve(__dirname, '..');

const { ctx } = useTestApp();

function runDemo(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['run', '-s', 'demo'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

test('fills a workspace the API then shows: tickets, time logged, satisfaction and a transcript', async () => {
  const run = await runDemo({
    NODE_ENV: 'test',
    DATABASE_URL: ctx.config.DATABASE_URL,
    REDIS_URL: ctx.config.REDIS_URL,
    REDIS_PREFIX: ctx.config.REDIS_PREFIX,
    API_KEY_PEPPER: ctx.config.API_KEY_PEPPER,
  });
  expect(run.stderr).toBe('');
  expect(run.code).toBe(0);
  const lines = run.stdout.split('\n').filter((l) => l.trim() !== '');
  expect(lines).toHaveLength(1);
  const out = JSON.parse(lines[0]!) as { tenant_id: string; api_key: { secret: string }; made: { tickets: number; integration_id: string } };
  const key = bearer(out.api_key.secret);

  const tickets = await ctx.http.get('/v1/tickets?limit=500').set(key);
  expect(tickets.status).toBe(200);
  expect(tickets.body.tickets).toHaveLength(out.made.tickets);
  expect(out.made.tickets).toBeGreaterThanOrEqual(10);
  const sources = new Set((tickets.body.tickets as { source: string }[]).map((t) => t.source));
  expect([...sources].sort()).toEqual(expect.arrayContaining(['email', 'phone', 'sms', 'web_chat']));

  const time = await ctx.http.get('/v1/time-tracking/summary').set(key);
  expect(time.body.total.minutes).toBeGreaterThan(0);
  const csat = await ctx.http.get('/v1/csat/aggregate').set(key);
  expect(csat.body.overall.responses).toBeGreaterThan(0);
  const transcripts = await ctx.http.get(`/v1/integrations/${out.made.integration_id}/transcripts`).set(key);
  expect(transcripts.body.transcripts[0]).toMatchObject({ external_ticket_id: '5158', event_count: 3 });
}, 120_000);
