import type { JobsOptions } from 'bullmq';
import { z } from 'zod';
import { configDefaults, type Config } from '../config';

export const QUEUE_NAMES = ['ingest', 'webhooks', 'mailbox', 'outbound', 'rollups', 'maintenance', 'events', 'deliveries', 'files'] as const;
/** A queue as the job table names it. */
export type LogicalQueue = (typeof QUEUE_NAMES)[number];

/**
 * The intake queues are split into INTAKE_QUEUE_SHARDS queues by workspace, so on a Redis Cluster intake is not
 * one queue on one Redis thread: shard 0 keeps the queue's own name (a deployment with one shard has the
 * queues it always had), shard i > 0 is `<queue>-<i>`. A workspace always hashes to the same shard.
 */
export const SHARDED_QUEUES = ['ingest', 'webhooks'] as const satisfies readonly LogicalQueue[];
type ShardedQueue = (typeof SHARDED_QUEUES)[number];
/** A queue in Redis: a logical queue, or one shard of an intake queue. */
export type QueueName = LogicalQueue | `${ShardedQueue}-${number}`;

const isSharded = (queue: LogicalQueue): queue is ShardedQueue => (SHARDED_QUEUES as readonly string[]).includes(queue);

export const shardName = (queue: LogicalQueue, shard: number): QueueName => (shard === 0 || !isSharded(queue) ? queue : `${queue}-${shard}`);

/** The queues in Redis behind one logical queue: every shard of an intake queue, or the queue itself. */
export const shardsOf = (queue: LogicalQueue, shards: number): QueueName[] => (isSharded(queue) ? Array.from({ length: shards }, (_, i) => shardName(queue, i)) : [queue]);

/** Every queue in Redis for `shards` intake shards, in the job table's order. */
export const queueNames = (shards: number): QueueName[] => QUEUE_NAMES.flatMap((q) => shardsOf(q, shards));

