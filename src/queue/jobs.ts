import type { JobsOptions } from 'bullmq';
import { z } from 'zod';

export const QUEUE_NAMES = ['ingest', 'webhooks', 'mailbox', 'outbound', 'rollups', 'maintenance'] as const;
export type QueueName = (typeof QUEUE_NAMES)[number];

/**
 * Every job: its queue, its payload schema (shared by producer and processor) and nothing else. Later
 * domains add their rows here; the worker refuses to start if a row has no processor or two.
 */
export const JOBS = {
  'audit.prune': {
    queue: 'maintenance',
    data: z.object({ retention_days: z.number().int().min(1).optional() }),
  },
} as const satisfies Record<string, { queue: QueueName; data: z.ZodType }>;

export type JobName = keyof typeof JOBS;
export type JobData<N extends JobName> = z.output<(typeof JOBS)[N]['data']>;

/** All retry, retention and dedupe options in one place. */
export function jobOptions(name: JobName, overrides: { jobId?: string } = {}): JobsOptions {
  return {
    attempts: 5,
    backoff: { type: 'exponential', delay: 1000 },
    // Completed jobs are evidence for a short while; failed ones stay longer, bounded, for inspection and retry.
    removeOnComplete: { age: 3600, count: 10_000 },
    removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
    ...(overrides.jobId ? { jobId: overrides.jobId } : {}),
    ...(name === 'audit.prune' ? { attempts: 3 } : {}),
  };
}
