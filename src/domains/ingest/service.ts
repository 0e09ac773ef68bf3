import type { Logger } from 'pino';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { Config } from '../../config';
import type { Db, Executor } from '../../db';
import type { TicketRow } from '../../db/types';
import { AppError, dependencyUnavailable, notFound, validationFailed } from '../../http/errors';
import type { HandlerResult } from '../../http/operation';
import type { Principal } from '../../http/principal';
import { isUuid } from '../../lib/ids';
import { iso } from '../../lib/time';
import type { QueueHub } from '../../queue/hub';
import { TIMED_OUT, type ItemResult, type ResultBus } from '../../queue/results';
import type { InboundMessage } from '../channels/adapters/types';
import type { ChannelService } from '../channels/service';
import { channelById, type ChannelDefinition } from '../channels/registry';
import * as channelStore from '../channels/store';
import type { CustomerService } from '../customers/service';
import { LIMITS } from '../tickets/schemas';
import type { EventActor, TicketService } from '../tickets/service';
import * as store from './store';

export interface IngestResult {
  channel: string;
  ticket_id: string;
  customer_id: string;
  was_created: boolean;
  was_duplicate: boolean;
}

export interface IngestItem {
  id: string;
  tenant_id: string;
  channel: string;
  message: InboundMessage;
}

const subjectOf = (m: InboundMessage) => {
  const s = (m.subject ?? '').trim() || m.body.trim().split('\n')[0]!.trim().slice(0, 80);
  return (s || '(no subject)').slice(0, LIMITS.subject);
};

/**
 * The worker side: one delivery, one transaction. The ledger row is claimed first; a delivery already in
 * the ledger writes nothing but its duplicate count and answers with the first result.
 */
