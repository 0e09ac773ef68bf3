import type { JobData } from '../../src/queue/jobs';
import type { WorkerServices } from '../../src/services/worker';

/** Erasure of a person (issue 38): background work, making way for live intake like the other bulk jobs. */
export const privacyProcessors = (services: WorkerServices) => ({
  'customers.erase': (data: JobData<'customers.erase'>) => services.intakePriority.background.run(() => services.privacy.runErasure(data.tenant_id, data.erasure_id)),
  'customers.erase_sweep': () => services.privacy.requeueStale(),
});
