import type { Redis } from 'ioredis';
import type { JobData } from '../../src/queue/jobs';
import { publishResults } from '../../src/queue/results';
import type { Services } from '../../src/services';

/** Every delivery of the batch is answered with one PUBLISH to the API process waiting for it. */
export const webhookProcessors = (services: Services, redis: Redis) => ({
  'webhooks.batch': async (data: JobData<'webhooks.batch'>) => {
    const results = await services.webhooks.processBatch(data.items);
    await publishResults(redis, data.reply_to, results);
    return { items: results.length };
  },
});