export function createIngestProcessor(deps: { db: Db; config: Config; tickets: TicketService; customers: CustomerService; logger: Logger }) {
  const { db, config, tickets, customers } = deps;
  const t = tickets.internals;

  async function customerFor(tx: Executor, tenantId: string, def: ChannelDefinition, m: InboundMessage): Promise<string> {
    const name = (m.sender.name ?? m.sender.handle).slice(0, 200);
    if (def.handle_kind === 'email') return (await customers.findOrCreateByEmail(tx, tenantId, m.sender.handle, name)).id;
    const known = await store.lockAndFindHandle(tx, tenantId, def.handle_kind, m.sender.handle);
    if (known) return known;
    if (m.sender.email) {
      const created = await customers.createForInbound(tx, tenantId, { display_name: name, email: m.sender.email });
      await store.insertHandle(tx, tenantId, def.handle_kind, m.sender.handle, created.id);
      return created.id;
    }
    return customers.createWithHandle(tx, tenantId, { display_name: name, kind: def.handle_kind, handle: m.sender.handle });
  }

  /** The ticket this message continues, locked, following merges to the winner; undefined for a new one. */
  async function threadTarget(tx: Executor, tenantId: string, def: ChannelDefinition, m: InboundMessage): Promise<TicketRow | undefined> {
    let id: string | undefined;
    if (def.handle_kind === 'email') {
      id = await store.ticketByMessageIds(tx, tenantId, m.inReplyTo ?? []);
      if (!id && m.mailboxHash && isUuid(m.mailboxHash)) id = m.mailboxHash.toLowerCase();
    } else if (m.conversationKey) {
      id = await store.openConversationTicket(tx, tenantId, def.ticket_source, m.conversationKey, config.THREAD_WINDOW_HOURS);
    }
    if (!id) return undefined;
    let ticket: TicketRow | undefined;
    try {
      ticket = await t.lockOne(tx, tenantId, id);
    } catch {
      return undefined;
    }
    for (let hops = 0; ticket.status === 'merged' && ticket.merged_into_id && hops < 16; hops++) {
      ticket = await t.lockOne(tx, tenantId, ticket.merged_into_id);
    }
    // A closed (or spam) conversation is over: the customer's new message starts a new ticket.
    return ticket.status === 'closed' || ticket.status === 'spam' || ticket.status === 'merged' ? undefined : ticket;
  }

  type Outcome = { result: IngestResult; trigger?: { event: 'ticket.created' | 'ticket.reopened'; eventId: string } };

  /** One delivery's writes inside the caller's transaction. */
  const ledgerKey = (item: IngestItem) => ({ channel: item.channel, providerMessageId: item.message.providerMessageId });

  /** `claimed` is passed when the caller already claimed the ledger row (batch mode claims them all first). */
  async function processIn(tx: Executor, item: IngestItem, claimed?: boolean): Promise<Outcome> {
    const def = channelById(item.channel);
    if (!def) throw new AppError(404, 'not_found', 'Not found', 'No such channel.');
    const m = item.message;
    const key = ledgerKey(item);
    {
      if (!(claimed ?? (await store.claimDelivery(tx, item.tenant_id, key, item.id)))) {
        const first = await store.getDelivery(tx, item.tenant_id, key);
        // The same job run again after a crash is not a redelivery: it gets the first answer back as it was.
        if (first.first_correlation_id === item.id) {
          return { result: { channel: def.id, ticket_id: first.ticket_id!, customer_id: first.customer_id!, was_created: first.was_created, was_duplicate: false } };
        }
        await store.countDuplicate(tx, item.tenant_id, key, item.id);
        return { result: { channel: def.id, ticket_id: first.ticket_id!, customer_id: first.customer_id!, was_created: false, was_duplicate: true } };
      }
      const customerId = await customerFor(tx, item.tenant_id, def, m);
      const by: EventActor = { actor_type: 'customer', actor_user_id: null, actor_name: m.sender.name ?? m.sender.handle };
      const kind = `inbound_${def.id}`;
      const body = m.body.slice(0, LIMITS.body);
      const meta = { provider_message_id: m.providerMessageId, ...(m.subject ? { subject: m.subject } : {}), ...(m.sentAt ? { sent_at: m.sentAt } : {}) };
      const target = await threadTarget(tx, item.tenant_id, def, m);
      let ticketId: string;
      let trigger: { event: 'ticket.created' | 'ticket.reopened'; eventId: string } | undefined;
      if (target) {
        ticketId = target.id;
        if (target.status === 'solved') trigger = { event: 'ticket.reopened', eventId: await t.reopenLocked(tx, item.tenant_id, by, target) };
        await t.addInbound(tx, item.tenant_id, by, target, kind, body, meta);
      } else {
        const opened = await t.openTicket(
          tx,
          item.tenant_id,
          by,
          {
            subject: subjectOf(m),
            description: body,
            priority: 'normal',
            source: def.ticket_source,
            customer_id: customerId,
            assignee_id: null,
            team_id: null,
            tags: [],
            metadata: {},
            conversation_key: m.conversationKey ?? null,
          },
          kind,
          meta,
        );
        ticketId = opened.row.id;
        trigger = { event: 'ticket.created', eventId: opened.eventId };
      }
      if (m.messageIdHeader) await store.rememberMessageId(tx, item.tenant_id, m.messageIdHeader, ticketId);
      const wasCreated = target === undefined;
      await store.completeDelivery(tx, item.tenant_id, key, { ticket_id: ticketId, customer_id: customerId, was_created: wasCreated });
      return { result: { channel: def.id, ticket_id: ticketId, customer_id: customerId, was_created: wasCreated, was_duplicate: false }, trigger };
    }
  }

  // New tickets' SLA timers are breached by the per-minute sweep: two delayed jobs per ingested ticket would
  // cost more Redis work than the whole intake path.
  const afterCommit = async (tenantId: string, o: Outcome, memo?: Map<string, boolean>) => {
    if (o.trigger) await t.afterCommit(tenantId, o.result.ticket_id, { dueMoved: false, trigger: o.trigger, memo });
  };

  async function process(item: IngestItem): Promise<IngestResult> {
    const outcome = await db.transaction().execute((tx) => processIn(tx, item));
    await afterCommit(item.tenant_id, outcome);
    return outcome.result;
  }

  /** Errors after which a whole-batch transaction is retried item by item instead of failing the job. */
  const retryAlone = (err: unknown) =>
    err instanceof AppError || ['40P01', '40001', '23505'].includes(String((err as { code?: unknown })?.code));

  return {
    process,
    /** The ingest.batch job: every item answered; a lost database fails the job so BullMQ retries it whole. */
    async processBatch(items: IngestItem[]): Promise<ItemResult[]> {
      // Fast path: the whole batch in one transaction, so one commit (one WAL flush) serves every message.
      // Items are grouped by sender (a stable sort keeps each sender's messages in arrival order) so that
      // concurrent batches take their sender locks in the same order.
      if (items.length > 1) {
        const ordered = [...items].sort((a, b) => `${a.tenant_id}|${a.message.sender.handle}`.localeCompare(`${b.tenant_id}|${b.message.sender.handle}`));
        try {
          const outcomes = await db.transaction().execute(async (tx) => {
            // Locks are taken in two globally ordered phases — every ledger row first, by key, then senders —
            // so two batches can never wait on each other in a cycle (a deadlock costs a second to detect).
            const byKey = [...ordered].sort((a, b) =>
              `${a.tenant_id}|${a.channel}|${a.message.providerMessageId}`.localeCompare(`${b.tenant_id}|${b.channel}|${b.message.providerMessageId}`),
            );
            const claims = new Map<IngestItem, boolean>();
            for (const item of byKey) claims.set(item, await store.claimDelivery(tx, item.tenant_id, ledgerKey(item), item.id));
            const out: Outcome[] = [];
            for (const item of ordered) out.push(await processIn(tx, item, claims.get(item)));
            return out;
          });
          const memo = new Map<string, boolean>();
          for (const [i, o] of outcomes.entries()) await afterCommit(ordered[i]!.tenant_id, o, memo);
          const byId = new Map(ordered.map((item, i) => [item.id, outcomes[i]!.result]));
          return items.map((item) => ({ id: item.id, ok: true, value: byId.get(item.id) }));
        } catch (err) {
          // A refused item, a deadlock or a lost race rolls the batch back whole; each item then runs alone.
          if (!retryAlone(err)) throw err;
        }
      }
      const results: ItemResult[] = [];
      for (const item of items) {
        try {
          results.push({ id: item.id, ok: true, value: await process(item) });
        } catch (err) {
          if (err instanceof AppError) results.push({ id: item.id, ok: false, error: { status: err.status, code: err.code, detail: err.detail } });
          else throw err;
        }
      }
      return results;
    },
  };
}

