import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import { section, type Config } from './config';
import type { Db } from './db';
import { createAgentService } from './domains/agents/service';
import { createApiKeyService } from './domains/api-keys/service';
import { createAuditService } from './domains/audit/service';
import { createIdentityService } from './domains/identity/service';
import { createMemberService } from './domains/members/service';
import { createWorkspaceService, createWorkspaceSettingsService } from './domains/workspaces/service';
import { createCustomerService } from './domains/customers/service';
import { createTicketService } from './domains/tickets/service';
import { createSlaPolicyService } from './domains/sla/service';
import type { QueueHub } from './queue/hub';
import type { ResultBus } from './queue/results';
import type { RedisClient } from './queue/connection';
import { createChannelService } from './domains/channels/service';
import { createIngestGateway } from './domains/ingest/edge';
import { createIngestWorker } from './domains/ingest/worker';
import { createWebChatService } from './domains/web-chat/service';
import { createNotificationService } from './domains/notifications/service';
import { createTeamService } from './domains/teams/service';
import { createSavedViewService } from './domains/saved-views/service';
import { createMacroService, createMacroTriggerSink } from './domains/macros/service';
import { createMailboxService } from './domains/mailbox/service';
import { createOutboundService, createOutboundSink } from './domains/outbound/service';
import { createProviderHooks } from './domains/provider-hooks/service';
import { createWebhookEdge } from './domains/webhooks/edge';
import { createWebhookService } from './domains/webhooks/service';
import { createWebhookWorker } from './domains/webhooks/worker';
import { createRollupService } from './domains/rollups/service';
import { createWorkService } from './domains/work/service';
import { createIdempotencyService } from './domains/idempotency/service';
import { createHelpCentreService } from './domains/help-centre/service';
import { createArticleService } from './domains/help-centre/articles';
import { createLimits } from './limits';
import { createEventService } from './domains/events/service';
import { createWebhookEndpointService } from './domains/webhook-endpoints/service';
import { createWebhookDelivery } from './domains/webhook-endpoints/delivery';
import { createIntakePriority } from './intake/priority';
import { createReadRouting } from './db/reads';
import { createAfterAnswer } from './lib/after-answer';
import { createFileService } from './domains/files/service';
import { blobStoreFromConfig } from './domains/files/blobs';
import { createFetchTurns } from './domains/inbound-files/fair-queue';
import { scannerFromConfig } from './domains/files/scan';
import { createInboundFiles } from './domains/inbound-files/service';
import { createSkippedRecorder } from './domains/inbound-files/skipped';

