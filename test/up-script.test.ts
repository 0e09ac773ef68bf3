/**
 * `npm run up` leaves nothing running when its script is signalled (issue 18, part 6): the API and the
 * workers (each an npx → tsx → node chain) stop with it, for SIGTERM and for SIGINT. Every process the script
 * starts inherits a marker variable, so the test finds them in /proc however deep they are.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { eventually } from './helpers/wait';
import { useTestApp } from './helpers/use-test-app';

const ROOT = path.resolve(__dirname, '..');
const started: ChildProcess[] = [];

const { ctx } = useTestApp({
  teardown: () => {
    for (const c of started) if (c.exitCode === null) c.kill('SIGKILL');
  },
});

const freePort = () =>
  new Promise<number>((resolve) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });

/** Pids of live processes whose environment carries the marker. */
function marked(marker: string): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'latin1').includes(`UP_TEST_MARK=${marker}`)) out.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}

test.each(['SIGTERM', 'SIGINT'] as const)('a %s to the script stops the API and the workers with it', async (signal) => {
  const marker = randomUUID();
  const port = await freePort();
  const script = spawn('bash', ['scripts/up.sh'], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      UP_TEST_MARK: marker,
      NODE_ENV: 'test',
      PORT: String(port),
      HOST: '127.0.0.1',
      DATABASE_URL: ctx.config.DATABASE_URL,
      REDIS_URL: ctx.config.REDIS_URL,
      REDIS_PREFIX: `${ctx.config.REDIS_PREFIX}-up-${signal}`,
      API_KEY_PEPPER: ctx.config.API_KEY_PEPPER,
      REALM_PUBLIC_KEY: ctx.realm.publicKeyPem,
      REALM_ISSUER: ctx.config.REALM_ISSUER ?? '',
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  started.push(script);
  let output = '';
  script.stdout!.on('data', (c: Buffer) => (output += c.toString()));
  script.stderr!.on('data', (c: Buffer) => (output += c.toString()));
  await eventually(async () => (output.includes('Helpdesk API is up') ? true : undefined), 90_000, `the API to come up:\n${output}`);
  const running = marked(marker);
  // The script, and at least the API's and the workers' node processes under npx and tsx.
  expect(running.length).toBeGreaterThanOrEqual(3);

  const exited = new Promise<number | null>((resolve) => script.once('exit', (code) => resolve(code)));
  script.kill(signal);
  await exited;
  await eventually(async () => (marked(marker).length === 0 ? true : undefined), 30_000, `every process of the script to stop (left: ${marked(marker).join(', ')})`);
  expect(marked(marker)).toEqual([]);
}, 150_000);
