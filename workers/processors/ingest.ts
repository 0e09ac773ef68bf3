import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { JobData } from '../../src/queue/jobs';
import { answerBatch } from '../../src/queue/results';
import type { Services } from '../../src/services';

/** Every item of the batch is answered with one PUBLISH to the API process that is waiting for it. */
export const ingestProcessors = (services: Services, redis: Redis) => ({
  'ingest.batch': (data: JobData<'ingest.batch'>, job?: Job) => answerBatch(redis, data.reply_to, data.items, job, () => services.ingestProcessor.processBatch(data.items)),
});
