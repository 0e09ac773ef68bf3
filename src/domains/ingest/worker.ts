import type { Logger } from 'pino';
import { isDataError, type Db, type Executor } from '../../db';
import { DomainError, notFound, refuse } from '../../lib/errors';
import type { JobData } from '../../queue/jobs';
import type { ItemResult } from '../../queue/results';
import { runBatch } from '../../intake/batch';
import { recordOnce, type LedgerStore } from '../../intake/ledger';
import type { InboundMessage } from '../channels/adapters/types';
import { channelById, type ChannelDefinition } from '../channels/registry';
import { senderKey, type CustomerService, type Sender } from '../customers/service';
import { LIMITS } from '../tickets/schemas';
import type { EventActor, LockedTicket, OpenSpec, TicketCommands } from '../tickets/commands';
import * as channelStore from '../channels/store';
import type { FileService } from '../files/service';
import type { FetchJob, InboundFiles } from '../inbound-files/service';
import { inboundEventOf } from '../inbound-files/store';
import * as store from './store';

export interface IngestResult {
  channel: string;
  ticket_id: string;
  customer_id: string;
  was_created: boolean;
  was_duplicate: boolean;
}

/** One delivery of an `ingest.batch` job, as its schema defines it. */
export type IngestItem = JobData<'ingest.batch'>['items'][number];

type Trigger = { event: 'ticket.created' | 'ticket.reopened'; eventId: string };
/** `eventId`: the message's own event (its files are fetched onto it after commit). */
type Outcome = { result: IngestResult; trigger?: Trigger; eventId?: string };

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

