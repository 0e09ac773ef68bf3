import type { ConfigSection } from '../../src/config';
import type { WebhookItem } from '../../src/domains/webhooks/worker';
import type { RedisClient } from '../../src/queue/connection';
import type { WorkerServices } from '../../src/services/worker';
import { intakeBatchProcessor } from './intake';

export const webhookProcessors = (services: WorkerServices, config: ConfigSection<'workers'>, redis: RedisClient) => ({
  // Looked up per call, not captured: the write is the service's as it stands (tests observe it).
  'webhooks.batch': intakeBatchProcessor(config, redis, (items: WebhookItem[]) => services.webhookProcessor.processBatch(items)),
});
