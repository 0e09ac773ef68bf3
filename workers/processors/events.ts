import type { JobData } from '../../src/queue/jobs';
import type { WorkerServices } from '../../src/services/worker';

export const eventProcessors = (services: WorkerServices) => ({
  'events.deliver': (data: JobData<'events.deliver'>) => services.webhookDelivery.deliver(data.tenant_id, data.endpoint_id),
  'events.sweep': () => services.webhookDelivery.sweep(),
});