/** The ingest ledger: one row per (workspace, channel, provider message id). */
const LEDGER: LedgerStore<store.LedgerKey, IngestResult> = {
  id: store.ledgerId,
  claim: store.claimDeliveries,
  get: async (tx, tenantId, keys) => {
    const rows = await store.getDeliveries(tx, tenantId, keys);
    return new Map([...rows].map(([id, r]) => [id, { channel: r.channel, ticket_id: r.ticket_id!, customer_id: r.customer_id!, was_created: r.was_created, was_duplicate: false, first_correlation_id: r.first_correlation_id }]));
  },
  countCopies: store.countDuplicates,
};
const actorOf = (f: Fresh): EventActor => ({ actor_type: 'customer', actor_user_id: null, actor_name: f.sender.name });
const eventMeta = (m: InboundMessage) => ({
  provider_message_id: m.providerMessageId,
  ...(m.messageIdHeader ? { message_id: m.messageIdAsWritten ?? m.messageIdHeader } : {}),
  ...(m.subject ? { subject: m.subject } : {}),
  ...(m.sentAt ? { sent_at: m.sentAt } : {}),
  ...(m.mailbox
    ? { mailbox: { provider: m.mailbox.provider, address: m.mailbox.address, message_id: m.mailbox.messageId, ...(m.mailbox.threadId ? { thread_id: m.mailbox.threadId } : {}) } }
    : {}),
  // How many files came with it (issue 34): fetched after commit, each then listed with its state on the event.
  ...(m.files && m.files.length > 0 ? { files_expected: m.files.length + (m.filesOmitted ?? 0) } : {}),
  ...(m.filesOmitted ? { files_omitted: m.filesOmitted } : {}),
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
export function createIngestWorker(deps: {
  db: Db;
  tickets: Pick<TicketCommands, 'threadInbound' | 'open' | 'reopen' | 'appendInbound' | 'rememberMessageIds' | 'afterCommit'>;
  customers: CustomerService;
  logger: Logger;
  /** Inbound files (issue 34): one fetch job per message with files, queued after commit. */
  files?: Pick<InboundFiles, 'queueFetch' | 'discard'>;
  /** Web chat files: a visitor's checked uploads bound to their message's event, in this transaction. */
  uploads?: Pick<FileService, 'bindVisitorUploads'>;
}) {
  const { db, customers } = deps;
  const t = deps.tickets;

  /**
   * The binding of a web chat visitor's uploads to the event their message writes, or nothing. Only a fresh
   * delivery gets here (the ledger answers a redelivery or a rerun without writing), so each upload is bound
   * exactly once; the binding commits with the event and the ledger row, or not at all.
   */
  const uploadsOf = (tx: Executor, tenantId: string, f: Fresh) => {
    const ids = f.item.message.uploads;
    if (!ids || ids.length === 0 || f.def.id !== 'web_chat') return undefined;
    const binder = deps.uploads;
    if (!binder) throw new Error('a web chat message names uploads, but the ingest worker has no binder for them');
    return (ticketId: string, eventId: string) => binder.bindVisitorUploads(tx, tenantId, f.item.message.sender.handle, ids, { ticketId, eventId });
  };

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
    const replies: { f: Fresh; ticket: LockedTicket; bind: ReturnType<typeof uploadsOf> }[] = [];
    const reopened = new Set<string>();
    for (const f of round) {
      const customerId = customerOf.get(f.senderKey)!;
      const m = f.item.message;
      const ticket = targets.get(f);
      const bind = uploadsOf(tx, tenantId, f);
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
            ...(bind ? { files: bind } : {}),
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
      replies.push({ f, ticket, bind });
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
        eventId,
      });
    });
    const appended = await t.appendInbound(
      tx,
      tenantId,
      replies.map(({ f, ticket, bind }) => ({
        by: actorOf(f),
        ticket,
        kind: `inbound_${f.def.id}`,
        body: f.item.message.body.slice(0, LIMITS.body),
        meta: eventMeta(f.item.message),
        ...(bind ? { files: (eventId: string) => bind(ticket.id, eventId) } : {}),
      })),
    );
    replies.forEach(({ f }, i) => {
      const o = outcomes.get(f.item.id);
      if (o && appended[i]) o.eventId = appended[i];
    });
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
    for (const i of all) if (!connected.has(i.id)) refusals.set(i.id, notFound('channel connection'));
    const copies = await recordOnce(tx, tenantId, all.filter((i) => connected.has(i.id)), {
      ledger: LEDGER,
      keyOf: ledgerKey,
      writeFresh: async (items) => {
        const fresh: Fresh[] = items.map((item) => {
          const def = channelById(item.channel)!;
          const s = item.message.sender;
          const sender: Sender = { kind: def.handle_kind, handle: s.handle, name: s.name ?? s.handle, ...(s.email ? { email: s.email } : {}) };
          return { item, def, sender, senderKey: senderKey(sender) };
        });
        await store.lockSenders(tx, tenantId, [...new Set(fresh.map((f) => f.senderKey))]);
        for (const round of rounds(fresh)) await writeRound(tx, tenantId, round, outcomes);
        const results = new Map(items.map((i) => [i.id, outcomes.get(i.id)!.result]));
        await store.completeDeliveries(tx, tenantId, items.map((i) => ({ ...ledgerKey(i), ...results.get(i.id)! })));
        return results;
      },
    });
    for (const { item, first, rerun } of copies) {
      // A rerun gets its first answer back as it was; a redelivery the same ticket, as a duplicate.
      outcomes.set(item.id, {
        result: { channel: item.channel, ticket_id: first.ticket_id!, customer_id: first.customer_id!, was_created: rerun && first.was_created, was_duplicate: !rerun },
      });
    }
  }

  /**
   * After commit: the fetch job of every fresh message with files. A rerun (this job ran before and committed,
   * then died before it was done) queues its messages' jobs again, finding each event by its provider message
   * id: the job id dedupes a job still kept, and the fetch skips files that have rows. A redelivery fetches
   * nothing: its staged parts are dropped.
   */
  async function queueFiles(items: IngestItem[], outcomes: Map<string, Outcome>) {
    const files = deps.files;
    if (!files) return;
    const jobs: FetchJob[] = [];
    const unused: string[] = [];
    for (const item of items) {
      const refs = item.message.files;
      const o = outcomes.get(item.id);
      if (!refs || refs.length === 0 || !o) continue;
      let eventId = o.eventId;
      if (!eventId && o.result.was_duplicate) {
        unused.push(...refs.flatMap((r) => (r.staged ? [r.staged] : [])));
        continue;
      }
      eventId ??= await inboundEventOf(db, item.tenant_id, o.result.ticket_id, `inbound_${item.channel}`, item.message.providerMessageId);
      if (!eventId) continue;
      jobs.push({ tenant_id: item.tenant_id, ticket_id: o.result.ticket_id, event_id: eventId, channel: item.channel, files: refs });
    }
    await files.discard(unused);
    // A failure here fails the ingest job, whose retry is a rerun: it queues these again (nothing is written twice).
    await files.queueFetch(jobs);
  }

  // New tickets' SLA targets need nothing here: the SLA sweep reads their due times where they are stored.
  async function afterCommit(items: IngestItem[], outcomes: Map<string, Outcome>) {
    const memo = new Map<string, boolean>();
    for (const item of items) {
      const o = outcomes.get(item.id)!;
      if (o.trigger) await t.afterCommit(item.tenant_id, o.result.ticket_id, { trigger: o.trigger, memo });
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
    await queueFiles(items, outcomes);
    return { outcomes, refusals };
  }

  const unknownChannel = (item: IngestItem) =>
    channelById(item.channel) ? undefined : refuse('not_found', 'No such channel.');

  /** Items in one transaction, each answered: its result, or its refusal (a connection gone meanwhile). */
  async function writeAnswered(items: IngestItem[]): Promise<Map<string, ItemResult>> {
    const w = await write(items);
    return new Map(
      items.map((i) => {
        const refused = w.refusals.get(i.id);
        return [i.id, refused ? { id: i.id, ok: false, error: { code: refused.code, detail: refused.detail } } : { id: i.id, ok: true, value: w.outcomes.get(i.id)!.result }];
      }),
    );
  }

  /** A value PostgreSQL cannot store (e.g. a NUL character) is the message's refusal, so the provider is told, not retried forever. */
  const refusalOf = (err: unknown) => (isDataError(err) ? { code: 'channel_payload_invalid' as const, detail: 'The message holds a value that cannot be stored.' } : null);

  return {
    /** One delivery, alone: its result, or its refusal thrown. */
    async process(item: IngestItem): Promise<IngestResult> {
      const refused = unknownChannel(item);
      if (refused) throw refused;
      const w = await write([item]);
      const late = w.refusals.get(item.id);
      if (late) throw late;
      return w.outcomes.get(item.id)!.result;
    },
    /** The ingest.batch job: every item answered; a lost database fails the job so BullMQ retries it whole. */
    async processBatch(items: IngestItem[]): Promise<ItemResult[]> {
      const refused = new Map(items.flatMap((i) => { const e = unknownChannel(i); return e ? [[i.id, e] as const] : []; }));
      const answered = await runBatch(items.filter((i) => !refused.has(i.id)), { write: writeAnswered, refusalOf });
      const results = new Map(answered.map((r) => [r.id, r]));
      for (const [id, e] of refused) results.set(id, { id, ok: false, error: { code: e.code, detail: e.detail } });
      return items.map((i) => results.get(i.id)!);
    },
  };
}

export type IngestWorker = ReturnType<typeof createIngestWorker>;
