import type { ConfigSection } from '../../src/config';
import type { IngestItem } from '../../src/domains/ingest/worker';
import type { RedisClient } from '../../src/queue/connection';
import type { WorkerServices } from '../../src/services/worker';
import { intakeBatchProcessor } from './intake';

export const ingestProcessors = (services: WorkerServices, config: ConfigSection<'workers'>, redis: RedisClient) => ({
  // Looked up per call, not captured: the write is the service's as it stands (tests observe it).
  'ingest.batch': intakeBatchProcessor(config, redis, (items: IngestItem[]) => services.ingestProcessor.processBatch(items)),
});
