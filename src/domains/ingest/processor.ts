import type { Logger } from 'pino';
import { isDataError, type Db, type Executor } from '../../db';
import { DomainError, notFound, refuse } from '../../lib/errors';
import type { ItemResult } from '../../queue/results';
import type { InboundMessage } from '../channels/adapters/types';
import { channelById, type ChannelDefinition } from '../channels/registry';
import { senderKey, type CustomerService, type Sender } from '../customers/service';
import { LIMITS } from '../tickets/schemas';
import type { EventActor, LockedTicket, OpenSpec, TicketCommands } from '../tickets/commands';
import * as channelStore from '../channels/store';
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
  /** Hex HMAC of the inbound token the delivery came with, if it came with one. */
  token_hash?: string;
  message: InboundMessage;
}

type Trigger = { event: 'ticket.created' | 'ticket.reopened'; eventId: string };
type Outcome = { result: IngestResult; trigger?: Trigger };

/** A delivery this transaction claimed, with what the writes need to know about it. */
interface Fresh {
  item: IngestItem;
  def: ChannelDefinition;
  sender: Sender;
  senderKey: string;
}

const subjectOf = (m: InboundMessage) => {
  const s = (m.subject ?? '').trim() || m.body.trim().split('\n')[0]!.trim().slice(0, 80);
  return (s || '(no subject)').slice(0, LIMITS.subject);
};

const ledgerKey = (item: IngestItem): store.LedgerKey => ({ channel: item.channel, providerMessageId: item.message.providerMessageId });
const claimOf = (item: IngestItem): store.Claim => ({ ...ledgerKey(item), correlationId: item.id });
const actorOf = (f: Fresh): EventActor => ({ actor_type: 'customer', actor_user_id: null, actor_name: f.sender.name });
const eventMeta = (m: InboundMessage) => ({
  provider_message_id: m.providerMessageId,
  ...(m.messageIdHeader ? { message_id: m.messageIdAsWritten ?? m.messageIdHeader } : {}),
  ...(m.subject ? { subject: m.subject } : {}),
  ...(m.sentAt ? { sent_at: m.sentAt } : {}),
  ...(m.mailbox
    ? { mailbox: { provider: m.mailbox.provider, address: m.mailbox.address, message_id: m.mailbox.messageId, ...(m.mailbox.threadId ? { thread_id: m.mailbox.threadId } : {}) } }
    : {}),
});

/**
 * Splits claimed deliveries into rounds: a message goes after every earlier message of the batch from the
 * same sender, in the same conversation, or whose Message-ID it replies to. Each round's set-based lookups
 * then see what earlier rounds wrote (the customer, the ticket to thread into), exactly as if the messages
 * had arrived one by one. Almost every batch is a single round.
 */
function rounds(fresh: Fresh[]): Fresh[][] {
  const last = new Map<string, number>();
  const out: Fresh[][] = [];
  for (const f of fresh) {
    const m = f.item.message;
    const own = [`s:${f.senderKey}`, ...(m.conversationKey ? [`c:${f.def.ticket_source}|${m.conversationKey}`] : [])];
    const after = [...own, ...(m.inReplyTo ?? []).map((id) => `m:${id}`)];
    const round = Math.max(-1, ...after.map((k) => last.get(k) ?? -1)) + 1;
    for (const k of [...own, ...(m.messageIdHeader ? [`m:${m.messageIdHeader}`] : [])]) last.set(k, round);
    (out[round] ??= []).push(f);
  }
  return out;
}

/**
 * The worker side of ingest. A batch of deliveries is written set-based in one transaction: the ledger rows
 * are claimed first, then the senders locked, then customers, threading, tickets and events are each one
 * statement for the whole batch (per round), so a batch of fifty messages costs about as many statements as
 * one. A delivery already in the ledger writes nothing but its duplicate count and answers with the first
 * result.
 */
