import type { JobData } from '../../src/queue/jobs';
import type { Services } from '../../src/services';

export const rollupProcessors = (services: Services) => ({
  'rollups.fold': (data: JobData<'rollups.fold'>) => services.rollups.fold(data.tenant_id),
  'rollups.sweep': () => services.rollups.sweep(),
});
