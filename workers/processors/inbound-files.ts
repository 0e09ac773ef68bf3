import type { JobData, JobRun } from '../../src/queue/jobs';
import type { WorkerServices } from '../../src/services/worker';

/** Inbound files (issue 34): one message's files fetched and stored, and the sweep of what dead workers left. */
export const inboundFileProcessors = (services: WorkerServices) => ({
  // The job's turn is given back when it settles: done, or failed for the last time (fair-queue.ts).
  'files.fetch': async (data: JobData<'files.fetch'>, run: JobRun) => {
    let settled = run.last;
    try {
      const out = await services.inboundFiles.fetch(data);
      settled = true;
      return out;
    } finally {
      if (settled) await services.fetchTurns.settle(data.tenant_id).catch(() => {});
    }
  },
  'files.inbound-sweep': () => services.inboundFiles.sweep(),
});