export type IngestProcessor = ReturnType<typeof createIngestProcessor>;

export const ingestBody = z.strictObject({
  tenant_id: z.string().max(100).optional(),
  agent_id: z.string().max(100).optional(),
  payload: z.custom<Record<string, unknown>>((v) => typeof v === 'object' && v !== null && !Array.isArray(v), { message: 'payload must be the provider\'s JSON object' }),
});
export const ingestQuery = z.strictObject({ token: z.string().min(1).max(200).optional() });

/**
 * The HTTP side of POST /v1/ingest/{channel}: resolve the workspace, throttle, parse (pure), then coalesce
 * concurrent messages into one queued job and wait for their answers on this process's result channel.
 */
export function createIngestGateway(deps: {
  db: Db;
  config: Config;
  redis: Redis;
  queues: QueueHub;
  bus: ResultBus;
  channels: ChannelService;
}) {
  const { db, config, queues, bus, channels } = deps;
  const limiter = new RateLimiterRedis({
    storeClient: deps.redis,
    keyPrefix: `${config.REDIS_PREFIX}:throttle:ingest`,
    points: config.INGEST_RATE_POINTS,
    duration: config.INGEST_RATE_WINDOW_SECONDS,
  });

  let pending: { item: Omit<IngestItem, 'id'> & { id: string }; fail: (err: unknown) => void }[] = [];
  let timer: NodeJS.Timeout | null = null;

  async function flush() {
    const batch = pending;
    pending = [];
    if (timer) clearTimeout(timer);
    timer = null;
    if (batch.length === 0) return;
    try {
      await queues.enqueue('ingest.batch', { reply_to: bus.channel, items: batch.map((b) => b.item) });
    } catch (err) {
      for (const b of batch) b.fail(err);
    }
  }

  /** Queues one message in the current batch; the batch leaves when full or after the window. */
  function submit(item: Omit<IngestItem, 'id'>, id = bus.newId()): Promise<ItemResult | typeof TIMED_OUT> {
    const answer = bus.expect(id, config.JOB_WAIT_MS);
    return new Promise((resolve, reject) => {
      answer.then(resolve, reject);
      pending.push({ item: { ...item, id }, fail: reject });
      if (pending.length >= config.INGEST_BATCH_MAX) void flush();
      else if (!timer) timer = setTimeout(() => void flush(), config.INGEST_BATCH_WINDOW_MS);
    });
  }

  async function resolveTenant(def: ChannelDefinition, body: z.output<typeof ingestBody>, token: string | undefined): Promise<string> {
    if (token !== undefined) {
      const conn = await channelStore.enabledByToken(db, channels.tokenHash(token));
      if (!conn || conn.channel !== def.id) throw notFound('channel connection');
      return conn.tenant_id;
    }
    let tenantId = body.tenant_id;
    if (tenantId === undefined && body.agent_id !== undefined) {
      tenantId = isUuid(body.agent_id) ? await store.agentTenant(db, body.agent_id) : undefined;
      if (!tenantId) throw notFound('channel connection');
    }
    if (tenantId === undefined) {
      throw validationFailed([{ path: 'body.tenant_id', message: 'send tenant_id, agent_id or ?token=' }], 'The workspace could not be resolved.');
    }
    if (!isUuid(tenantId) || !(await channelStore.enabledConnection(db, tenantId.toLowerCase(), def.id))) throw notFound('channel connection');
    return tenantId.toLowerCase();
  }

  async function consume(key: string) {
    try {
      await limiter.consume(key);
    } catch (res) {
      if (res instanceof RateLimiterRes) {
        throw new AppError(429, 'throttled', 'Too many requests', 'This channel is receiving more than its rate; retry later.', {
          headers: { 'Retry-After': String(Math.max(1, Math.ceil(res.msBeforeNext / 1000))) },
        });
      }
      throw dependencyUnavailable('Redis');
    }
  }

  return {
    async receive(channel: string, body: z.output<typeof ingestBody>, query: z.output<typeof ingestQuery>): Promise<HandlerResult> {
      const def = channelById(channel);
      if (!def) throw notFound('channel');
      if (!def.adapter) {
        throw new AppError(400, 'channel_adapter_unavailable', 'Bad request', `The ${def.id} channel has no adapter yet; messages cannot be ingested.`);
      }
      const tenantId = await resolveTenant(def, body, query.token);
      const throttleKey = `${tenantId}:${def.id}`;
      await consume(throttleKey);
      const parsed = def.adapter.parse(body.payload);
      if (!parsed.ok) {
        throw new AppError(400, 'channel_payload_invalid', 'Bad request', `The ${def.id} adapter cannot read this payload: ${parsed.reason}.`);
      }
      if (parsed.messages.length === 0) {
        await limiter.reward(throttleKey).catch(() => {});
        return { body: { channel: def.id, ignored: true, reason: 'the payload holds no customer message (e.g. delivery receipts)' } };
      }
      await bus.ready().catch(() => {
        throw dependencyUnavailable('Redis');
      });
      const ids = parsed.messages.map(() => bus.newId());
      const answers = await Promise.all(parsed.messages.map((message, i) => submit({ tenant_id: tenantId, channel: def.id, message }, ids[i])));
      if (answers.some((a) => a === TIMED_OUT)) {
        // Still processed exactly once; the provider message ids are what GET /v1/ingest/deliveries lists.
        return {
          status: 202,
          body: { status: 'accepted', channel: def.id, job_id: ids[0]!, provider_message_ids: parsed.messages.map((m) => m.providerMessageId) },
        };
      }
      const results = answers as ItemResult[];
      const failed = results.find((r) => !r.ok);
      if (failed) throw new AppError(failed.error!.status, failed.error!.code, 'Ingest refused', failed.error!.detail);
      const values = results.map((r) => r.value as IngestResult);
      // A delivery we already had costs the provider nothing against the throttle.
      if (values.every((v) => v.was_duplicate)) await limiter.reward(throttleKey).catch(() => {});
      const [first] = values;
      return { body: values.length === 1 ? first : { ...first, messages: values } };
    },

    async deliveries(actor: Principal, q: { limit: number; offset: number; channel?: string }) {
      const rows = await store.recentDeliveries(db, actor.tenantId, q);
      return {
        deliveries: rows.map((r) => ({
          channel: r.channel,
          provider_message_id: r.provider_message_id,
          ticket_id: r.ticket_id,
          customer_id: r.customer_id,
          was_created: r.was_created,
          first_seen_at: iso(r.first_seen_at),
          last_seen_at: iso(r.last_seen_at),
          duplicate_count: r.duplicate_count,
        })),
      };
    },

  };
}

export type IngestGateway = ReturnType<typeof createIngestGateway>;
