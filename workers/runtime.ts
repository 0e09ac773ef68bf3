import { Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { Config } from '../src/config';
import { createRedis, queuePrefix, type RedisClient } from '../src/queue/connection';
import { createJobMetrics } from '../src/queue/job-metrics';
import type { QueueHub } from '../src/queue/hub';
import { schedules, shardsOf } from '../src/queue/jobs';
import type { WorkerServices } from '../src/services/worker';
import { buildRegistry, defaultProcessorGroups } from './registry';

export interface WorkerSet {
  workers: Worker[];
  /** Stops taking jobs, waits for the ones in flight, then closes the blocking connections. */
  close(): Promise<void>;
}

/**
 * The queues this process runs: WORKER_QUEUES (all when empty) less WORKER_QUEUES_EXCEPT. A name no queue has
 * stops the start, saying which: a typo must not leave a queue with no process.
 */
export function chosenQueues<Q extends string>(all: readonly Q[], config: Pick<Config, 'WORKER_QUEUES' | 'WORKER_QUEUES_EXCEPT'>): Q[] {
  const list = (v: string) => v.split(',').map((x) => x.trim()).filter(Boolean);
  const only = list(config.WORKER_QUEUES);
  const except = list(config.WORKER_QUEUES_EXCEPT);
  for (const [setting, names] of [['WORKER_QUEUES', only], ['WORKER_QUEUES_EXCEPT', except]] as const) {
    const unknown = names.filter((n) => !(all as readonly string[]).includes(n));
    if (unknown.length > 0) throw new Error(`${setting} names no queue: ${unknown.join(', ')} (the queues: ${all.join(', ')})`);
  }
  const chosen = all.filter((q) => (only.length === 0 || only.includes(q)) && !except.includes(q));
  if (chosen.length === 0) throw new Error('WORKER_QUEUES and WORKER_QUEUES_EXCEPT leave this process no queue to run');
  return chosen;
}

export async function startWorkers(deps: { config: Config; logger: Logger; services: WorkerServices; queues: QueueHub; redis: RedisClient }): Promise<WorkerSet> {
  const { config, logger, services, queues } = deps;
  const registry = buildRegistry(defaultProcessorGroups(services, config, deps.redis));
  const connections: RedisClient[] = [];
  const workers: Worker[] = [];
  const metrics = createJobMetrics();
  const since = (start: number | undefined) => (start ? Math.max(0, Date.now() - start) / 1000 : 0);
  // Every queue the job table names, each intake queue once per shard (INTAKE_QUEUE_SHARDS); each gets its own
  // slots, so a process with shards runs more intake jobs at once, bounded again by its database pool.
  const names = chosenQueues(registry.queues(), config).flatMap((q) => shardsOf(q, config.INTAKE_QUEUE_SHARDS));
  for (const queueName of names) {
    const connection = createRedis(config, 'worker');
    connections.push(connection);
    const worker = new Worker(queueName, async (job) => registry.run(job.name, job.data, job), {
      connection,
      prefix: queuePrefix(config, queueName),
      // Webhook sends wait on receivers, not on this process: they get slots of their own (per endpoint
      // they are bounded again by OUTBOUND_WEBHOOK_ENDPOINT_CONCURRENCY).
      // Reply sends likewise wait on messaging providers (OUTBOUND_CONCURRENCY).
      // Inbound file fetches wait on providers too (FILES_FETCH_CONCURRENCY downloads per process, issue 34).
      concurrency:
        queueName === 'deliveries'
          ? config.OUTBOUND_WEBHOOK_DELIVERY_CONCURRENCY
          : queueName === 'outbound'
            ? config.OUTBOUND_CONCURRENCY
            : queueName === 'files'
              ? config.FILES_FETCH_CONCURRENCY
              : config.WORKER_CONCURRENCY,
    });
    worker.on('completed', (job) => metrics.observe(queueName, job.name, since(job.processedOn), 'completed'));
    worker.on('failed', (job, err) => {
      logger.warn({ queue: queueName, job_id: job?.id, job: job?.name, err }, 'job failed');
      if (job) metrics.observe(queueName, job.name, since(job.processedOn), 'failed', job.attemptsMade >= (job.opts.attempts ?? 1));
    });
    worker.on('error', (err) => logger.warn({ queue: queueName, err }, 'worker error'));
    workers.push(worker);
  }
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  // The repeating jobs are rows of the job table; schedulers are keyed by id, so restarts and replicas keep
  // exactly one of each.
  for (const s of schedules(config)) await queues.queue(s.queue).upsertJobScheduler(s.id, { every: s.everyMs }, { name: s.name, data: {} });
  // Outbound webhooks wake at commit (the events NOTIFY); the events.sweep job covers what this misses.
  // LISTEN needs a session of its own: behind a transaction-mode pooler it goes straight to PostgreSQL.
  const commits = services.webhookDelivery.listenForCommits(config.DATABASE_LISTEN_URL ?? config.DATABASE_URL);
  // Macro changes drop the remembered "does any macro listen for this event?" answers (ingest publishes triggers).
  const macroChanges = services.macroTriggers.listenForChanges(config.DATABASE_LISTEN_URL ?? config.DATABASE_URL);
  const publish = () => metrics.publish(deps.redis, config.REDIS_PREFIX).catch((err: Error) => logger.warn({ err: err.message }, 'job metrics not published'));
  const publisher = setInterval(() => void publish(), config.WORKER_METRICS_PUSH_MS).unref();
  await publish();
  logger.info({ queues: names, worker_id: metrics.workerId }, 'workers started');
  return {
    workers,
    async close() {
      await commits.close();
      await macroChanges.close();
      await Promise.all(workers.map((w) => w.close()));
      clearInterval(publisher);
      await publish();
      await Promise.all(connections.map((c) => c.quit().catch(() => c.disconnect())));
    },
  };
}