export function createIngestProcessor(deps: {
  db: Db;
  tickets: Pick<TicketCommands, 'threadInbound' | 'open' | 'reopen' | 'appendInbound' | 'rememberMessageIds' | 'afterCommit'>;
  customers: CustomerService;
  logger: Logger;
}) {
  const { db, customers } = deps;
  const t = deps.tickets;

  /** The tickets each message continues (the tickets' threading rule), locked; absent for a new one. */
  const threadTargets = (tx: Executor, tenantId: string, round: Fresh[]) =>
    t.threadInbound(
      tx,
      tenantId,
      new Map(
        round.map((f) => {
          const m = f.item.message;
          return [f, { email: f.def.handle_kind === 'email', inReplyTo: m.inReplyTo, mailboxHash: m.mailboxHash, source: f.def.ticket_source, conversationKey: m.conversationKey }];
        }),
      ),
    );

  async function writeRound(tx: Executor, tenantId: string, round: Fresh[], outcomes: Map<string, Outcome>) {
    const customerOf = await customers.forSenders(tx, tenantId, round.map((f) => f.sender));
    const targets = await threadTargets(tx, tenantId, round);
    const opens: { f: Fresh; spec: OpenSpec }[] = [];
    const replies: { f: Fresh; ticket: LockedTicket }[] = [];
    const reopened = new Set<string>();
    for (const f of round) {
      const customerId = customerOf.get(f.senderKey)!;
      const m = f.item.message;
      const ticket = targets.get(f);
      if (!ticket) {
        opens.push({
          f,
          spec: {
            by: actorOf(f),
            fields: {
              subject: subjectOf(m),
              description: m.body.slice(0, LIMITS.body),
              priority: 'normal',
              source: f.def.ticket_source,
              customer_id: customerId,
              assignee_id: null,
              team_id: null,
              tags: [],
              metadata: {},
              conversation_key: m.conversationKey ?? null,
            },
            kind: `inbound_${f.def.id}`,
            meta: eventMeta(m),
          },
        });
        continue;
      }
      let trigger: Trigger | undefined;
      // A reply to a solved ticket reopens it (once, however many replies this round brings it).
      if (ticket.status === 'solved' && !reopened.has(ticket.id)) {
        reopened.add(ticket.id);
        trigger = { event: 'ticket.reopened', eventId: await t.reopen(tx, tenantId, actorOf(f), ticket) };
      }
      replies.push({ f, ticket });
      outcomes.set(f.item.id, {
        result: { channel: f.def.id, ticket_id: ticket.id, customer_id: customerId, was_created: false, was_duplicate: false },
        trigger,
      });
    }
    const opened = await t.open(tx, tenantId, opens.map((o) => o.spec));
    opened.forEach(({ row, eventId }, i) => {
      const { f } = opens[i]!;
      outcomes.set(f.item.id, {
        result: { channel: f.def.id, ticket_id: row.id, customer_id: row.customer_id, was_created: true, was_duplicate: false },
        trigger: { event: 'ticket.created', eventId },
      });
    });
    await t.appendInbound(
      tx,
      tenantId,
      replies.map(({ f, ticket }) => ({ by: actorOf(f), ticket, kind: `inbound_${f.def.id}`, body: f.item.message.body.slice(0, LIMITS.body), meta: eventMeta(f.item.message) })),
    );
    await t.rememberMessageIds(
      tx,
      tenantId,
      round.filter((f) => f.item.message.messageIdHeader).map((f) => ({ message_id: f.item.message.messageIdHeader!, ticket_id: outcomes.get(f.item.id)!.result.ticket_id })),
    );
  }

  /**
   * One workspace's deliveries inside the caller's transaction; the answers are keyed by item id. The HTTP
   * tier checked the connection, but from a short cache: the authoritative check is this one, in the same
   * transaction as the writes, so a delivery for a connection disabled (or a token rotated) meanwhile is
   * refused with nothing written.
   */
  async function writeBatch(tx: Executor, tenantId: string, all: IngestItem[], outcomes: Map<string, Outcome>, refusals: Map<string, DomainError>) {
    const connected = await channelStore.connectedDeliveries(tx, tenantId, all);
    const items = all.filter((i) => connected.has(i.id));
    for (const i of all) if (!connected.has(i.id)) refusals.set(i.id, notFound('channel connection'));
    // Ledger rows first, in key order: the only lock a batch takes before its senders', always in one order.
    const byKey = [...items].sort((a, b) => store.ledgerId(ledgerKey(a)).localeCompare(store.ledgerId(ledgerKey(b))));
    const won = await store.claimDeliveries(tx, tenantId, byKey.map(claimOf));
    const fresh: Fresh[] = items
      .filter((i) => won.has(i.id))
      .map((item) => {
        const def = channelById(item.channel)!;
        const s = item.message.sender;
        const sender: Sender = { kind: def.handle_kind, handle: s.handle, name: s.name ?? s.handle, ...(s.email ? { email: s.email } : {}) };
        return { item, def, sender, senderKey: senderKey(sender) };
      });
    await store.lockSenders(tx, tenantId, [...new Set(fresh.map((f) => f.senderKey))]);
    for (const round of rounds(fresh)) await writeRound(tx, tenantId, round, outcomes);
    await store.completeDeliveries(
      tx,
      tenantId,
      fresh.map((f) => {
        const { result } = outcomes.get(f.item.id)!;
        return { ...ledgerKey(f.item), ticket_id: result.ticket_id, customer_id: result.customer_id, was_created: result.was_created };
      }),
    );

    // Copies: of a delivery claimed by this batch, or of one already in the ledger.
    const claimedHere = new Map(fresh.map((f) => [store.ledgerId(ledgerKey(f.item)), f.item.id]));
    const copies = items.filter((i) => !won.has(i.id));
    const firsts = await store.getDeliveries(tx, tenantId, copies.filter((c) => !claimedHere.has(store.ledgerId(ledgerKey(c)))).map(ledgerKey));
    const counted: store.Claim[] = [];
    for (const c of copies) {
      const here = claimedHere.get(store.ledgerId(ledgerKey(c)));
      const row = firsts.get(store.ledgerId(ledgerKey(c)));
      const first = here ? { ...outcomes.get(here)!.result, first_correlation_id: here } : { ...row!, ticket_id: row!.ticket_id!, customer_id: row!.customer_id! };
      // The same job run again after a crash is not a redelivery: it gets the first answer back as it was.
      const rerun = first.first_correlation_id === c.id;
      if (!rerun) counted.push(claimOf(c));
      outcomes.set(c.id, {
        result: { channel: c.channel, ticket_id: first.ticket_id, customer_id: first.customer_id, was_created: rerun && first.was_created, was_duplicate: !rerun },
      });
    }
    await store.countDuplicates(tx, tenantId, counted);
  }

  // New tickets' SLA timers are breached by the per-minute sweep: two delayed jobs per ingested ticket would
  // cost more Redis work than the whole intake path.
  async function afterCommit(items: IngestItem[], outcomes: Map<string, Outcome>) {
    const memo = new Map<string, boolean>();
    for (const item of items) {
      const o = outcomes.get(item.id)!;
      if (o.trigger) await t.afterCommit(item.tenant_id, o.result.ticket_id, { dueMoved: false, trigger: o.trigger, memo });
    }
  }

  /** Every item in one transaction (one commit, one WAL flush), workspaces in id order. */
  async function write(items: IngestItem[]) {
    const outcomes = new Map<string, Outcome>();
    const refusals = new Map<string, DomainError>();
    const tenants = [...new Set(items.map((i) => i.tenant_id))].sort();
    await db.transaction().execute(async (tx) => {
      for (const tenantId of tenants) await writeBatch(tx, tenantId, items.filter((i) => i.tenant_id === tenantId), outcomes, refusals);
    });
    await afterCommit(items.filter((i) => outcomes.has(i.id)), outcomes);
    return { outcomes, refusals };
  }

  const answer = (id: string, w: Awaited<ReturnType<typeof write>>): ItemResult => {
    const refused = w.refusals.get(id);
    if (refused) return { id, ok: false, error: { code: refused.code, detail: refused.detail } };
    return { id, ok: true, value: w.outcomes.get(id)!.result };
  };

  const unknownChannel = (item: IngestItem) =>
    channelById(item.channel) ? undefined : refuse('not_found', 'No such channel.');

  async function process(item: IngestItem): Promise<IngestResult> {
    const refused = unknownChannel(item);
    if (refused) throw refused;
    const w = await write([item]);
    const late = w.refusals.get(item.id);
    if (late) throw late;
    return w.outcomes.get(item.id)!.result;
  }

  /** Errors after which a whole-batch transaction is retried item by item instead of failing the job. */
  const retryAlone = (err: unknown) =>
    err instanceof DomainError || isDataError(err) || ['40P01', '40001', '23505'].includes(String((err as { code?: unknown })?.code));

  return {
    process,
    /** The ingest.batch job: every item answered; a lost database fails the job so BullMQ retries it whole. */
    async processBatch(items: IngestItem[]): Promise<ItemResult[]> {
      const refused = new Map(items.flatMap((i) => { const e = unknownChannel(i); return e ? [[i.id, e] as const] : []; }));
      const valid = items.filter((i) => !refused.has(i.id));
      const results = new Map<string, ItemResult>();
      for (const [id, e] of refused) results.set(id, { id, ok: false, error: { code: e.code, detail: e.detail } });
      let done = false;
      if (valid.length > 1) {
        try {
          const w = await write(valid);
          for (const item of valid) results.set(item.id, answer(item.id, w));
          done = true;
        } catch (err) {
          // A deadlock or a lost race rolls the batch back whole; each item then runs alone.
          if (!retryAlone(err)) throw err;
        }
      }
      if (!done) {
        for (const item of valid) {
          try {
            results.set(item.id, { id: item.id, ok: true, value: await process(item) });
          } catch (err) {
            if (err instanceof DomainError) results.set(item.id, { id: item.id, ok: false, error: { code: err.code, detail: err.detail } });
            else if (isDataError(err)) {
              // A value PostgreSQL cannot store (e.g. a NUL character): refused, so the provider is told, not retried forever.
              results.set(item.id, { id: item.id, ok: false, error: { code: 'channel_payload_invalid', detail: 'The message holds a value that cannot be stored.' } });
            } else throw err;
          }
        }
      }
      return items.map((i) => results.get(i.id)!);
    },
  };
}

export type IngestProcessor = ReturnType<typeof createIngestProcessor>;
