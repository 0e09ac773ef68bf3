/**
 * What the process-level benches share: starting the real API and worker as child processes (each in its own
 * process group, so tsx's child goes too), stopping them, and a fresh database of their own.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, readdirSync, readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type IORedis from 'ioredis';
import { Client } from 'pg';
import { ensureDatabase } from '../src/db/admin';
import type { Config } from '../src/config';
import { createDb, migrateToLatest } from '../src/db';
import { createApiKeyService } from '../src/domains/api-keys/service';
import { createAuditService } from '../src/domains/audit/service';
import { createWorkspaceService } from '../src/domains/workspaces/service';
import { SERVICE_NODE_OPTIONS } from '../src/lib/node-options';

/** A bench drives one key far past the default per-minute API budgets: it measures the operation, not the 429. */
const BENCH_BUDGETS = { API_RATE_POINTS: '10000000', WORKSPACE_RATE_POINTS: '100000000' };

const ROOT = path.resolve(__dirname, '..');
const TSX = path.join(ROOT, 'node_modules/.bin/tsx');
// BENCH_CPU_PROF=<dir> writes a V8 CPU profile of every started process there (open it in Chrome DevTools).
const PROFILE = process.env.BENCH_CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', path.resolve(process.env.BENCH_CPU_PROF)] : [];

export interface Env {
  [k: string]: string;
}

const children: ChildProcess[] = [];
// Whatever happens, the bench leaves no API or worker behind.
const killGroup = (c: ChildProcess, signal: NodeJS.Signals) => {
  // tsx runs the script in a child of its own: signal the whole process group.
  try {
    if (c.pid) process.kill(-c.pid, signal);
  } catch {
    /* already gone */
  }
};
process.on('exit', () => children.forEach((c) => c.exitCode === null && killGroup(c, 'SIGKILL')));

