import type { Logger } from 'pino';
import type { Config } from './config';
import { createDb, type DbHandle } from './db';
import { closeRenderPool } from './domains/help-centre/render-pool';
import { createRedis, queuePrefix, type RedisClient } from './queue/connection';
import { createQueueHub, type QueueHub } from './queue/hub';
import { createResultBus, type ResultBus } from './queue/results';

export interface Runtime {
  db: DbHandle;
  /** The read replica (DATABASE_READ_URL), when one is configured. */
  readDb: DbHandle | null;
  redis: RedisClient;
  queues: QueueHub;
  bus: ResultBus;
  close(): Promise<void>;
}

/** Connections shared by the API and worker entry points (and by the test harness). */
export function openRuntime(config: Config, logger: Logger, role: 'http' | 'worker'): Runtime {
  const db = createDb(config, (err) => logger.warn({ err: err.message }, 'PostgreSQL connection lost'));
  const readDb = config.DATABASE_READ_URL ? createDb({ ...config, DATABASE_URL: config.DATABASE_READ_URL }, (err) => logger.warn({ err: err.message }, 'read replica connection lost')) : null;
  const redis = createRedis(config, role);
  const queues = createQueueHub(redis, (queue) => queuePrefix(config, queue), config);
  const bus = createResultBus(redis, config.REDIS_PREFIX);
  return {
    db,
    readDb,
    redis,
    queues,
    bus,
    async close() {
      await bus.close().catch(() => {});
      await queues.close().catch(() => {});
      await redis.quit().catch(() => redis.disconnect());
      await closeRenderPool();
      await db.close();
      await readDb?.close();
    },
  };
}
