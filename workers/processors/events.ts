import type { JobData } from '../../src/queue/jobs';
import type { Services } from '../../src/services';

export const eventProcessors = (services: Services) => ({
  'events.deliver': (data: JobData<'events.deliver'>) => services.webhookDelivery.deliver(data.tenant_id, data.endpoint_id),
  'events.sweep': () => services.webhookDelivery.sweep(),
});
