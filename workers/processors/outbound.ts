import type { JobData } from '../../src/queue/jobs';
import type { WorkerServices } from '../../src/services/worker';

/** Replies on every channel: one attempt per job, and the sweep for lost jobs and dead workers' claims. */
export const outboundProcessors = (services: WorkerServices) => ({
  'outbound.send': (data: JobData<'outbound.send'>) => services.outbound.send(data.tenant_id, data.event_id),
  'outbound.sweep': () => services.outbound.sweep(),
});
