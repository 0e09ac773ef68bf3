import { section } from '../config';
import { createIdempotencyPrune } from '../domains/idempotency/prune';
import { createFetchTurns } from '../domains/inbound-files/fair-queue';
import { createIngestWorker } from '../domains/ingest/worker';
import { createScheduleFeeds } from '../domains/schedules/refresh';
import { createTimeRules } from '../domains/macros/time-rules';
import { createWebhookDelivery } from '../domains/webhook-endpoints/delivery';
import { createWebhookWorker } from '../domains/webhooks/worker';
import { createBackgroundPriority } from '../intake/priority';
import { createSharedServices, type ProcessDeps } from './shared';

/**
 * The workers' container (workers/index.ts; the job table's processors in workers/processors/ are handed it): the
 * shared pieces, and what only jobs run: the ingest and provider-webhook writers, the outbound webhook sender,
 * the files queue's fair turns, background work's yield to live intake and the idempotency prune. It builds
 * nothing only requests use (authentication, the router's budgets, the intake edges, web chat): see
 * src/services/api.ts and test/process-services.test.ts.
 */
export function createWorkerServices(deps: ProcessDeps) {
  const { db, config, queues, logger } = deps;
  // Inbound files' fair turns across workspaces (src/domains/inbound-files/fair-queue.ts): taken when the ingest
  // writer queues a message's fetch, given back when the files.fetch job settles.
  const fetchTurns = createFetchTurns({ redis: deps.redis, prefix: config.REDIS_PREFIX });
  const shared = createSharedServices(deps, {
    fetchTurns,
  });
  const { audit, events, customers, tickets, files, inboundFiles } = shared;
  const ingestProcessor = createIngestWorker({ db, tickets: tickets.commands, customers, logger, files: inboundFiles, uploads: files });
  // Live intake goes first (src/intake/priority/): the pressure reading and the one yield of background work
  // (the lanes per workspace are the API's).
  const intakePriority = createBackgroundPriority({ queues, config: { ...section(config, 'intakePriority'), INTAKE_QUEUE_SHARDS: config.INTAKE_QUEUE_SHARDS } });
  return {
    ...shared,
    intakePriority,
    // The hourly idempotency.prune job: the store's prune alone, not the API's idempotency service.
    idempotency: createIdempotencyPrune({ db }),
    ingestProcessor,
    // The mailbox.poll job: polled mail goes through the ingest writer, as pushed mail does.
    mailboxPolling: shared.mailbox.poller(ingestProcessor),
    fetchTurns,
    webhookProcessor: createWebhookWorker({ db, events }),
    // iCal holiday feeds (issue 37): read under the outbound address guard, daily and when a feed is set.
    scheduleFeeds: createScheduleFeeds({ db, queues, config: section(config, 'schedules'), logger }),
    // Time-based rules (issue 37): the minute's sweep and each rule's batches, through the macros' apply path.
    timeRules: createTimeRules({ db, queues, logger, tickets: tickets.commands, macros: shared.macros, batch: { max: config.TIME_RULE_BATCH_SIZE, targetMs: config.TIME_RULE_BATCH_MS, lanes: config.TIME_RULE_LANES } }),
    webhookDelivery: createWebhookDelivery({ db, config: section(config, 'outboundWebhooks', 'secrets'), audit, queues, logger, present: events.present, background: intakePriority.background }),
  };
}

/** The workers' container: what the processors (workers/registry.ts) are handed. */
export type WorkerServices = ReturnType<typeof createWorkerServices>;
