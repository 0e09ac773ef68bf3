import { UnrecoverableError, type Job } from 'bullmq';
import { withLogContext } from '../src/lib/log-context';
import { runOf, type JobRun } from '../src/queue/jobs';
import type { Config } from '../src/config';
import { JOBS, type JobName, type LogicalQueue } from '../src/queue/jobs';
import type { WorkerServices } from '../src/services/worker';
import { maintenanceProcessors } from './processors/maintenance';
import { ingestProcessors } from './processors/ingest';
import { mailboxProcessors } from './processors/mailbox';
import { outboundProcessors } from './processors/outbound';
import { webhookProcessors } from './processors/webhooks';
import { rollupProcessors } from './processors/rollups';
import { reportProcessors } from './processors/reports';
import { eventProcessors } from './processors/events';
import { inboundFileProcessors } from './processors/inbound-files';
import { scheduleProcessors } from './processors/schedules';
import { retentionProcessors } from './processors/retention';
import { customerExportProcessors } from './processors/customer-exports';
import { privacyProcessors } from './processors/privacy';
import type { RedisClient } from '../src/queue/connection';

/** `run` says which try this is and whether it is the last (the last records a failure or tells the waiters). */
export type Processor = (data: never, run: JobRun) => Promise<unknown>;

export const defaultProcessorGroups = (services: WorkerServices, config: Config, redis: RedisClient): Record<string, Processor>[] => [
  maintenanceProcessors(services, config),
  ingestProcessors(services, config, redis),
  mailboxProcessors(services),
  outboundProcessors(services),
  webhookProcessors(services, config, redis),
  rollupProcessors(services),
  reportProcessors(services),
  eventProcessors(services),
  inboundFileProcessors(services),
  scheduleProcessors(services, config),
  retentionProcessors(services),
  customerExportProcessors(services),
  privacyProcessors(services),
];

/**
 * Collects every processor and refuses to start when a known job has none, or two, so that no job can be
 * enqueued into a void or handled by the wrong code.
 */
export function buildRegistry(groups: Record<string, Processor>[]) {
  const handlers = new Map<string, Processor>();
  for (const group of groups) {
    for (const [name, fn] of Object.entries(group)) {
      if (!(name in JOBS)) throw new Error(`worker registry: processor for unknown job "${name}"`);
      if (handlers.has(name)) throw new Error(`worker registry: job "${name}" has two processors`);
      handlers.set(name, fn as Processor);
    }
  }
  for (const name of Object.keys(JOBS)) {
    if (!handlers.has(name)) throw new Error(`worker registry: job "${name}" has no processor`);
  }
  return {
    queues(): LogicalQueue[] {
      return [...new Set(Object.values(JOBS).map((j) => j.queue))];
    },
    /** Validates the payload with the producer's schema; a payload no retry can fix fails for good. */
    async run(name: string, data: unknown, job?: Job): Promise<unknown> {
      const def = JOBS[name as JobName];
      const handler = handlers.get(name);
      if (!def || !handler) throw new UnrecoverableError(`no processor for job "${name}"`);
      const parsed = def.data.safeParse(data);
      if (!parsed.success) throw new UnrecoverableError(`invalid payload for job "${name}": ${parsed.error.message}`);
      // Every line logged while the job runs names it, and its workspace when the job is about one.
      const tenantId = (parsed.data as { tenant_id?: unknown }).tenant_id;
      return withLogContext({ ...(job?.id ? { job_id: job.id } : {}), job: name, ...(typeof tenantId === 'string' ? { tenant_id: tenantId } : {}) }, () =>
        handler(parsed.data as never, runOf(job)),
      );
    },
  };
}
