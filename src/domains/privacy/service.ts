import type { Logger } from 'pino';
import type { Db, Executor } from '../../db';
import type { CustomerJobRow } from '../../db/types';
import { notFound, refuse } from '../../lib/errors';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import type { QueueHub } from '../../queue/hub';
import { queueNames } from '../../queue/jobs';
import type { AuditService } from '../audit/service';
import { missingCustomer } from '../customers/service';
import * as customers from '../customers/store';
import type { EventSink } from '../events/types';
import type { Principal } from '../identity/principal';
import * as store from './store';
import { asciiLower, ERASED, eraseInJson, eraseMessageMeta, eraseTerms, likePatterns, mentions, personTerms, type Term } from './terms';

/** Tickets erased per transaction: a person with thousands of tickets never holds them all locked at once. */
export const ERASE_BATCH_TICKETS = 100;

/** How long an erasure waits in PostgreSQL before the sweep queues it again (a running one is not queued twice: same job id). */
export const STALE_ERASURE_MS = 15 * 60 * 1000;

/** Jobs read per page while the queues are searched for the person. */
const JOB_PAGE = 500;

/** The BullMQ states a job holding the person can wait in (an active one is being run; it is left to finish). */
const WAITING_STATES = ['waiting', 'delayed', 'prioritized', 'waiting-children'] as const;
const FINISHED_STATES = ['completed', 'failed'] as const;

/** Events whose body is what someone wrote (a message or a note), the only ones a redaction applies to (retention's store says the same in SQL, MESSAGE). */
export const isMessageKind = (kind: string) => kind === 'ticket_created' || kind === 'reply' || kind === 'internal_note' || kind.startsWith('inbound_');

/** Tables whose rows belong to a ticket (the person's lose every term), and the workspace's tables (exact terms only). */
const PER_TICKET_TABLES = ['events', 'notifications', 'outbound_messages', 'csat_responses', 'attachments'] as const satisfies readonly store.TextTable[];
const WORKSPACE_TABLES = ['events', 'idempotency_keys', 'transcript_events', 'audit_log', 'event_delivery_attempts', 'notifications'] as const satisfies readonly store.TextTable[];

export const presentErasure = (j: CustomerJobRow) => ({
  id: j.id,
  customer_id: j.customer_id,
  state: j.state,
  created_at: iso(j.created_at),
  completed_at: j.completed_at ? iso(j.completed_at) : null,
});

export interface PrivacyDeps {
  db: Db;
  events: EventSink;
  audit: Pick<AuditService, 'record' | 'recordBySystem'>;
  queues: QueueHub;
  /** How many shards each intake queue has (the queues searched for the person's jobs). */
  queueShards: number;
  /** Deletes stored objects (the files domain's blob store). */
  deleteObject: (key: string) => Promise<void>;
  logger: Logger;
}

/**
 * Erasure of a person and redaction of one message (issue 38). The erasure runs as a job (a person's history can
 * be thousands of tickets): ticket batches, each one transaction, then one closing transaction that empties the
 * customer's row, so a retried job still knows what to look for until it is done. docs/decisions/customers.md.
 */
