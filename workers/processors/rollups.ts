import type { ConfigSection } from '../../src/config';
import type { JobData } from '../../src/queue/jobs';
import { bulkWork } from '../../src/queue/intake-pressure';
import type { Services } from '../../src/services';

export const rollupProcessors = (services: Services, config: ConfigSection<'workers'>) => {
  /** Folds and sweeps are bulk work: each waits, bounded, while live intake saturates the host, then runs. */
  const bulk = bulkWork(services.intakePressure, config.BACKGROUND_INTAKE_YIELD_MS);
  return {
    'rollups.fold': (data: JobData<'rollups.fold'>) => bulk(() => services.rollups.fold(data.tenant_id)),
    'rollups.sweep': () => bulk(() => services.rollups.sweep()),
  };
};
