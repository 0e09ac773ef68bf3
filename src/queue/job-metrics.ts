import { hostname } from 'node:os';
import type { RedisClient } from './connection';
import { AggregatorRegistry, Counter, Histogram, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';

/**
 * Job metrics live in the worker processes that run the jobs, but operators scrape one place: the API's
 * /metrics. Each worker process keeps ordinary prom-client metrics and publishes their JSON snapshot to Redis
 * every WORKER_METRICS_PUSH_MS (and on shutdown) under its own id; the API reads the live snapshots at scrape
 * time. Each series carries a `worker` label, so a restarted worker is a new series rather than a counter
 * that went backwards (sum by queue over rate() stays right across restarts); a snapshot not refreshed for
 * STALE_SECONDS disappears with its worker.
 */
const STALE_SECONDS = 300;
// One hash tag for the index and every snapshot: the publish (MULTI) and the read (MGET) touch several of
// them at once, which a Redis Cluster allows only within one slot.
const indexKey = (prefix: string) => `{${prefix}:metrics}:workers`;
const snapshotKey = (prefix: string, id: string) => `{${prefix}:metrics}:worker:${id}`;

export type JobOutcome = 'completed' | 'failed';

export function createJobMetrics(workerId = `${hostname()}-${process.pid}`) {
  const registry = new Registry();
  registry.setDefaultLabels({ worker: workerId });
  const duration = new Histogram({
    name: 'helpdesk_job_duration_seconds',
    help: 'Job run time per queue, job name and outcome (each attempt)',
    labelNames: ['queue', 'job', 'outcome'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const failures = new Counter({
    name: 'helpdesk_job_failures_total',
    help: 'Failed job attempts per queue and job name; final is "true" when no attempt is left',
    labelNames: ['queue', 'job', 'final'] as const,
    registers: [registry],
  });
  return {
    workerId,
    registry,
    observe(queue: string, job: string, seconds: number, outcome: JobOutcome, final = false) {
      duration.observe({ queue, job, outcome }, seconds);
      if (outcome === 'failed') failures.inc({ queue, job, final: String(final) });
    },
    async publish(redis: RedisClient, prefix: string): Promise<void> {
      const snapshot = JSON.stringify(await registry.getMetricsAsJSON());
      await redis
        .multi()
        .set(snapshotKey(prefix, workerId), snapshot, 'EX', STALE_SECONDS)
        .zadd(indexKey(prefix), Date.now(), workerId)
        .exec();
    },
  };
}

export type JobMetrics = ReturnType<typeof createJobMetrics>;

/** The live worker snapshots as one registry (empty when no worker has published), pruning stale ids. */
export async function readWorkerMetrics(redis: RedisClient, prefix: string): Promise<Registry> {
  await redis.zremrangebyscore(indexKey(prefix), '-inf', Date.now() - STALE_SECONDS * 1000);
  const ids = await redis.zrange(indexKey(prefix), 0, -1);
  const snapshots = ids.length ? await redis.mget(ids.map((id) => snapshotKey(prefix, id))) : [];
  const arrays = snapshots
    .filter((s): s is string => s !== null)
    .map((s) => JSON.parse(s) as MetricObjectWithValues<MetricValue<string>>[]);
  return AggregatorRegistry.aggregate(arrays);
}
