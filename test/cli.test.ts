import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { decodeJwt } from 'jose';
import { Client } from 'pg';
import { eventually } from './helpers/wait';
import { runId, serverUrl } from './helpers/db-names';
import { bearer } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

const ROOT = path.resolve(__dirname, '..');
const TSX = path.join(ROOT, 'node_modules/.bin/tsx');

interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

const running = new Set<ChildProcess>();

/** Runs `tsx <args>` from the project root with exactly `env` (plus PATH/HOME), killing it after `timeoutMs`. */
const runTsx = (args: string[], env: Record<string, string>, timeoutMs = 30_000) => run(TSX, args, env, timeoutMs);

/** Runs `bin <args>` from the project root with exactly `env` (plus PATH/HOME), killing it after `timeoutMs`. */
function run(bin: string, args: string[], env: Record<string, string>, timeoutMs = 30_000): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

const lines = (text: string) => text.split('\n').filter((l) => l.trim() !== '');

const { ctx } = useTestApp({
  teardown: () => {
    for (const child of running) child.kill('SIGKILL');
  },
});

describe('npm run bootstrap', () => {
  const env = () => ({ NODE_ENV: 'test', DATABASE_URL: ctx.config.DATABASE_URL, API_KEY_PEPPER: ctx.config.API_KEY_PEPPER });

  test('the command the README documents (npm run -s bootstrap) prints only the JSON line, no npm banner', async () => {
    const out = await run('npm', ['run', '-s', 'bootstrap', '--', '--workspace', 'Documented', '--owner-email', 'documented@acme.test'], env(), 60_000);
    expect(out.code).toBe(0);
    expect(lines(out.stdout)).toHaveLength(1);
    expect(JSON.parse(lines(out.stdout)[0]!)).toMatchObject({ tenant_id: expect.any(String), api_key: { secret: expect.stringMatching(/^sk_zr_/) } });
  });

  test('prints one line of JSON whose owner key works against the API', async () => {
    const run = await runTsx(['scripts/bootstrap.ts', '--workspace', 'Acme', '--owner-email', 'owner@acme.test'], env());

    expect(run.code).toBe(0);
    expect(run.stdout.endsWith('\n')).toBe(true);
    const out = lines(run.stdout);
    expect(out).toHaveLength(1);
    const printed = JSON.parse(out[0]!) as {
      tenant_id: string;
      owner_user_id: string;
      api_key: { id: string; prefix: string; secret: string };
    };
    expect(printed).toEqual({
      tenant_id: expect.any(String),
      owner_user_id: expect.any(String),
      api_key: { id: expect.any(String), prefix: expect.any(String), secret: expect.stringMatching(/^sk_zr_[0-9A-Za-z]+$/) },
    });
    expect(printed.api_key.secret.startsWith(printed.api_key.prefix)).toBe(true);

    const res = await ctx.http.get('/v1/api-keys').set(bearer(printed.api_key.secret));
    expect(res.status).toBe(200);
    expect(res.body.api_keys).toEqual([expect.objectContaining({ id: printed.api_key.id, prefix: printed.api_key.prefix })]);
    expect(JSON.stringify(res.body)).not.toContain(printed.api_key.secret);
  });

  test('--owner-subject binds the owner in the new workspace only; a second workspace for the same email gets its own person', async () => {
    const subject = `owner-${randomBytes(4).toString('hex')}`;
    const email = `${subject}@acme.test`;
    const boot = async (extra: string[]) => {
      const run = await runTsx(['scripts/bootstrap.ts', '--workspace', 'Acme', '--owner-email', email, ...extra], env());
      expect(run.code).toBe(0);
      return JSON.parse(lines(run.stdout)[0]!) as { tenant_id: string; owner_user_id: string };
    };
    const first = await boot(['--owner-subject', subject]);
    const second = await boot([]);
    expect(second.owner_user_id).not.toBe(first.owner_user_id);
    const rows = await ctx.db.selectFrom('memberships').select(['tenant_id', 'realm_subject', 'status']).where('tenant_id', 'in', [first.tenant_id, second.tenant_id]).execute();
    expect(rows.find((r) => r.tenant_id === first.tenant_id)).toMatchObject({ realm_subject: subject, status: 'active' });
    expect(rows.find((r) => r.tenant_id === second.tenant_id)).toMatchObject({ realm_subject: null, status: 'active' });
  });

  test('without --owner-email exits non-zero and prints nothing on stdout', async () => {
    const run = await runTsx(['scripts/bootstrap.ts', '--workspace', 'Acme'], env());

    expect(run.code).not.toBe(0);
    expect(run.stdout).toBe('');
    expect(run.stderr).toMatch(/owner-email/);
  });
});

