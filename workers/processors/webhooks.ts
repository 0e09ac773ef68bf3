import type { RedisClient } from '../../src/queue/connection';
import type { JobData, JobRun } from '../../src/queue/jobs';
import { answerBatch } from '../../src/queue/results';
import type { Services } from '../../src/services';

/** Every delivery of the batch is answered with one PUBLISH to the API process waiting for it. */
export const webhookProcessors = (services: Services, redis: RedisClient) => ({
  'webhooks.batch': (data: JobData<'webhooks.batch'>, run: JobRun) => answerBatch(redis, data.reply_to, data.items, run, () => services.webhookProcessor.processBatch(data.items)),
});
