import type { JobData, JobRun } from '../../src/queue/jobs';
import type { WorkerServices } from '../../src/services/worker';

/** Customer exports (issue 38): one person's document written to the file store, and the hourly sweep of expired ones. */
export const customerExportProcessors = (services: WorkerServices) => {
  /** Both are background work: they make way, bounded, while live intake saturates the host. */
  const bulk = services.intakePriority.background.run;
  return {
    'customers.export': (data: JobData<'customers.export'>, run: JobRun) => bulk(() => services.customerExports.run(data.tenant_id, data.export_id, run)),
    'customers.exports_sweep': () => bulk(() => services.customerExports.sweep()),
  };
};