describe('npm run dev-token', () => {
  test('--email puts the address with email_verified true in the token, as a realm does for a verified address', async () => {
    const tenant = '3f2b8c4e-6a1d-4e7f-9b2c-5d8e1a4f7c3b';
    const withEmail = await runTsx(['scripts/dev-token.ts', '--sub', 'alice', '--tenant', tenant, '--email', 'alice@acme.test'], { NODE_ENV: 'test' });
    expect(withEmail.code).toBe(0);
    expect(decodeJwt(lines(withEmail.stdout)[0]!)).toMatchObject({ sub: 'alice', tenant_id: tenant, email: 'alice@acme.test', email_verified: true });
    const without = await runTsx(['scripts/dev-token.ts', '--sub', 'alice', '--tenant', tenant], { NODE_ENV: 'test' });
    expect(without.code).toBe(0);
    const claims = decodeJwt(lines(without.stdout)[0]!);
    expect(claims).not.toHaveProperty('email');
    expect(claims).not.toHaveProperty('email_verified');
  });
});

describe('configuration fails fast', () => {
  test('an API started with PORT=abc exits 1 with one stderr line naming PORT', async () => {
    const run = await runTsx(['src/server.ts'], { NODE_ENV: 'test', PORT: 'abc' });

    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    const err = lines(run.stderr);
    expect(err).toHaveLength(1);
    expect(err[0]).toMatch(/\bPORT\b/);
  });

  test('an API started in production without API_KEY_PEPPER exits 1 naming API_KEY_PEPPER', async () => {
    const run = await runTsx(['src/server.ts'], { NODE_ENV: 'production', PORT: '0' });

    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    const err = lines(run.stderr);
    expect(err).toHaveLength(1);
    expect(err[0]).toMatch(/\bAPI_KEY_PEPPER\b/);
  });
});

describe('npm run migrate', () => {
  const databaseName = `hd_t_${runId()}_cli_${randomBytes(3).toString('hex')}`;
  const admin = () => new Client({ connectionString: serverUrl('postgres') });
  afterAll(async () => {
    const client = admin();
    await client.connect();
    try {
      await client.query(`DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`);
    } finally {
      await client.end();
    }
  });

  test('creates a missing database and migrates it, then reports up to date on a second run', async () => {
    const url = new URL(ctx.config.DATABASE_URL);
    url.pathname = `/${databaseName}`;
    const env = { NODE_ENV: 'test', DATABASE_URL: url.toString() };

    const first = await runTsx(['scripts/migrate.ts'], env);
    expect(first.code).toBe(0);
    expect(first.stderr).toMatch(/created the database/);
    expect(first.stderr).toMatch(/migrations: \S+/);
    expect(first.stderr).not.toMatch(/up to date/);

    const client = admin();
    await client.connect();
    try {
      const db = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [databaseName]);
      expect(db.rowCount).toBe(1);
    } finally {
      await client.end();
    }
    const inDb = new Client({ connectionString: url.toString() });
    await inDb.connect();
    try {
      const table = await inDb.query<{ t: string | null }>(`SELECT to_regclass('public.api_keys')::text AS t`);
      expect(table.rows[0]?.t).toBe('api_keys');
    } finally {
      await inDb.end();
    }

    const second = await runTsx(['scripts/migrate.ts'], env);
    expect(second.code).toBe(0);
    expect(second.stderr).toMatch(/up to date/);
    expect(second.stderr).not.toMatch(/created the database/);
  }, 60_000);
});

describe('npm run jobs', () => {
  const env = () => ({ NODE_ENV: 'test', REDIS_PREFIX: ctx.config.REDIS_PREFIX, DATABASE_URL: ctx.config.DATABASE_URL });

  test('retry-failed moves every failed job of the queue back to waiting, as the dashboard\'s retry does', async () => {
    const queue = ctx.runtime.queues.queue('maintenance');
    // A job that failed for good: the worker refuses its payload. The worker stops before the retry, so
    // the retried job stays waiting where the test can see it.
    const workers = await ctx.startWorkers();
    const job = await queue.add('audit.prune', { retention_days: 0 }, { attempts: 1 });
    await eventually(async () => ((await job.getState()) === 'failed' ? true : undefined), 10_000, 'the job to fail');
    await workers.close();
    const run = await runTsx(['scripts/jobs.ts', 'retry-failed', '--queue', 'maintenance'], env());
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^\d+ failed job\(s\) of maintenance moved back to waiting$/m);
    expect(['waiting', 'prioritized']).toContain(await job.getState());
  });

  test('an unknown queue is refused with exit 2 and the list of queues', async () => {
    const run = await runTsx(['scripts/jobs.ts', 'retry-failed', '--queue', 'nope'], env());
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--queue must be one of ingest, webhooks, mailbox, outbound, rollups, maintenance');
  });
});