/** The shard of a workspace: FNV-1a (32 bit) of its id, modulo the shard count. Stable across processes. */
export function shardOf(tenantId: string, shards: number): number {
  if (shards <= 1) return 0;
  let h = 0x811c9dc5;
  for (let i = 0; i < tenantId.length; i++) {
    h ^= tenantId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % shards;
}

/**
 * Every job: its queue, its payload schema (shared by producer and processor) and nothing else. Later
 * domains add their rows here; the worker refuses to start if a row has no processor or two.
 */
/**
 * A file a message carries (issue 34), as the adapter listed it and the edge prepared it: `staged` is the blob
 * key of a Postmark part's base64 text, `skip` says why it is listed but not fetched.
 */
/** The longest provider id a polled file's reference may carry (Gmail attachment ids run to several hundred characters). */
export const MAILBOX_ID_MAX = 4096;

const inboundFileRef = z.object({
  name: z.string().min(1).max(1024),
  declaredType: z.string().max(100).optional(),
  size: z.number().int().min(0).optional(),
  contentId: z.string().max(998).optional(),
  source: z.discriminatedUnion('kind', [
    z.object({ kind: z.literal('postmark'), index: z.number().int().min(0) }),
    z.object({ kind: z.literal('twilio'), url: z.string().max(2048) }),
    z.object({ kind: z.literal('whatsapp'), mediaId: z.string().max(256) }),
    z.object({ kind: z.literal('telegram'), fileId: z.string().max(1024) }),
    // Polled mail (issue 34): ids only. The access token is never here; the worker asks the mailbox service for it.
    z.object({ kind: z.literal('gmail'), address: z.string().max(320), messageId: z.string().min(1).max(MAILBOX_ID_MAX), attachmentId: z.string().min(1).max(MAILBOX_ID_MAX).optional(), partId: z.string().min(1).max(64).optional() }),
    z.object({ kind: z.literal('graph'), address: z.string().max(320), messageId: z.string().min(1).max(MAILBOX_ID_MAX), attachmentId: z.string().max(MAILBOX_ID_MAX) }),
  ]),
  staged: z.string().max(512).optional(),
  skip: z.object({ reason: z.string().max(500), limit: z.number().int().optional() }).optional(),
});

const inboundMessage = z.object({
  providerMessageId: z.string().min(1),
  sender: z.object({ handle: z.string().min(1), name: z.string().optional(), email: z.string().optional() }),
  conversationKey: z.string().optional(),
  messageIdHeader: z.string().optional(),
  messageIdAsWritten: z.string().optional(),
  inReplyTo: z.array(z.string()).optional(),
  mailboxHash: z.string().optional(),
  subject: z.string().optional(),
  body: z.string(),
  sentAt: z.string().optional(),
  /** Set only for mail polled from the connected mailbox (never read from a caller's payload). */
  mailbox: z.object({ provider: z.string(), address: z.string(), messageId: z.string(), threadId: z.string().optional() }).optional(),
  files: z.array(inboundFileRef).max(200).optional(),
  filesOmitted: z.number().int().min(1).optional(),
  /** Web chat sessions only: the ids of the visitor's checked uploads (never their tokens), bound by the worker. */
  uploads: z.array(z.uuid()).min(1).max(20).optional(),
});

/** The settings job rows read (their options and schedules): their types and defaults are the config table's. */
export const JOB_SETTING_KEYS = ['MAILBOX_REFRESH_SECONDS', 'OUTBOUND_WEBHOOK_SWEEP_MS', 'SLA_SWEEP_SECONDS'] as const satisfies readonly (keyof Config)[];
export type JobSettings = Pick<Config, (typeof JOB_SETTING_KEYS)[number]>;

interface JobRow {
  queue: LogicalQueue;
  data: z.ZodType;
  /** The job's id from its data: a second add with the same id while the first is kept is a no-op. */
  jobId?: (data: never, opts: EnqueueOptions) => string;
  /** Attempts, backoff and retention beyond the defaults. */
  options?: (settings: JobSettings) => JobsOptions;
  /** A repeating job: the worker runtime keeps exactly one scheduler per id (restarts and replicas included). */
  schedule?: { id: string; everyMs: (settings: JobSettings) => number };
}

/**
 * Intake results travel on pub/sub, so a finished batch is kept only as a short window for the queue
 * dashboard (an operator watching a burst sees its throughput): at most 500 jobs and 5 minutes, because its
 * data holds customers' message bodies, which need not outlive their delivery. Failed batches keep theirs as
 * long as a retry may need them (the default 7 days, bounded). A caller answered 202 was promised its
 * delivery: 12 tries 0.2 s apart doubling (about 7 minutes in all) carry a batch through a database failover
 * or restart, where 5 (3 s) let one die in a burst of killed connections.
 */
const INTAKE_BATCH: JobsOptions = { removeOnComplete: { age: 300, count: 500 }, attempts: 12, backoff: { type: 'exponential', delay: 200 } };
/** Tried once and forgotten either way: the next sweep or trigger asks again. */
const SINGLE_SHOT: JobsOptions = { removeOnComplete: true, removeOnFail: true, attempts: 1 };

/**
 * A coalesced intake batch: the requesting API process's result channel, and the deliveries (each with the
 * id its caller waits on and its workspace) with the intake's own fields.
 */
// `bulk`: the items of a workspace's burst (see src/intake/priority/lanes.ts), written apart from live ones.
const intakeBatch = <F extends z.ZodRawShape>(fields: F) =>
  z.object({ reply_to: z.string().min(1), bulk: z.boolean().optional(), items: z.array(z.object({ id: z.string().min(1), tenant_id: z.uuid(), ...fields })).min(1) });

export const JOBS = {
  /**
   * Concurrent ingest requests coalesced into one job; the worker answers all of them with one PUBLISH on
   * the requesting process's result channel (`reply_to`).
   */
  'ingest.batch': {
    queue: 'ingest',
    options: () => INTAKE_BATCH,
    data: intakeBatch({
      channel: z.string().min(1),
      // Hex HMAC of the ?token= the delivery came with: the worker checks it is still the connection's.
      token_hash: z.string().optional(),
      message: inboundMessage,
    }),
  },
  'audit.prune': {
    queue: 'maintenance',
    data: z.object({ retention_days: z.number().int().min(1).optional() }),
    options: () => ({ attempts: 3 }),
    schedule: { id: 'audit-prune-daily', everyMs: () => 24 * 3600 * 1000 },
  },
  /** Outbound events past EVENT_RETENTION_DAYS leave the log, daily. */
  'events.prune': {
    queue: 'maintenance',
    data: z.object({ retention_days: z.number().int().min(1).optional() }),
    options: () => ({ attempts: 3 }),
    schedule: { id: 'events-prune-daily', everyMs: () => 24 * 3600 * 1000 },
  },
  /** Unused uploads past their hour (FILES_UPLOAD_TTL_SECONDS), rows and bytes, every 10 minutes (issue 34). */
  'uploads.sweep': {
    queue: 'maintenance',
    data: z.object({}),
    schedule: { id: 'uploads-sweep', everyMs: () => 10 * 60 * 1000 },
  },
  /**
   * The orphan sweep (issue 34): one stretch of the file store's keys per run, compared with the rows of the same
   * keys; objects without a row older than an hour are deleted, rows whose bytes are gone marked failed.
   */
  'files.orphans': {
    queue: 'maintenance',
    data: z.object({}),
    schedule: { id: 'files-orphans', everyMs: () => 15 * 60 * 1000 },
  },
  /**
   * Retention (issue 38), every 15 minutes: one `retention.run` per workspace with `retention_days` set and a
   * solved or closed ticket past it (src/domains/retention/service.ts).
   */
  'retention.sweep': {
    queue: 'maintenance',
    data: z.object({}),
    options: () => SINGLE_SHOT,
    schedule: { id: 'retention-sweep', everyMs: () => 15 * 60 * 1000 },
  },
  /**
   * One workspace's due conversations erased, in batches, until a time budget; then the run queues its continuation
   * (`continued`: how many came before it). The id names the workspace, so the sweep queues it once while it waits;
   * a continuation alternates between two ids of its own, so it can be queued while the run before it is active.
   */
  'retention.run': {
    queue: 'maintenance',
    data: z.object({ tenant_id: z.uuid(), continued: z.number().int().min(0).optional() }),
    jobId: (d: { tenant_id: string; continued?: number }) => (d.continued ? `retention-${d.tenant_id}-${d.continued % 2}` : `retention-${d.tenant_id}`),
    options: () => SINGLE_SHOT,
  },
  /** Expired Idempotency-Keys of every workspace, hourly. */
  'idempotency.prune': {
    queue: 'maintenance',
    data: z.object({}),
    schedule: { id: 'idempotency-prune', everyMs: () => 3600 * 1000 },
  },
  /**
   * One ticket's SLA check. Nothing enqueues it any more (the sweep below marks every breach); it stays so that
   * timers an earlier version left delayed in Redis, up to the longest resolution target ahead, still run
   * after an upgrade. Stale or repeated, it finds nothing to mark.
   */
  'sla.check': {
    queue: 'maintenance',
    data: z.object({ tenant_id: z.uuid(), ticket_id: z.uuid() }),
    // The due time names the timer: a due time moved later is another job, the same one twice is one.
    jobId: (d: { ticket_id: string }, o: EnqueueOptions) => `sla-${d.ticket_id}-${o.dueAt ?? 0}`,
  },
  /** A ticket event that enabled triggered macros listen for; each macro runs at most once per event. */
  'macros.trigger': {
    queue: 'maintenance',
    data: z.object({
      tenant_id: z.uuid(),
      ticket_id: z.uuid(),
      event: z.enum(['ticket.created', 'ticket.updated', 'ticket.reopened']),
      event_id: z.uuid(),
    }),
    jobId: (d: { event_id: string }) => `macro-${d.event_id}`,
  },
  /**
   * Time-based rules (issue 37), every minute: one `rules.run` per enabled time rule of every workspace, so the
   * rules spread over every worker (src/domains/macros/time-rules.ts).
   */
  'rules.sweep': {
    queue: 'maintenance',
    data: z.object({}),
    options: () => SINGLE_SHOT,
    schedule: { id: 'rules-sweep', everyMs: () => 60 * 1000 },
  },
  /**
   * One time rule's qualifying tickets, in batches (at most TIME_RULE_BATCH_SIZE, sized to last about
   * TIME_RULE_BATCH_MS), each one transaction. `slot` (the
   * sweep's minute) names the job: the same minute's sweep twice is one job, and a job a dead worker left
   * holding its id never stops the next minute's. Two runs of a rule at once are safe (SKIP LOCKED and the
   * firings' key): they share its tickets.
   */
  'rules.run': {
    queue: 'maintenance',
    data: z.object({ tenant_id: z.uuid(), macro_id: z.uuid(), slot: z.number().int().min(0) }),
    jobId: (d: { tenant_id: string; macro_id: string; slot: number }) => `rules-${d.tenant_id}-${d.macro_id}-${d.slot}`,
    options: () => SINGLE_SHOT,
  },
  /**
   * Marks every overdue SLA target breached, every SLA_SWEEP_SECONDS: a range scan of the due indexes finds the
   * workspaces with something due (see docs/decisions/tickets.md, "SLA breaches are found by the sweep alone").
   */
  'sla.sweep': {
    queue: 'maintenance',
    data: z.object({}),
    schedule: { id: 'sla-sweep', everyMs: (c: JobSettings) => c.SLA_SWEEP_SECONDS * 1000 },
  },
  /**
   * Business hours (issue 37): a schedule changed (its hours, zone or holidays, by an admin or a feed read), so the
   * open tickets of the policies counting on it get new due times, in batches of SCHEDULE_RECOMPUTE_BATCH, each one
   * statement. One job per change: `version` (the schedule's, as written) names it, so the same change queued twice
   * is one job; the job reads the schedule as it stands when it runs, so a later change's job finds nothing left.
   */
  'schedules.recompute': {
    queue: 'maintenance',
    data: z.object({ tenant_id: z.uuid(), schedule_id: z.uuid(), version: z.number().int().min(1) }),
    jobId: (d: { schedule_id: string; version: number }) => `schedule-recompute-${d.schedule_id}-${d.version}`,
    options: () => ({ attempts: 5, backoff: { type: 'exponential', delay: 2000 } }),
  },
  /** One schedule's iCal holiday feed read and stored (when its URL is set, and daily by the sweep below). */
  'schedules.ical_refresh': {
    queue: 'maintenance',
    data: z.object({ tenant_id: z.uuid(), schedule_id: z.uuid() }),
    // One per schedule while queued or running; a finished one must not linger and swallow the next.
    jobId: (d: { schedule_id: string }) => `schedule-ical-${d.schedule_id}`,
    options: () => SINGLE_SHOT,
  },
  /** Daily: queues a read of every iCal feed not read for a day (a failed feed is retried here). */
  'schedules.ical_sweep': {
    queue: 'maintenance',
    data: z.object({}),
    options: () => SINGLE_SHOT,
    schedule: { id: 'schedules-ical-daily', everyMs: () => 24 * 3600 * 1000 },
  },
  /**
   * A person's erasure (issue 38): their tickets in batches, then the closing transaction that empties the customer.
   * The job names only ids (nothing of the person travels through Redis); its id is the erasure's, so a repeat is
   * one job, and a rerun after a stop resumes (the erasure is idempotent).
   */
  'customers.erase': {
    queue: 'maintenance',
    data: z.object({ tenant_id: z.uuid(), erasure_id: z.uuid() }),
    jobId: (d: { erasure_id: string }) => `customer-erase-${d.erasure_id}`,
    options: () => ({ removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600 }, attempts: 8, backoff: { type: 'exponential', delay: 2000 } }),
  },
  /** Asks the mail provider what the workspace's grant allows now and stores the checks. */
  'mailbox.refresh': {
    queue: 'mailbox',
    // due_as_of: when a sweep saw the mailbox due (database time); an admin's refresh has none.
    data: z.object({ tenant_id: z.uuid(), due_as_of: z.iso.datetime().optional() }),
    // One per mailbox while queued or running, so a finished one must not linger and swallow the next; a
    // provider that is down is retried by the next sweep.
    jobId: (d: { tenant_id: string }) => `refresh-${d.tenant_id}`,
    options: () => SINGLE_SHOT,
  },
  /** New inbox mail since the stored cursor, through the email ingest path. */
  'mailbox.poll': {
    queue: 'mailbox',
    data: z.object({ tenant_id: z.uuid() }),
    jobId: (d: { tenant_id: string }) => `poll-${d.tenant_id}`,
    options: () => SINGLE_SHOT,
  },
  /** Concurrent webhook deliveries coalesced into one job, answered on the requester's result channel. */
  'webhooks.batch': {
    queue: 'webhooks',
    options: () => INTAKE_BATCH,
    data: intakeBatch({
      integration_id: z.uuid(),
      dedupe_key: z.string().min(1),
      provider_event_id: z.string().nullable(),
      external_ticket_id: z.string().min(1),
      type: z.string().min(1),
      occurred_at: z.string().nullable(),
      status: z.string().nullable(),
      subject: z.string().nullable(),
      priority: z.string().nullable(),
      requester: z.string().nullable(),
      raw: z.string(),
    }),
  },
  /** Folds a workspace's journaled rollup deltas into its buckets (coalesced: one waiting job per workspace). */
  'rollups.fold': {
    queue: 'rollups',
    // window: one job per workspace and fold window (see the rollups service).
    data: z.object({ tenant_id: z.uuid(), window: z.number().int().optional() }),
    jobId: (d: { tenant_id: string; window?: number }) => `fold-${d.tenant_id}-${d.window ?? 0}`,
    options: () => SINGLE_SHOT,
  },
  /** Scheduled: folds every workspace with deltas waiting. */
  'rollups.sweep': {
    queue: 'rollups',
    data: z.object({}),
    schedule: { id: 'rollups-sweep', everyMs: () => 60 * 1000 },
  },
  /** Folds a workspace's journaled report deltas into its days (issue 37; coalesced: one job per workspace and window). */
  'reports.fold': {
    queue: 'rollups',
    data: z.object({ tenant_id: z.uuid(), window: z.number().int().optional() }),
    jobId: (d: { tenant_id: string; window?: number }) => `report-fold-${d.tenant_id}-${d.window ?? 0}`,
    options: () => SINGLE_SHOT,
  },
  /** Re-buckets a workspace's report days in its zone after the zone changed (one waiting job per workspace). */
  'reports.rebuild': {
    queue: 'rollups',
    data: z.object({ tenant_id: z.uuid() }),
    jobId: (d: { tenant_id: string }) => `report-rebuild-${d.tenant_id}`,
    options: () => SINGLE_SHOT,
  },
  /** Scheduled: folds every workspace with report deltas waiting, re-buckets every workspace whose zone changed. */
  'reports.sweep': {
    queue: 'rollups',
    data: z.object({}),
    schedule: { id: 'reports-sweep', everyMs: () => 60 * 1000 },
  },
  /**
   * One attempt to send one reply on its channel (src/domains/outbound). The outbox row, claimed before the
   * request leaves, keeps the send single whatever runs the job; `attempt` names the try, so a retry queued
   * with its backoff is a job of its own. BullMQ's own retries are only for a worker that failed before asking
   * the provider anything (the claim is then handed back).
   */
  'outbound.send': {
    queue: 'outbound',
    data: z.object({ tenant_id: z.uuid(), event_id: z.uuid(), attempt: z.number().int().min(0).max(1000).optional() }),
    jobId: (d: { event_id: string; attempt?: number }) => `send-${d.event_id}-${d.attempt ?? 0}`,
    options: () => ({ removeOnComplete: true, removeOnFail: { age: 86400 }, attempts: 3, backoff: { type: 'exponential', delay: 2000 } }),
  },
  /** Scheduled: re-queues sends a lost job left waiting, and declares claims whose worker died `unknown`. */
  'outbound.sweep': {
    queue: 'outbound',
    data: z.object({}),
    schedule: { id: 'outbound-sweep', everyMs: () => 30 * 1000 },
  },
  /** Scheduled: queues a refresh for every mailbox whose last check is older than MAILBOX_REFRESH_SECONDS. */
  'mailbox.sweep': {
    queue: 'mailbox',
    data: z.object({}),
    // Runs often; each mailbox is refreshed only when its last check is MAILBOX_REFRESH_SECONDS old.
    schedule: { id: 'mailbox-sweep', everyMs: (c: JobSettings) => Math.min(60, c.MAILBOX_REFRESH_SECONDS) * 1000 },
  },
  /**
   * Outbound webhooks (issue 19): sends an endpoint's due events, one ticket's at a time in order, until none
   * is due (one sender per endpoint holds its lease; another job for it tells the holder and ends). Woken at
   * commit by the events NOTIFY. On the `deliveries` queue of its own, so a slow receiver holds only delivery
   * slots, never intake's. Tried once: the cursor and the parked rows carry the state, and the sweep picks
   * up what a dead worker left.
   */
  'events.deliver': {
    queue: 'deliveries',
    data: z.object({ tenant_id: z.uuid(), endpoint_id: z.uuid() }),
    options: () => SINGLE_SHOT,
  },
  /** Safety net: endpoints with events to send and no live sender (lost wake-up, dead worker). */
  'events.sweep': {
    queue: 'events',
    data: z.object({}),
    options: () => SINGLE_SHOT,
    schedule: { id: 'events-sweep', everyMs: (c: JobSettings) => c.OUTBOUND_WEBHOOK_SWEEP_MS },
  },
  /**
   * The files one inbound message carries (issue 34), fetched from its provider and stored after the message's
   * ticket and event are committed: one job per event (a second add while it is kept is a no-op), on a queue of
   * its own so a slow provider download never holds an intake slot. A file's own failure is its row's state, not
   * the job's; the job fails (and is retried) only when the database or the store is away.
   */
  'files.fetch': {
    queue: 'files',
    data: z.object({ tenant_id: z.uuid(), ticket_id: z.uuid(), event_id: z.uuid(), channel: z.string().min(1), files: z.array(inboundFileRef).min(1).max(200) }),
    jobId: (d: { event_id: string }) => `files-${d.event_id}`,
    options: () => ({ removeOnComplete: { age: 3600, count: 10_000 }, attempts: 5, backoff: { type: 'exponential', delay: 2000 } }),
  },
  /** Scheduled: inbound files a dead worker left pending are failed with the reason; stale staged parts removed. */
  'files.inbound-sweep': {
    queue: 'files',
    data: z.object({}),
    options: () => SINGLE_SHOT,
    schedule: { id: 'files-inbound-sweep', everyMs: () => 5 * 60 * 1000 },
  },
  /**
   * A customer's export (issue 38, access request): one JSON document of everything held on the person, written to
   * the file store in bounded batches. The customer_jobs row names the job, so a second add while it is kept is a
   * no-op, and a run of a job already done or failed does nothing.
   */
  'customers.export': {
    queue: 'maintenance',
    data: z.object({ tenant_id: z.uuid(), export_id: z.uuid() }),
    jobId: (d: { export_id: string }) => `customer-export-${d.export_id}`,
    options: () => ({ attempts: 5, backoff: { type: 'exponential', delay: 5000 } }),
  },
  /** Hourly: expired exports' files deleted (their rows keep the record), and exports a lost enqueue left waiting queued again. */
  'customers.exports_sweep': {
    queue: 'maintenance',
    data: z.object({}),
    options: () => SINGLE_SHOT,
    schedule: { id: 'customers-exports-sweep', everyMs: () => 3600 * 1000 },
  },
  /**
   * Erasures asked for but not queued (Redis away between the request's commit and its enqueue, a process killed
   * there) are queued again: an erasure a client was told about is never left undone.
   */
  'customers.erase_sweep': {
    queue: 'maintenance',
    data: z.object({}),
    options: () => SINGLE_SHOT,
    schedule: { id: 'customers-erase-sweep', everyMs: () => 15 * 60 * 1000 },
  },
} as const satisfies Record<string, JobRow>;

