import type { JobData } from '../../src/queue/jobs';
import type { WorkerServices } from '../../src/services/worker';

export const rollupProcessors = (services: WorkerServices) => {
  /** Folds and sweeps are background work: each makes way, bounded, while live intake saturates the host, then runs. */
  const bulk = services.intakePriority.background.run;
  return {
    'rollups.fold': (data: JobData<'rollups.fold'>) => bulk(() => services.rollups.fold(data.tenant_id)),
    'rollups.sweep': () => bulk(() => services.rollups.sweep()),
  };
};
