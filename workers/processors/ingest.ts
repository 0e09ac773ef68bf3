import type { RedisClient } from '../../src/queue/connection';
import type { JobData, JobRun } from '../../src/queue/jobs';
import { answerBatch } from '../../src/queue/results';
import type { Services } from '../../src/services';

/** Every item of the batch is answered with one PUBLISH to the API process that is waiting for it. */
export const ingestProcessors = (services: Services, redis: RedisClient) => ({
  'ingest.batch': (data: JobData<'ingest.batch'>, run: JobRun) => answerBatch(redis, data.reply_to, data.items, run, () => services.ingestProcessor.processBatch(data.items)),
});
