import type { ConfigSection } from '../../src/config';
import type { RedisClient } from '../../src/queue/connection';
import type { Services } from '../../src/services';
import { intakeBatchProcessor } from './intake';

export const webhookProcessors = (services: Services, config: ConfigSection<'workers'>, redis: RedisClient) => ({
  'webhooks.batch': intakeBatchProcessor(config, redis, services.webhookProcessor.processBatch),
});
