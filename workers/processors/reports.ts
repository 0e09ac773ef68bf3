import type { JobData } from '../../src/queue/jobs';
import type { WorkerServices } from '../../src/services/worker';

export const reportProcessors = (services: WorkerServices) => {
  /** Folds, re-bucketings and sweeps are background work: each makes way, bounded, while live intake saturates the host. */
  const bulk = services.intakePriority.background.run;
  return {
    'reports.fold': (data: JobData<'reports.fold'>) => bulk(() => services.reports.fold(data.tenant_id)),
    'reports.rebuild': (data: JobData<'reports.rebuild'>) => bulk(() => services.reports.rebuildDays(data.tenant_id)),
    'reports.sweep': () => bulk(() => services.reports.sweep()),
  };
};
