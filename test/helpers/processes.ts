import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { Config } from '../../src/config';
import { SERVICE_NODE_OPTIONS } from '../../src/lib/node-options';
import { eventually } from './wait';

const ROOT = path.resolve(__dirname, '../..');

export interface ServiceProcess {
  proc: ChildProcess;
  /** Everything the process wrote so far, stdout and stderr interleaved. */
  output(): string;
  stdout(): string;
}
export type WorkerProcess = ServiceProcess;
export interface ApiProcess extends ServiceProcess {
  url: string;
}

/** A real service process (tsx <script>) on the test context's database and Redis prefix. */
function spawnService(script: string, config: Config, opts: { env?: Record<string, string>; detached?: boolean }): ServiceProcess {
  // Node itself with tsx's loader, not the tsx CLI: the CLI relays a signal to its child and SIGKILLs it (exit
  // 143) when the child does not acknowledge within 30 ms, which a busy machine's event loop sometimes cannot.
  const proc = spawn(process.execPath, ['--import', 'tsx', script], {
    cwd: ROOT,
    detached: opts.detached ?? false,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      NODE_ENV: 'test',
      // As deployed (src/lib/node-options.ts).
      NODE_OPTIONS: SERVICE_NODE_OPTIONS,
      LOG_LEVEL: 'info',
      DATABASE_URL: config.DATABASE_URL,
      REDIS_URL: config.REDIS_URL,
      REDIS_PREFIX: config.REDIS_PREFIX,
      ...(process.env.REDIS_CLUSTER_NODES ? { REDIS_CLUSTER_NODES: process.env.REDIS_CLUSTER_NODES } : {}),
      API_KEY_PEPPER: config.API_KEY_PEPPER,
      // As in startTestApp: suites probe from one address on purpose.
      AUTH_FAILURE_RATE_POINTS: String(config.AUTH_FAILURE_RATE_POINTS),
      INGEST_REFUSAL_RATE_POINTS: String(config.INGEST_REFUSAL_RATE_POINTS),
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let stdout = '';
  proc.stdout!.setEncoding('utf8').on('data', (c: string) => {
    out += c;
    stdout += c;
  });
  proc.stderr!.setEncoding('utf8').on('data', (c: string) => (out += c));
  return { proc, output: () => out, stdout: () => stdout };
}

/**
 * A real worker process (tsx workers/index.ts). tsx runs the script in a child node process; `detached`
 * puts both in a process group of their own, so killGroup reaches the worker itself.
 */
export function spawnWorker(config: Config, opts: { env?: Record<string, string>; detached?: boolean } = {}): WorkerProcess {
  return spawnService('workers/index.ts', config, opts);
}

/** Resolves once the worker process logged that its workers run; fails fast if it exits during start-up. */
export function workerStarted(worker: WorkerProcess, timeoutMs = 20_000): Promise<void> {
  return eventually(
    async () => {
      if (worker.proc.exitCode !== null) throw new Error(`worker exited during start-up: ${worker.output()}`);
      return worker.stdout().includes('workers started') ? true : undefined;
    },
    timeoutMs,
    'the worker process to start',
    25,
  ).then(() => undefined);
}

/** A real API process (tsx src/server.ts) on a free port; resolves once it listens, with its base URL. */
export async function spawnApi(config: Config, opts: { env?: Record<string, string> } = {}): Promise<ApiProcess> {
  // The "listening" line (with the port) is logged at info.
  const api = spawnService('src/server.ts', config, { detached: true, env: { PORT: '0', HOST: '127.0.0.1', ...opts.env, LOG_LEVEL: 'info' } });
  const port = await eventually(
    async () => {
      if (api.proc.exitCode !== null) throw new Error(`the API process exited at start:\n${api.output()}`);
      const m = /"port":(\d+)[^\n]*API listening/.exec(api.stdout());
      return m ? Number(m[1]) : undefined;
    },
    30_000,
    'the API process to listen',
  ).catch((err: Error) => {
    killGroup(api.proc);
    throw err;
  });
  return { ...api, url: `http://127.0.0.1:${port}` };
}

/** Resolves when the process has exited (at once if it already has), with its exit code. */
export function exited(proc: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => (proc.exitCode !== null || proc.signalCode !== null ? resolve(proc.exitCode) : proc.once('exit', (code) => resolve(code))));
}

export function killGroup(proc: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): void {
  try {
    process.kill(-proc.pid!, signal);
  } catch {
    // already gone
  }
}

/**
 * Kills a worker process once it is demonstrably mid-burst (`midBurst` returns a value: something committed,
 * jobs in its hands), waits for it to die, and readies the queue for a new worker: BullMQ gives an orphaned
 * job back only when a stall check finds it marked and its lock (30 s) expired, and checks are throttled
 * queue-wide by the "stalled-check" key the dead worker set at its start. Forgetting that throttle stands
 * for a worker that had been up a while, so recovery takes one stall interval instead of two; lock expiry
 * and detection stay BullMQ's. Jobs seen active just before the kill may finish in the moment before it
 * lands; the callers' guarantees hold either way, and the log says which case a run was.
 */
export async function killMidBurst<T>(opts: {
  proc: ChildProcess;
  midBurst: () => Promise<T | undefined>;
  activeCount: () => Promise<number>;
  redis: { del(key: string): Promise<number> };
  stalledCheckKey: string;
}): Promise<{ atKill: T; killedAt: number; orphaned: number }> {
  const atKill = await eventually(opts.midBurst, 10_000, 'the worker to be mid-burst', 5);
  killGroup(opts.proc);
  const killedAt = Date.now();
  await exited(opts.proc);
  const orphaned = await opts.activeCount();
  if (orphaned === 0) console.warn('SIGKILL landed between jobs this run: no job was orphaned');
  await opts.redis.del(opts.stalledCheckKey);
  return { atKill, killedAt, orphaned };
}