export function createPrivacyService(deps: PrivacyDeps) {
  const { db, logger } = deps;

  /** Text rows of a table erased of the terms; answers how many changed. */
  async function eraseRows(tx: Executor, tenantId: string, table: store.TextTable, terms: Term[], patterns: string[], ticketIds?: string[]) {
    const rows = await store.rowsMentioning(tx, tenantId, table, patterns, ticketIds);
    const shape = store.TEXT_TABLES[table];
    const isJson = shape.columns.map((c) => (shape.jsonb as readonly string[]).includes(c));
    const changed: store.TextRow[] = [];
    for (const r of rows) {
      const values = r.values.map((v, i) => (v === null ? v : isJson[i] ? JSON.stringify(eraseInJson(JSON.parse(v), terms)) : eraseTerms(v, terms)));
      if (values.some((v, i) => v !== r.values[i])) changed.push({ key: r.key, values });
    }
    await store.writeRows(tx, tenantId, table, changed);
    return changed.length;
  }

  /** One batch of the person's tickets: their messages emptied, their name and addresses erased from the rest. */
  async function eraseTicketBatch(tx: Executor, tenantId: string, customerId: string, after: string | null, terms: Term[], visitorIds: string[]) {
    const tickets = await store.lockTicketsOf(tx, tenantId, customerId, after, ERASE_BATCH_TICKETS);
    if (tickets.length === 0) return { ids: [] as string[], winners: [] as string[], objects: [] as string[] };
    const ids = tickets.map((t) => t.id);
    // Their tickets' events, and the copies a ticket merge made of them on a winner that is not theirs.
    const mine = new Set(ids);
    const merged = tickets.flatMap((t) => (t.merged_into_id && !mine.has(t.merged_into_id) ? [{ id: t.id, merged_into_id: t.merged_into_id }] : []));
    const events = [...(await store.eventsOfTickets(tx, tenantId, ids)), ...(await store.mergedCopies(tx, tenantId, merged))];
    const own = events.filter((e) => e.actor_type === 'customer');
    const rewritten = events.flatMap((e) => {
      const mine = e.actor_type === 'customer';
      const body = mine ? ERASED : eraseTerms(e.body, terms);
      const meta = mine ? eraseMessageMeta(e.meta, terms) : eraseInJson(e.meta, terms);
      const actorName = e.actor_name === null ? null : mine ? ERASED : eraseTerms(e.actor_name, terms);
      const changed = body !== e.body || JSON.stringify(meta) !== JSON.stringify(e.meta) || actorName !== e.actor_name;
      return changed || (mine && !e.redacted_at) ? [{ id: e.id, body, meta, actor_name: actorName, redacted: mine }] : [];
    });
    await store.writeEvents(tx, tenantId, rewritten);
    await store.writeTickets(
      tx,
      tenantId,
      tickets.map((t) => ({
        id: t.id,
        subject: eraseTerms(t.subject, terms),
        description: ERASED,
        metadata: eraseInJson(t.metadata, terms) as Record<string, unknown>,
        // A key naming the person's handle goes: their next message is a new person's, not a thread of this ticket.
        conversation_key: t.conversation_key !== null && mentions(t.conversation_key, terms) ? null : t.conversation_key,
      })),
    );
    const objects = await store.deleteFilesOf(tx, tenantId, { eventIds: own.map((e) => e.id), visitorIds });
    return { ids, winners: merged.map((m) => m.merged_into_id), objects };
  }

  /** Jobs still in Redis that name the person: queued ones lose the items naming them (or go, when nothing else is left), finished ones go. */
  async function eraseQueuedJobs(terms: Term[]): Promise<{ trimmed: number; removed: number }> {
    let trimmed = 0;
    let removed = 0;
    const names = (j: unknown) => mentions(JSON.stringify(j ?? null), terms);
    for (const name of queueNames(deps.queueShards)) {
      const queue = deps.queues.queue(name);
      for (const states of [WAITING_STATES, FINISHED_STATES]) {
        for (let start = 0; ; start += JOB_PAGE) {
          const jobs = await queue.getJobs([...states], start, start + JOB_PAGE - 1, true);
          if (jobs.length === 0) break;
          for (const job of jobs) {
            if (!job) continue;
            const finished = states === FINISHED_STATES;
            const inResult = finished && (names(job.returnvalue) || names(job.failedReason) || names(job.stacktrace));
            if (!names(job.data) && !inResult) continue;
            const items = (job.data as { items?: unknown[] } | null)?.items;
            if (!finished && Array.isArray(items) && items.some((i) => !names(i))) {
              await job.updateData({ ...(job.data as object), items: items.filter((i) => !names(i)) });
              trimmed += 1;
            } else {
              // A job that is only the person's (or finished) goes whole; one being run now cannot be removed.
              await job.remove().then(() => (removed += 1)).catch(() => undefined);
            }
          }
          if (jobs.length < JOB_PAGE) break;
        }
      }
    }
    return { trimmed, removed };
  }

  return {
    /**
     * POST /v1/customers/{id}/erase: the request, audited with who and why, and its job. A second request while
     * one is pending answers that one; a customer erased already answers its finished erasure.
     */
    async requestErasure(actor: Principal, customerId: string, reason: string) {
      const tenantId = actor.tenantId;
      const job = await db.transaction().execute(async (tx) => {
        const [c] = await customers.lockCustomers(tx, tenantId, [customerId]);
        if (!c) throw await missingCustomer(tx, tenantId, customerId);
        // The customer's row lock orders two requests: the second finds the first's erasure, pending or done.
        const pending = await store.latestErasure(tx, tenantId, customerId, c.erased_at ? 'done' : 'queued');
        if (pending) return pending;
        const row = await store.insertJob(tx, tenantId, {
          id: newId(),
          customer_id: customerId,
          kind: 'erase',
          reason,
          requested_by_user_id: actor.kind === 'user' ? actor.userId : null,
          requested_by_api_key_id: actor.apiKeyId,
        });
        await deps.audit.record(tx, actor, 'customer.erase_requested', { type: 'customer', id: customerId }, { erasure_id: row.id, reason });
        return row;
      });
      if (job.state === 'queued') await deps.queues.enqueue('customers.erase', { tenant_id: tenantId, erasure_id: job.id });
      return presentErasure(job);
    },

    /** The sweep: erasures queued in PostgreSQL for 15 minutes are queued in Redis again (at most 1,000 a run). */
    async requeueStale() {
      const stale = await store.crossTenantStaleErasures(db, new Date(Date.now() - STALE_ERASURE_MS), 1000);
      for (const s of stale) await deps.queues.enqueue('customers.erase', { tenant_id: s.tenant_id, erasure_id: s.id });
      if (stale.length > 0) logger.info({ requeued: stale.length }, 'customer erasures queued again');
      return { requeued: stale.length };
    },

    async getErasure(actor: Principal, customerId: string, id: string) {
      const job = await store.getJob(db, actor.tenantId, id);
      if (!job || job.kind !== 'erase' || job.customer_id !== customerId) throw notFound('erasure');
      return presentErasure(job);
    },

    /** The customers.erase job: idempotent (a done erasure does nothing; a stopped one resumes from its first ticket). */
    async runErasure(tenantId: string, erasureId: string) {
      const job = await store.getJob(db, tenantId, erasureId);
      if (!job || job.kind !== 'erase' || job.state === 'done') return { erased: false };
      const c = await customers.getCustomer(db, tenantId, job.customer_id);
      if (!c) return { erased: false };
      const handles = (await customers.handlesOf(db, tenantId, [c.id])).get(c.id)!;
      const terms = personTerms({ ...c, handles });
      // Parts of the name are erased only inside the person's own tickets (where agents greet them by first name);
      // elsewhere in the workspace another "Maya" is someone else, so only whole names, addresses and handles go.
      const exact = terms.filter((t) => !t.word);
      const patterns = likePatterns(terms);
      const exactPatterns = likePatterns(exact);
      const visitorIds = handles.filter((h) => h.kind === 'visitor_id').map((h) => h.handle);
      const objects: string[] = [];
      const tickets: string[] = [];
      const winners = new Set<string>();
      for (;;) {
        const batch = await db.transaction().execute((tx) => eraseTicketBatch(tx, tenantId, c.id, tickets.at(-1) ?? null, terms, visitorIds));
        objects.push(...batch.objects);
        if (batch.ids.length === 0) break;
        tickets.push(...batch.ids);
        for (const w of batch.winners) winners.add(w);
      }
      const erasedAt = await db.transaction().execute(async (tx) => {
        // The customer is locked against a merge or a change while its row is emptied; a second run of the job
        // (two workers, a retry) waits here and finds the erasure done: one announcement, one audit row.
        await customers.lockCustomers(tx, tenantId, [c.id]);
        if ((await store.getJob(tx, tenantId, erasureId))?.state === 'done') return null;
        // Rows of the person's tickets lose every term (one pass over each table, not one per batch: these tables
        // are not indexed by ticket); then the workspace's rows lose the exact ones.
        for (const table of PER_TICKET_TABLES) await eraseRows(tx, tenantId, table, terms, patterns, tickets);
        for (const table of WORKSPACE_TABLES) await eraseRows(tx, tenantId, table, exact, exactPatterns);
        await store.digestLedgerKeys(tx, tenantId, exactPatterns);
        objects.push(...(await store.dropExportFiles(tx, tenantId, c.id)));
        await store.scrubCustomer(tx, tenantId, c.id);
        await customers.reindexTicketsOf(tx, tenantId, c.id);
        // Another customer's tickets that hold merged copies of theirs: their documents held the copies' text.
        await customers.reindexTickets(tx, tenantId, [...winners]);
        const at = new Date();
        await deps.events.emit(tx, tenantId, [{ type: 'customer.erased', data: { id: c.id, erased_at: iso(at) } }]);
        await deps.audit.recordBySystem(tx, tenantId, 'customer.erased', { type: 'customer', id: c.id }, { erasure_id: erasureId });
        await store.finishJob(tx, tenantId, erasureId, eraseTerms(job.reason, terms));
        return at;
      });
      if (erasedAt === null) return { erased: false };
      for (const key of objects) await deps.deleteObject(key).catch((err: unknown) => logger.warn({ err_code: 'blob_not_deleted', cause: (err as Error)?.message }, 'erased file not deleted'));
      const queued = await eraseQueuedJobs(exact);
      logger.info({ erasure_id: erasureId, tickets: tickets.length, files_deleted: objects.length, jobs_trimmed: queued.trimmed, jobs_removed: queued.removed }, 'customer erased');
      return { erased: true, erased_at: iso(erasedAt) };
    },

    /**
     * POST /v1/tickets/{id}/events/{event_id}/redact: one message's text removed the same way (body, metadata,
     * files), and everywhere it was copied (the outbound events and notifications of its ticket, idempotent
     * replays of the workspace, the ticket's search document). Redacting a redacted event changes nothing.
     */
    async redact(actor: Principal, ticketId: string, eventId: string, reason: string | undefined) {
      const tenantId = actor.tenantId;
      const { objects, event } = await db.transaction().execute(async (tx) => {
        // The ticket first (as every ticket write locks it), then its event.
        const [ticket] = await store.lockTickets(tx, tenantId, [ticketId]);
        if (!ticket) throw notFound('ticket');
        const e = await store.lockEvent(tx, tenantId, ticketId, eventId);
        if (!e) throw notFound('event');
        if (!isMessageKind(e.kind)) throw refuse('event_not_redactable', `This event (${e.kind}) has no text of a message to redact; only messages and notes can be redacted.`);
        if (e.redacted_at) return { objects: [] as string[], event: e };
        // The message's text is the term: wherever it was copied whole, it goes.
        const literal: Term[] = e.body.trim().length >= 3 ? [{ text: asciiLower(e.body), word: false }] : [];
        await store.writeEvents(tx, tenantId, [{ id: e.id, body: ERASED, meta: eraseMessageMeta(e.meta, literal), actor_name: e.actor_name, redacted: true }]);
        const objects = await store.deleteFilesOf(tx, tenantId, { eventIds: [e.id], visitorIds: [] });
        const patterns = likePatterns(literal);
        for (const table of ['events', 'notifications', 'outbound_messages'] as const) await eraseRows(tx, tenantId, table, literal, patterns, [ticketId]);
        await eraseRows(tx, tenantId, 'idempotency_keys', literal, patterns);
        // The ticket's description is its first message's text: it goes with that message. Written either way,
        // so the ticket's version moves (a cached timeline of the old text is never served again).
        await store.writeTickets(tx, tenantId, [{ ...ticket, description: eraseTerms(ticket.description, literal), metadata: ticket.metadata }]);
        await customers.reindexTickets(tx, tenantId, [ticketId]);
        await deps.events.emit(tx, tenantId, [{ type: 'message.redacted', ticketId, data: { ticket_id: ticketId, event_id: eventId } }]);
        await deps.audit.record(tx, actor, 'ticket.event_redacted', { type: 'ticket', id: ticketId }, { event_id: eventId, ...(reason ? { reason } : {}) });
        return { objects, event: (await store.lockEvent(tx, tenantId, ticketId, eventId))! };
      });
      for (const key of objects) await deps.deleteObject(key).catch((err: unknown) => logger.warn({ err_code: 'blob_not_deleted', cause: (err as Error)?.message }, 'redacted file not deleted'));
      return { id: event.id, ticket_id: event.ticket_id, kind: event.kind, body: event.body, redacted_at: event.redacted_at ? iso(event.redacted_at) : null };
    },
  };
}

export type PrivacyService = ReturnType<typeof createPrivacyService>;
