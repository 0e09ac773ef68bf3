import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import type { Config } from '../../src/config';

const ROOT = path.resolve(__dirname, '../..');

export interface WorkerProcess {
  proc: ChildProcess;
  /** Everything the process wrote so far, stdout and stderr interleaved. */
  output(): string;
  stdout(): string;
}

/**
 * A real worker process (tsx workers/index.ts) on the test context's database and Redis prefix. tsx runs the
 * script in a child node process; `detached` puts both in a process group of their own, so killGroup reaches
 * the worker itself.
 */
export function spawnWorker(config: Config, opts: { env?: Record<string, string>; detached?: boolean } = {}): WorkerProcess {
  const proc = spawn(path.join(ROOT, 'node_modules/.bin/tsx'), ['workers/index.ts'], {
    cwd: ROOT,
    detached: opts.detached ?? false,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
      DATABASE_URL: config.DATABASE_URL,
      REDIS_URL: config.REDIS_URL,
      REDIS_PREFIX: config.REDIS_PREFIX,
      API_KEY_PEPPER: config.API_KEY_PEPPER,
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

export function killGroup(proc: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): void {
  try {
    process.kill(-proc.pid!, signal);
  } catch {
    // already gone
  }
}
