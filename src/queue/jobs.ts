import type { JobsOptions } from 'bullmq';
import { z } from 'zod';

export const QUEUE_NAMES = ['ingest', 'webhooks', 'mailbox', 'outbound', 'rollups', 'maintenance'] as const;
export type QueueName = (typeof QUEUE_NAMES)[number];

/**
 * Every job: its queue, its payload schema (shared by producer and processor) and nothing else. Later
 * domains add their rows here; the worker refuses to start if a row has no processor or two.
 */
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
});

export const JOBS = {
  /**
   * Concurrent ingest requests coalesced into one job; the worker answers all of them with one PUBLISH on
   * the requesting process's result channel (`reply_to`).
   */
  'ingest.batch': {
    queue: 'ingest',
    data: z.object({
      reply_to: z.string().min(1),
      items: z
        .array(
          z.object({
            id: z.string().min(1),
            tenant_id: z.uuid(),
            channel: z.string().min(1),
            // Hex HMAC of the ?token= the delivery came with: the worker checks it is still the connection's.
            token_hash: z.string().optional(),
            message: inboundMessage,
          }),
        )
        .min(1),
    }),
  },
  'audit.prune': {
    queue: 'maintenance',
    data: z.object({ retention_days: z.number().int().min(1).optional() }),
  },
  /** Fired at a ticket's due time; re-checks the ticket, so a stale job (target met, due moved) does nothing. */
  'sla.check': {
    queue: 'maintenance',
    data: z.object({ tenant_id: z.uuid(), ticket_id: z.uuid() }),
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
  },
  /** Safety net for timers whose job was never enqueued (Redis down at the time) or was lost. */
  'sla.sweep': {
    queue: 'maintenance',
    data: z.object({}),
  },
  /** Asks the mail provider what the workspace's grant allows now and stores the checks. */
  'mailbox.refresh': {
    queue: 'mailbox',
    data: z.object({ tenant_id: z.uuid() }),
  },
  /** New inbox mail since the stored cursor, through the email ingest path. */
  'mailbox.poll': {
    queue: 'mailbox',
    data: z.object({ tenant_id: z.uuid() }),
  },
  /** Concurrent webhook deliveries coalesced into one job, answered on the requester's result channel. */
  'webhooks.batch': {
    queue: 'webhooks',
    data: z.object({
      reply_to: z.string().min(1),
      items: z
        .array(
          z.object({
            id: z.string().min(1),
            tenant_id: z.uuid(),
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
        )
        .min(1),
    }),
  },
  /** Folds a workspace's journaled rollup deltas into its buckets (coalesced: one waiting job per workspace). */
  'rollups.fold': {
    queue: 'rollups',
    data: z.object({ tenant_id: z.uuid() }),
  },
  /** Scheduled: folds every workspace with deltas waiting. */
  'rollups.sweep': {
    queue: 'rollups',
    data: z.object({}),
  },
  /** One reply on an email ticket, sent through the connected mailbox. */
  'outbound.send': {
    queue: 'outbound',
    data: z.object({ tenant_id: z.uuid(), event_id: z.uuid() }),
  },
  /** Scheduled: queues a refresh for every mailbox whose last check is older than MAILBOX_REFRESH_SECONDS. */
  'mailbox.sweep': {
    queue: 'mailbox',
    data: z.object({}),
  },
} as const satisfies Record<string, { queue: QueueName; data: z.ZodType }>;

export type JobName = keyof typeof JOBS;
export type JobData<N extends JobName> = z.output<(typeof JOBS)[N]['data']>;

/** All retry, retention and dedupe options in one place. */
export interface EnqueueOptions {
  /** Dedupe key: a second add with the same id while the first is kept is a no-op. */
  jobId?: string;
  delayMs?: number;
  /** Tries in all, where a job's processor needs to know its last (it records the failure then). */
  attempts?: number;
}

export function jobOptions(name: JobName, overrides: EnqueueOptions = {}): JobsOptions {
  return {
    attempts: 5,
    backoff: { type: 'exponential', delay: 1000 },
    // Completed jobs are evidence for a short while; failed ones stay longer, bounded, for inspection and retry.
    removeOnComplete: { age: 3600, count: 10_000 },
    removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
    ...(overrides.jobId ? { jobId: overrides.jobId } : {}),
    ...(overrides.delayMs && overrides.delayMs > 0 ? { delay: overrides.delayMs } : {}),
    ...(name === 'audit.prune' ? { attempts: 3 } : {}),
    // Ingest results travel on pub/sub; the finished job itself is not worth keeping. A caller answered 202
    // was promised its delivery: 12 tries 0.2 s apart doubling (about 7 minutes in all) carry a batch through a
    // database failover or restart, where 5 (3 s) let one die in a burst of killed connections.
    ...(name === 'ingest.batch' || name === 'webhooks.batch' ? { removeOnComplete: true, attempts: 12, backoff: { type: 'exponential', delay: 200 } } : {}),
    // A refresh is deduplicated by its job id (one per mailbox) only while queued or running, so a finished
    // one must not linger and swallow the next; a provider that is down is retried by the next sweep.
    ...(name === 'mailbox.refresh' || name === 'mailbox.poll' || name === 'rollups.fold' ? { removeOnComplete: true, removeOnFail: true, attempts: 1 } : {}),
    // A send is retried with backoff while the provider is down; its job id (the reply) keeps it single.
    ...(name === 'outbound.send' ? { removeOnComplete: true, backoff: { type: 'exponential', delay: 2000 } } : {}),
    ...(overrides.attempts ? { attempts: overrides.attempts } : {}),
  };
}
