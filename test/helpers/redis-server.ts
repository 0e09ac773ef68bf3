import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import IORedis from 'ioredis';
import { eventually } from './wait';

/** A free loopback port (the OS picks one; the listener is closed before the port is used). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

export interface OwnRedis {
  url: string;
  /** Stops the server as an operator would (SIGTERM: it writes its append-only file and exits). */
  stop(): Promise<void>;
  /** Starts it again on the same port and data directory; resolves once it answers PING. */
  start(): Promise<void>;
  /** Stops it for good and removes its data directory. */
  destroy(): Promise<void>;
}

/**
 * A Redis of the test's own on its own port, so the test can stop and restart it without touching the
 * machine's shared Redis. It keeps an append-only file, as a BullMQ deployment should (docker-compose runs
 * Redis the same way): queued jobs survive the restart.
 */
export async function startOwnRedis(): Promise<OwnRedis> {
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'hd-redis-'));
  const url = `redis://127.0.0.1:${port}`;
  let proc: ChildProcess | null = null;

  const start = async () => {
    proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'yes', '--appendfsync', 'everysec', '--dir', dir], {
      stdio: 'ignore',
    });
    const probe = new IORedis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => {});
    try {
      await eventually(
        async () => {
          try {
            if (probe.status !== 'ready') await probe.connect();
            return (await probe.ping()) === 'PONG' ? true : undefined;
          } catch {
            probe.disconnect();
            return undefined;
          }
        },
        10_000,
        `redis-server on port ${port} to answer`,
        50,
      );
    } finally {
      probe.disconnect();
    }
  };

  const stop = async () => {
    const p = proc;
    proc = null;
    if (!p || p.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      p.once('exit', () => resolve());
      p.kill('SIGTERM');
    });
  };

  await start();
  return {
    url,
    start,
    stop,
    async destroy() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
