import type { ConfigSection } from '../../src/config';
import type { RedisClient } from '../../src/queue/connection';
import type { Services } from '../../src/services';
import { intakeBatchProcessor } from './intake';

export const ingestProcessors = (services: Services, config: ConfigSection<'workers'>, redis: RedisClient) => ({
  'ingest.batch': intakeBatchProcessor(config, redis, services.ingestProcessor.processBatch),
});
