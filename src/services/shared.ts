import { createHmac } from 'node:crypto';
import type { Logger } from 'pino';
import { section, type Config } from '../config';
import type { Db } from '../db';
import { createReadRouting } from '../db/reads';
import { createAuditService } from '../domains/audit/service';
import { createChannelService } from '../domains/channels/service';
import { createCustomerService } from '../domains/customers/service';
import { createPrivacyService } from '../domains/privacy/service';
import { createCustomerExportService } from '../domains/customers/export';
import { createEventService } from '../domains/events/service';
import { blobStoreFromConfig } from '../domains/files/blobs';
import { scannerFromConfig } from '../domains/files/scan';
import { createFileService } from '../domains/files/service';
import type { FetchTurns } from '../domains/inbound-files/fair-queue';
import { createInboundFiles } from '../domains/inbound-files/service';
import { createSkippedRecorder } from '../domains/inbound-files/skipped';
import { createMacroService, createMacroTriggerSink } from '../domains/macros/service';
import { createMailboxService } from '../domains/mailbox/service';
import { createNotificationService } from '../domains/notifications/service';
import { createOutboundService, createOutboundSink } from '../domains/outbound/service';
import { createRollupService } from '../domains/rollups/service';
import { createReportService } from '../domains/reports/service';
import { createRetentionService } from '../domains/retention/service';
import { createTicketService } from '../domains/tickets/service';
import { ticketSearchFromConfig } from '../domains/search/engine';
import type { AfterAnswer } from '../lib/after-answer';
import type { RedisClient } from '../queue/connection';
import type { QueueHub } from '../queue/hub';

/** What every process opens (src/runtime.ts) and hands its service container. */
export interface ProcessDeps {
  db: Db;
  /** The read replica for rollup and list reads (DATABASE_READ_URL), if any. */
  readDb?: Db | null;
  config: Config;
  queues: QueueHub;
  logger: Logger;
  redis: RedisClient;
}

/** Where the shared pieces differ between the processes: each process's container says which it is. */
export interface SharedHooks {
  /**
   * Where a request's after-commit work runs once its answer is on its way: the API's (src/server.ts waits for it
   * at shutdown). A worker has none: a job awaits its after-commit work itself.
   */
  later?: AfterAnswer;
  /** Rendered ticket timelines kept for GET, in bytes: the API's. A worker renders none. */
  timelineCacheBytes?: number;
  /** Fair turns on the files queue, taken when the ingest writer queues fetches: the workers'. */
  fetchTurns?: FetchTurns;
}

/**
 * What both processes run (issue 35): the pieces the API's routes and the workers' jobs both call (tickets, events,
 * files, mailbox, outbound, macros, rollups, reports, audit) and what those are made of (customers, notifications,
 * channels, the outbound and macro-trigger sinks, inbound files). Each factory gets only the dependencies it needs.
 */
export function createSharedServices(deps: ProcessDeps, hooks: SharedHooks) {
  const { db, config, queues, logger, redis } = deps;
  const reads = createReadRouting({ primary: db, replica: deps.readDb ?? null, redis, config, logger });
  const audit = createAuditService({ db });
  const events = createEventService({ db, config: section(config, 'events', 'redis'), redis, logger });
  const customers = createCustomerService({ db, events, audit, reads, search: section(config, 'search') });
  const notifications = createNotificationService({ db });
  const channels = createChannelService({ db, config: section(config, 'secrets') });
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
  const fileLinkKey = createHmac('sha256', config.API_KEY_PEPPER).update('helpdesk file links v1').digest();
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
    linkKey: fileLinkKey,
  });
  // Customer exports (issue 38): the document in the blob store, its links signed with the file links' key.
  const customerExports = createCustomerExportService({ db, blobs, audit, queues, logger, files, linkKey: fileLinkKey, config: { CUSTOMER_EXPORT_TTL_HOURS: config.CUSTOMER_EXPORT_TTL_HOURS, PUBLIC_BASE_URL: config.PUBLIC_BASE_URL } });
  // Reports (issue 37): every timeline append journals its facts in the writing transaction.
  const reports = createReportService({ db, queues, logger, reads });
  const tickets = createTicketService({
    db,
    later: hooks.later,
    reports,
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
    timelineCacheBytes: hooks.timelineCacheBytes,
    search: ticketSearchFromConfig(section(config, 'search')),
  });
  const rollups = createRollupService({ db, queues, logger, reads });
  // Inbound files (issue 34): staged at the edge, fetched by the files.fetch job after the ingest commit.
  const recordSkipped = createSkippedRecorder({ db, bumpTicketVersion: (tx, tenantId, ticketId) => tickets.commands.bumpVersion(tx, tenantId, ticketId) });
  const inboundFiles = createInboundFiles({
    db,
    // The mailbox APIs' base URLs only (not the OAuth clients): polled mail's files are read from them.
    config: { ...section(config, 'inboundFiles', 'outbound', 'files'), GOOGLE_GMAIL_API_URL: config.GOOGLE_GMAIL_API_URL, MICROSOFT_GRAPH_API_URL: config.MICROSOFT_GRAPH_API_URL },
    blobs,
    queues,
    channels,
    logger,
    files: () => ({ storeInbound: (tenantId, to, opts) => files.storeInbound(tenantId, to, opts), recordSkipped }),
    turns: hooks.fetchTurns,
    // Polled mail's files are fetched with the mailbox's token, asked for when the file is (the mailbox is made
    // below, and exists before any job runs); the job never carries it.
    mailboxTokens: (tenantId, mailboxOfFile, opts) => mailbox.tokenForFiles(tenantId, mailboxOfFile, opts),
  });
  const mailbox = createMailboxService({ db, config: section(config, 'mailbox', 'secrets', 'http'), queues, logger, channels, events, files: inboundFiles });
  const outbound = createOutboundService({ db, config: section(config, 'outbound', 'http'), queues, logger, channels, mailbox, tickets: tickets.commands, sink: outboundSink, files });
  // Retention (issue 38): the dry run (the API's) and the sweep's runs (the workers'), the files' bytes deleted from this process's store.
  const retention = createRetentionService({ db, queues, logger, audit, blobs, redis, redisPrefix: config.REDIS_PREFIX });
  // Erasure and redaction (issue 38): the API takes requests and redacts; the workers erase.
  const privacy = createPrivacyService({ db, events, audit, queues, queueShards: config.INTAKE_QUEUE_SHARDS, deleteObject: (key) => blobs.delete(key), logger });
  return {
    reads,
    macroTriggers,
    privacy,
    audit,
    events,
    customers,
    customerExports,
    notifications,
    channels,
    tickets,
    files,
    macros: createMacroService({ db, tickets: tickets.commands, queries: tickets.queries }),
    rollups,
    reports,
    inboundFiles,
    mailbox,
    outbound,
    retention,
  };
}

export type SharedServices = ReturnType<typeof createSharedServices>;
