import type { Redis } from 'ioredis';
import type { JobData } from '../../src/queue/jobs';
import { publishResults } from '../../src/queue/results';
import type { Services } from '../../src/services';

/** Every item of the batch is answered with one PUBLISH to the API process that is waiting for it. */
export const ingestProcessors = (services: Services, redis: Redis) => ({
  'ingest.batch': async (data: JobData<'ingest.batch'>) => {
    const results = await services.ingestProcessor.processBatch(data.items);
    await publishResults(redis, data.reply_to, results);
    return { items: results.length };
  },
});