/** The service container: each factory gets only the dependencies it needs. */
export function createServices(deps: { db: Db; readDb?: Db | null; config: Config; queues: QueueHub; logger: Logger; redis: RedisClient; bus: ResultBus }) {
  const { db, config, queues, logger, redis, bus } = deps;
  const reads = createReadRouting({ primary: db, replica: deps.readDb ?? null, redis, config, logger });
  const audit = createAuditService({ db });
  const identity = createIdentityService({ db, config: section(config, 'identity', 'secrets'), audit });
  const events = createEventService({ db, config: section(config, 'events', 'redis'), redis, logger });
  const apiKeys = createApiKeyService({ db, config: section(config, 'secrets'), audit });
  const customers = createCustomerService({ db, events, reads });
  const notifications = createNotificationService({ db });
  const channels = createChannelService({ db, config: section(config, 'secrets') });
  // What requests start after their commit and do not wait for; shutdown waits for it (src/server.ts).
  const later = createAfterAnswer(logger);
  // Whether a workspace has a macro listening for a ticket event, remembered while this process LISTENs for
  // macro changes (the API server and the workers start that; see listenForChanges).
  const macroTriggers = createMacroTriggerSink({ db, queues });
  const outboundSink = createOutboundSink({
    queues,
    logger,
    publicBaseUrl: config.PUBLIC_BASE_URL,
    // The mailbox is made below; by the time a reply is written it exists.
    emailVia: async (tenantId) => ((await mailbox.sender(tenantId)) ? 'mailbox' : 'postmark'),
  });
  // Attachments (issue 34): the blob store of FILES_DIR or FILES_S3_*, scanning through clamd when configured. A
  // file's state change moves its ticket's version (the tickets service is made just below).
  // One blob store for the process: uploads, downloads and the inbound fetches share its client (and S3 pool).
  const blobs = blobStoreFromConfig(section(config, 'files'));
  const files = createFileService({
    db,
    config: section(config, 'files'),
    blobs,
    logger,
    events,
    redis,
    redisPrefix: config.REDIS_PREFIX,
    scanner: scannerFromConfig(section(config, 'scanning')),
    bumpTicketVersion: (tx, tenantId, ticketId) => tickets.commands.bumpVersion(tx, tenantId, ticketId),
    // Signed file links (Twilio's MMS media): a key of their own, derived from the pepper.
    linkKey: createHmac('sha256', config.API_KEY_PEPPER).update('helpdesk file links v1').digest(),
  });
  const tickets = createTicketService({
    db,
    later,
    reads,
    customers,
    notifications,
    queues,
    logger,
    triggers: macroTriggers,
    outbound: outboundSink,
    events,
    attachments: files,
    threadWindowHours: config.THREAD_WINDOW_HOURS,
    timelineCacheBytes: config.TICKET_TIMELINE_CACHE_MB * 1024 * 1024,
  });
  const helpCentre = createHelpCentreService({ db, config: section(config, 'helpCentre') });
  const rollups = createRollupService({ db, queues, logger, reads });
  // Inbound files (issue 34): staged at the edge, fetched by the files.fetch job after the ingest commit.
  const recordSkipped = createSkippedRecorder({ db, bumpTicketVersion: (tx, tenantId, ticketId) => tickets.commands.bumpVersion(tx, tenantId, ticketId) });
  const fetchTurns = createFetchTurns({ redis, prefix: config.REDIS_PREFIX });
  const inboundFiles = createInboundFiles({
    db,
    // The mailbox APIs' base URLs only (not the OAuth clients): polled mail's files are read from them.
    config: { ...section(config, 'inboundFiles', 'outbound', 'files'), GOOGLE_GMAIL_API_URL: config.GOOGLE_GMAIL_API_URL, MICROSOFT_GRAPH_API_URL: config.MICROSOFT_GRAPH_API_URL },
    blobs,
    queues,
    channels,
    logger,
    files: () => ({ storeInbound: (tenantId, to, opts) => files.storeInbound(tenantId, to, opts), recordSkipped }),
    turns: fetchTurns,
    // Polled mail's files are fetched with the mailbox's token, asked for when the file is (the mailbox is made
    // below, and exists before any job runs); the job never carries it.
    mailboxTokens: (tenantId, mailboxOfFile, opts) => mailbox.tokenForFiles(tenantId, mailboxOfFile, opts),
  });
  const ingestProcessor = createIngestWorker({ db, tickets: tickets.commands, customers, logger, files: inboundFiles, uploads: files });
  // Live intake goes first (src/intake/priority/): the pressure reading, the lanes per workspace shared by channel
  // ingest and provider webhooks, and the one yield of background work.
  const intakePriority = createIntakePriority({ queues, config: { ...section(config, 'intakePriority'), INTAKE_QUEUE_SHARDS: config.INTAKE_QUEUE_SHARDS } });
  const lanes = intakePriority.lanes;
  const mailbox = createMailboxService({ db, config: section(config, 'mailbox', 'secrets', 'http'), queues, logger, channels, ingest: ingestProcessor, events, files: inboundFiles });
  const outbound = createOutboundService({ db, config: section(config, 'outbound', 'http'), queues, logger, channels, mailbox, tickets: tickets.commands, sink: outboundSink, files });
  const ingest = createIngestGateway({ db, config: section(config, 'intake', 'redis', 'http'), redis, queues, bus, channels, lanes, files: inboundFiles });
  return {
    later,
    macroTriggers,
    reads,
    intakePriority,
    identity,
    // Every budget the router's stages use (src/limits/): the API's, failed authentication and intake refusals.
    limits: createLimits({ redis, config: section(config, 'http', 'identity', 'intake', 'redis'), logger, knownToken: identity.knownToken }),
    idempotency: createIdempotencyService({ db, config: section(config, 'http', 'secrets') }),
    audit,
    events,
    apiKeys,
    members: createMemberService({ db, audit, apiKeys }),
    agents: createAgentService({ db, audit }),
    workspaces: createWorkspaceService({ db, apiKeys, audit }),
    customers,
    notifications,
    tickets,
    files,
    teams: createTeamService({ db, config: section(config, 'tickets'), tickets: tickets.commands }),
    savedViews: createSavedViewService({ db }),
    macros: createMacroService({ db, tickets: tickets.commands, queries: tickets.queries }),
    channels,
    ingest,
    webChat: createWebChatService({ db, config: section(config, 'webChat', 'events', 'secrets', 'redis'), redis, logger, channels, ingest, files, live: events.live }),
    ingestProcessor,
    inboundFiles,
    fetchTurns,
    slaPolicies: createSlaPolicyService({ db }),
    rollups,
    work: createWorkService({ db, rollups, tickets: { find: tickets.queries.find, bumpVersion: tickets.commands.bumpVersion }, events }),
    settings: createWorkspaceSettingsService({ db, config: section(config, 'secrets'), audit }),
    helpCentre,
    articles: createArticleService({ db, config: section(config, 'helpCentre'), centres: helpCentre }),
    webhooks: createWebhookService({ db, config: section(config, 'webhooks', 'secrets', 'http'), audit }),
    webhookIntake: createWebhookEdge({ db, config: section(config, 'webhooks', 'secrets', 'redis', 'http'), redis, queues, bus, lanes }),
    webhookProcessor: createWebhookWorker({ db, events }),
    webhookEndpoints: createWebhookEndpointService({ db, config: section(config, 'outboundWebhooks', 'secrets'), audit, queues }),
    webhookDelivery: createWebhookDelivery({ db, config: section(config, 'outboundWebhooks', 'secrets'), audit, queues, logger, present: events.present, background: intakePriority.background }),
    mailbox,
    outbound,
    providerHooks: createProviderHooks({ db, config: section(config, 'http', 'intake'), channels, ingest, outbound }),
  };
}

export type Services = ReturnType<typeof createServices>;