/** Starts a process and resolves when its output matches `ready`, or when `port` answers /healthz. */
export function start(script: string, env: Env, ready: RegExp | null, port?: number): Promise<ChildProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(TSX, [...PROFILE, script], { cwd: ROOT, env: { ...BENCH_BUDGETS, ...process.env, NODE_OPTIONS: SERVICE_NODE_OPTIONS, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    children.push(child);
    // bench/run.ts names a file here, so it can stop whatever a bench leaves behind before the next one starts.
    if (process.env.BENCH_CHILD_PIDS && child.pid) appendFileSync(process.env.BENCH_CHILD_PIDS, `${child.pid}\n`);
    const timer = setTimeout(() => reject(new Error(`${script} did not start`)), 30_000);
    if (port) {
      const poll = setInterval(() => {
        fetch(`http://127.0.0.1:${port}/healthz`).then(
          (r) => {
            if (r.ok) {
              clearInterval(poll);
              clearTimeout(timer);
              resolve(child);
            }
          },
          () => {},
        );
      }, 200);
    }
    const onData = (d: Buffer) => {
      if (ready?.test(d.toString())) {
        clearTimeout(timer);
        resolve(child);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (d: Buffer) => {
      if (/error/i.test(d.toString())) process.stderr.write(d);
    });
  });
}

export const stop = (c: ChildProcess) => new Promise<void>((r) => (c.exitCode !== null ? r() : (c.once('exit', () => r()), killGroup(c, 'SIGTERM'))));

export async function redisCalls(redis: IORedis): Promise<number> {
  const info = await redis.info('commandstats');
  return [...info.matchAll(/calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
}


/** The environment every bench process shares: its own database and Redis prefix, quiet logs, test mode. */
export const benchEnv = (databaseUrl: string, name: string, extra: Env = {}): Env => ({
  NODE_ENV: 'test',
  LOG_LEVEL: 'warn',
  DATABASE_URL: databaseUrl,
  REDIS_PREFIX: `hd_bench_${name}_${randomBytes(3).toString('hex')}`,
  API_KEY_PEPPER: 'bench-pepper-bench-pepper-bench-pepper-00',
  ...extra,
});

/** Drops and recreates a bench database; returns its URL and a function that drops it again. */
export async function freshDatabase(name: string) {
  const url = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/helpdesk');
  url.pathname = `/${name}`;
  const admin = new URL(url.toString());
  admin.pathname = '/postgres';
  const adminClient = new Client({ connectionString: admin.toString() });
  await adminClient.connect();
  await adminClient.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  await ensureDatabase(url.toString());
  return {
    url: url.toString(),
    drop: async () => {
      await adminClient.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await adminClient.end();
    },
  };
}

const TICK_MS = 10; // USER_HZ is 100 on Linux (getconf CLK_TCK); /proc/<pid>/stat counts CPU time in ticks.

/** CPU milliseconds (user + system) a process has used so far, and its process group id. */
function procCpu(pid: string): { ms: number; reaped: number; pgid: number; comm: string } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may hold spaces: the fields after it start past the last ')'.
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    const f = stat.slice(close + 2).split(' ');
    // utime + stime, and cutime + cstime: what the children it has reaped used (for the postmaster, the
    // backends that have ended).
    return { ms: (Number(f[11]) + Number(f[12])) * TICK_MS, reaped: (Number(f[13]) + Number(f[14])) * TICK_MS, pgid: Number(f[2]), comm };
  } catch {
    return null; // the process ended between the listing and the read
  }
}

/**
 * CPU used so far by each component on this machine: the started API and worker (each child's whole process
 * group, since tsx runs the script in a child), every PostgreSQL process and every Redis server. A PostgreSQL
 * backend that ended (a pool let an idle connection go) is counted through the postmaster, which reaped it.
 */
export function cpuSample(components: Record<string, ChildProcess>): Record<string, number> {
  const totals: Record<string, number> = { postgres: 0, redis: 0 };
  for (const name of Object.keys(components)) totals[name] = 0;
  const groups = new Map(Object.entries(components).map(([name, c]) => [c.pid, name]));
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const p = procCpu(pid);
    if (!p) continue;
    const group = groups.get(p.pgid);
    if (group) totals[group]! += p.ms;
    else if (p.comm === 'postgres') totals.postgres! += p.ms + p.reaped;
    else if (p.comm === 'redis-server') totals.redis! += p.ms;
  }
  return totals;
}

/**
 * CPU used so far by this process's main thread (the event loop that serves an in-process app; a load
 * generator in a worker thread is not counted) as `api`, with every PostgreSQL process and Redis server.
 */
export function cpuSampleHere(): Record<string, number> {
  const main = procCpu(`${process.pid}/task/${process.pid}`);
  return { ...cpuSample({}), api: main?.ms ?? NaN };
}

/** CPU milliseconds per unit of work for each component between two samples. */
export const cpuPer = (before: Record<string, number>, after: Record<string, number>, units: number) =>
  Object.fromEntries(Object.keys(after).map((k) => [k, units > 0 ? (after[k]! - (before[k] ?? 0)) / units : NaN]));

/** A migrated bench database with one workspace (its bootstrap answer, owner key included) and an enabled SMS connection. */
export async function smsWorkspace(config: Config, name = 'Bench') {
  const handle = createDb(config);
  await migrateToLatest(handle.db);
  const audit = createAuditService({ db: handle.db });
  const workspaces = createWorkspaceService({ db: handle.db, audit, apiKeys: createApiKeyService({ db: handle.db, config, audit }) });
  const ws = await workspaces.bootstrap({ workspace: name, ownerEmail: `${name.toLowerCase()}@bench.test`, ownerName: name });
  await handle.db
    .insertInto('channel_connections')
    .values({ tenant_id: ws.tenant_id, channel: 'sms', display_name: 'SMS', enabled: true, config: '{}', inbound_token_hash: randomBytes(32) })
    .execute();
  return { handle, ws };
}
