import IORedis, { type Redis, type RedisOptions } from 'ioredis';
import type { Config } from '../config';

/**
 * Two flavours: the HTTP tier fails fast (one retry per command, short connect timeout) so an absent Redis
 * becomes a 503; workers block and reconnect forever, as BullMQ requires of a Worker connection.
 */
export function createRedis(config: Pick<Config, 'REDIS_URL'>, role: 'http' | 'worker'): Redis {
  const options: RedisOptions =
    role === 'worker'
      ? { maxRetriesPerRequest: null, enableReadyCheck: true }
      : { maxRetriesPerRequest: 1, connectTimeout: 2000, enableReadyCheck: true, retryStrategy: (n) => Math.min(n * 200, 2000) };
  const redis = new IORedis(config.REDIS_URL, options);
  // Connection errors surface on the commands that need Redis; an unhandled 'error' event would crash.
  redis.on('error', () => {});
  return redis;
}
