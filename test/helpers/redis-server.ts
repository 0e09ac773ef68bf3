import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import IORedis from 'ioredis';
import { eventually } from './wait';
import { freePort } from './ports';

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

export interface OwnRedisCluster {
  /** `host:port,host:port,host:port`, as REDIS_CLUSTER_NODES takes it. */
  nodes: string;
  ports: number[];
  destroy(): Promise<void>;
}

/**
 * A Redis Cluster of the test's own: three masters (no replicas) from the system's `redis-server`, each on a
 * free loopback port with its own data directory, joined with `redis-cli --cluster create` (both ship in
 * Debian's redis-server/redis-tools packages). Resolves once every node reports the cluster ok and all 16384
 * slots assigned.
 */
export async function startOwnRedisCluster(): Promise<OwnRedisCluster> {
  const ports = [await freePort(), await freePort(), await freePort()];
  const dir = mkdtempSync(path.join(tmpdir(), 'hd-redis-cluster-'));
  const procs = ports.map((port) =>
    spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${port}.conf`, '--cluster-node-timeout', '5000'],
      { stdio: 'ignore' },
    ),
  );
  const destroy = async () => {
    await Promise.all(
      procs.map((p) =>
        p.exitCode !== null ? undefined : new Promise<void>((resolve) => (p.once('exit', () => resolve()), p.kill('SIGTERM'))),
      ),
    );
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const probes = ports.map((port) => {
      const probe = new IORedis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      probe.on('error', () => {});
      return probe;
    });
    const answering = async (probe: IORedis) => {
      try {
        if (probe.status !== 'ready') await probe.connect();
        return (await probe.ping()) === 'PONG';
      } catch {
        probe.disconnect();
        return false;
      }
    };
    await eventually(async () => ((await Promise.all(probes.map(answering))).every(Boolean) ? true : undefined), 10_000, 'the cluster nodes to answer', 50);
    const created = spawnSync('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], { encoding: 'utf8', timeout: 30_000 });
    if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stdout}${created.stderr}`);
    await eventually(
      async () => {
        const infos = await Promise.all(probes.map((p) => p.cluster('INFO') as Promise<string>));
        return infos.every((i) => i.includes('cluster_state:ok') && i.includes('cluster_slots_assigned:16384')) ? true : undefined;
      },
      20_000,
      'the cluster to be ok on every node',
      100,
    );
    probes.forEach((p) => p.disconnect());
  } catch (err) {
    await destroy();
    throw err;
  }
  return { nodes: ports.map((p) => `127.0.0.1:${p}`).join(','), ports, destroy };
}