export type JobName = keyof typeof JOBS;
export type JobData<N extends JobName> = z.output<(typeof JOBS)[N]['data']>;

/** What a call site may say about one job: when it is due. Ids, attempts and backoff are the row's. */
export interface EnqueueOptions {
  /** The intake shard to queue on (see shardOf); ignored for jobs of other queues. */
  shard?: number;
  delayMs?: number;
  /** Due at this time (ms since the epoch): delayed until then. */
  dueAt?: number;
  /** BullMQ priority (1 is the highest; jobs without one go before any with one): bulk intake is queued behind live. */
  priority?: number;
}

/** Used when a caller passes no settings: the config table's defaults, never a second copy of them (issue 35). */
export const DEFAULT_SETTINGS: JobSettings = Object.fromEntries(JOB_SETTING_KEYS.map((k) => [k, configDefaults()[k]])) as JobSettings;

const delayOf = (o: EnqueueOptions) => o.delayMs ?? (o.dueAt !== undefined ? o.dueAt - Date.now() : 0);

/** Every job's options from its row and its data, in one place. */
export function jobOptions<N extends JobName>(name: N, data?: JobData<N>, settings: JobSettings = DEFAULT_SETTINGS, opts: EnqueueOptions = {}): JobsOptions {
  const row: JobRow = JOBS[name];
  return {
    attempts: 5,
    backoff: { type: 'exponential', delay: 1000 },
    // Completed jobs are evidence for a short while; failed ones stay longer, bounded, for inspection and retry.
    removeOnComplete: { age: 3600, count: 10_000 },
    removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
    ...row.options?.(settings),
    ...(row.jobId && data !== undefined ? { jobId: row.jobId(data as never, opts) } : {}),
    ...(delayOf(opts) > 0 ? { delay: delayOf(opts) } : {}),
    ...(opts.priority ? { priority: opts.priority } : {}),
  };
}

/** The repeating jobs and their intervals. */
export const schedules = (settings: JobSettings) =>
  (Object.entries(JOBS) as [JobName, JobRow][]).flatMap(([name, row]) => (row.schedule ? [{ name, queue: row.queue, id: row.schedule.id, everyMs: row.schedule.everyMs(settings) }] : []));

/** One run of a job as its processor sees it: which try (1-based), whether it is the last, when it was asked for. */
export interface JobRun {
  attempt: number;
  last: boolean;
  requestedAt?: Date;
}

/** The registry's reading of a BullMQ job, the same for every processor (a direct call is a single try). */
export const runOf = (job: { attemptsMade?: number; opts?: { attempts?: number }; timestamp?: number } | undefined): JobRun => {
  const attempt = (job?.attemptsMade ?? 0) + 1;
  return { attempt, last: attempt >= (job?.opts?.attempts ?? 1), ...(job?.timestamp ? { requestedAt: new Date(job.timestamp) } : {}) };
};
