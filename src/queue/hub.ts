import { Queue, QueueEvents } from 'bullmq';
import { duplicateRedis, type RedisClient } from './connection';
import { dependencyUnavailable } from '../lib/errors';
import { withTimeout } from '../lib/time';
import { JOBS, jobOptions, QUEUE_NAMES, shardName, type EnqueueOptions, type JobData, type JobName, type JobSettings, type QueueName } from './jobs';

export type AwaitedJob<R> = { state: 'completed'; jobId: string; result: R } | { state: 'accepted'; jobId: string };

export interface QueueHub {
  queue(name: QueueName): Queue;
  enqueue<N extends JobName>(name: N, data: JobData<N>, opts?: EnqueueOptions): Promise<string>;
  /**
   * Enqueues and waits up to `waitMs` for the worker's answer. On time-out the job still runs exactly
   * once; the caller answers 202 with the job id instead of the result.
   */
  enqueueAndAwait<R, N extends JobName = JobName>(name: N, data: JobData<N>, opts: { waitMs: number }): Promise<AwaitedJob<R>>;
  close(): Promise<void>;
}

/** Redis that does not answer within this is treated as down (503), not waited on. */
const REDIS_DEADLINE_MS = 3000;
const redisDown = () => dependencyUnavailable('Redis');

/** `prefixOf` gives each queue's key prefix (a hash tag per queue on a Redis Cluster: see queuePrefix). */
export function createQueueHub(connection: RedisClient, prefixOf: (queue: QueueName) => string, settings: JobSettings): QueueHub {
  const queues = new Map<QueueName, Queue>();
  const events = new Map<QueueName, { events: QueueEvents; conn: RedisClient }>();
  let closing = false;

  const queue = (name: QueueName) => {
    let q = queues.get(name);
    if (!q) {
      q = new Queue(name, { connection, prefix: prefixOf(name) });
      q.on('error', () => {});
      queues.set(name, q);
    }
    return q;
  };

  // QueueEvents holds a blocking connection of its own, so it is opened only for queues someone awaits.
  const queueEvents = async (name: QueueName) => {
    let e = events.get(name);
    if (!e) {
      // BullMQ duplicates this client for its blocking read and the copy inherits retryStrategy: once the hub
      // is closing, a failed reconnect ends the client instead of retrying, so close() cannot wait forever.
      const conn = duplicateRedis(connection, {
        maxRetriesPerRequest: null,
        retryStrategy: (attempt: number) => (closing ? null : Math.min(attempt * 200, 2000)),
      });
      conn.on('error', () => {});
      e = { events: new QueueEvents(name, { connection: conn, prefix: prefixOf(name) }), conn };
      e.events.on('error', () => {});
      events.set(name, e);
    }
    await e.events.waitUntilReady();
    return e.events;
  };

  /** Validates with the job's schema (producer and processor share it) and adds with the central options. */
  function add<N extends JobName>(name: N, data: JobData<N>, opts: EnqueueOptions) {
    const def = JOBS[name];
    const payload = def.data.parse(data);
    return withTimeout(queue(shardName(def.queue, opts.shard ?? 0)).add(name, payload, jobOptions(name, payload as JobData<N>, settings, opts)), REDIS_DEADLINE_MS, redisDown);
  }

  return {
    queue,
    async enqueue(name, data, opts = {}) {
      return (await add(name, data, opts)).id!;
    },
    async enqueueAndAwait<R, N extends JobName = JobName>(name: N, data: JobData<N>, opts: { waitMs: number }) {
      const ev = await withTimeout(queueEvents(JOBS[name].queue), REDIS_DEADLINE_MS, redisDown);
      const job = await add(name, data, {});
      try {
        const result = (await job.waitUntilFinished(ev, opts.waitMs)) as R;
        return { state: 'completed', jobId: job.id!, result } as AwaitedJob<R>;
      } catch (err) {
        if (err instanceof Error && /timed out before finishing/.test(err.message)) {
          return { state: 'accepted', jobId: job.id! } as AwaitedJob<R>;
        }
        throw err;
      }
    },
    async close() {
      closing = true;
      await Promise.all(
        [...events.values()].map(async (e) => {
          // Bounded: during an outage BullMQ waits for an 'end' that only the next failed reconnect brings.
          await Promise.race([e.events.close().catch(() => {}), new Promise((r) => setTimeout(r, 2000).unref())]);
          await e.conn.quit().catch(() => e.conn.disconnect());
        }),
      );
      await Promise.all([...queues.values()].map((q) => q.close()));
    },
  };
}

export { QUEUE_NAMES };
