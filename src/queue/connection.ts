import IORedis, { Cluster, type Redis, type RedisOptions } from 'ioredis';
import type { Config } from '../config';

/**
 * A connection to Redis: a standalone server (REDIS_URL) or a Redis Cluster (REDIS_CLUSTER_NODES). Both
 * answer the same commands; what differs is which keys may meet in one command (only keys of one hash
 * slot), so every multi-key use in this code keeps its keys under one hash tag.
 */
export type RedisClient = Redis | Cluster;

type RedisConfig = Pick<Config, 'REDIS_URL' | 'REDIS_CLUSTER_NODES'>;

/**
 * Two flavours: the HTTP tier fails fast (one retry per command, short connect timeout) so an absent Redis
 * becomes a 503; workers block and reconnect forever, as BullMQ requires of a Worker connection.
 */
function optionsFor(role: 'http' | 'worker'): RedisOptions {
  return role === 'worker'
    ? { maxRetriesPerRequest: null, enableReadyCheck: true }
    : { maxRetriesPerRequest: 1, connectTimeout: 2000, enableReadyCheck: true, retryStrategy: (n) => Math.min(n * 200, 2000) };
}

export function createRedis(config: RedisConfig, role: 'http' | 'worker'): RedisClient {
  const options = optionsFor(role);
  const redis: RedisClient = config.REDIS_CLUSTER_NODES
    ? new Cluster(config.REDIS_CLUSTER_NODES, {
        redisOptions: options,
        // Sharded pub/sub (SSUBSCRIBE) is served by the node that owns the channel's slot.
        shardedSubscribers: true,
        // The HTTP tier's commands fail fast on a cluster too; workers wait for it.
        ...(role === 'http' ? { clusterRetryStrategy: (n: number) => Math.min(n * 200, 2000) } : {}),
      })
    : new IORedis(config.REDIS_URL, options);
  // Connection errors surface on the commands that need Redis; an unhandled 'error' event would crash.
  redis.on('error', () => {});
  return redis;
}

/** A second connection like `redis` (for a blocking read or a subscription), with some options changed. */
export function duplicateRedis(redis: RedisClient, options: RedisOptions): RedisClient {
  const copy = redis instanceof Cluster ? redis.duplicate(undefined, { redisOptions: { ...redis.options.redisOptions, ...options } }) : redis.duplicate(options);
  copy.on('error', () => {});
  return copy;
}

export const isCluster = (redis: RedisClient): redis is Cluster => redis instanceof Cluster;

/**
 * The key prefix of one BullMQ queue. On a cluster every key of a queue must hash to one slot (its scripts
 * touch several keys at once), so the prefix is a hash tag naming the queue, BullMQ's documented pattern:
 * `{hd:ingest}:ingest:wait`. A tag per queue, not one for all, spreads the queues over the masters. On a
 * standalone server the prefix stays as it always was, so an upgrade does not strand jobs already queued.
 */
export function queuePrefix(config: Pick<Config, 'REDIS_PREFIX' | 'REDIS_CLUSTER_NODES'>, queue: string): string {
  return config.REDIS_CLUSTER_NODES ? `{${config.REDIS_PREFIX}:${queue}}` : config.REDIS_PREFIX;
}

/** Whether the connection can serve commands: every master answers (a cluster), or the server does. */
export async function redisReady(redis: RedisClient): Promise<void> {
  if (!isCluster(redis)) {
    await redis.ping();
    return;
  }
  const info = String(await redis.cluster('INFO'));
  if (!info.includes('cluster_state:ok')) throw new Error('the Redis Cluster is not ok');
  const masters = redis.nodes('master');
  if (masters.length === 0) throw new Error('no Redis Cluster master known');
  await Promise.all(masters.map((m) => m.ping()));
}
