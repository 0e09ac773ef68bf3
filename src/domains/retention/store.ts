import { sql } from 'kysely';
import type { Executor } from '../../db';
import { ERASED } from '../privacy/terms';

/*
 * Retention's SQL (issue 38): which tickets are due, how much is due (the dry run), and the erasure of one batch,
 * statement by statement, each set-based over the batch. docs/decisions/retention.md has the reasons.
 *
 * A ticket is due when it is solved or closed, its conversation not yet erased, and its resolution (solved_at; a
 * ticket closed without one, its last change) older than the cutoff. That is exactly the partial index
 * `tickets_retention_due` (0043): its predicate and key are written here as the index writes them, so the planner
 * matches them, and an erased ticket leaves the index.
 */

/** The due tickets of a workspace before `cutoff` (the partial index's predicate and key, spelt as the index spells them). */
const due = (tenantId: string, cutoff: Date) => sql`
  tickets.tenant_id = ${tenantId}::uuid AND tickets.status IN ('solved', 'closed') AND tickets.content_erased_at IS NULL
  AND coalesce(tickets.solved_at, tickets.updated_at) < ${cutoff}::timestamptz`;

/**
 * The events that carry the conversation: the opening message, customers' messages, replies and internal notes.
 * Status changes, assignments, deliveries and macro runs hold no one's words (and the reports read their meta).
 */
const MESSAGE = sql`(e.kind IN ('ticket_created', 'reply', 'internal_note') OR e.kind LIKE 'inbound\\_%')`;

/**
 * What a message event's meta keeps: ids and bookkeeping, none of the text. `via_merge` keeps a merge's copies out of
 * the reports (and web chat), `first_response`/`delivery`/`channel` say what the reply was, the provider's and the
 * email's message ids keep delivery receipts and mail threading working, `mailbox` says which mailbox polled it. The
 * subject an email came with, and a WhatsApp template's parameters, go; the template keeps its name and language.
 */
const META_KEPT = ['via_merge', 'first_response', 'delivery', 'channel', 'provider_message_id', 'message_id', 'sent_at', 'mailbox', 'files_expected', 'files_omitted'];
const keptMeta = sql`(
  SELECT coalesce(jsonb_object_agg(m.key, m.value), '{}'::jsonb) FROM jsonb_each(e.meta) AS m
  WHERE m.key = ANY(${META_KEPT}::text[])
) || CASE WHEN jsonb_typeof(e.meta->'template') = 'object'
  THEN jsonb_build_object('template', jsonb_strip_nulls(jsonb_build_object('name', e.meta->'template'->'name', 'language', e.meta->'template'->'language')))
  ELSE '{}'::jsonb END`;

// ---- the sweep ----

/**
 * The workspaces with retention set and at least one ticket due now: the tenants' rows (one per workspace) and one
 * probe of the partial index each. The sweep's one read across workspaces.
 */
export async function crossTenantRetentionDue(db: Executor): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`
    SELECT w.id FROM tenants w
    WHERE w.retention_days IS NOT NULL
      AND EXISTS (
        SELECT 1 FROM tickets
        WHERE tickets.tenant_id = w.id AND tickets.status IN ('solved', 'closed') AND tickets.content_erased_at IS NULL
          AND coalesce(tickets.solved_at, tickets.updated_at) < now() - make_interval(days => w.retention_days)
      )
    ORDER BY w.id`.execute(db);
  return rows.map((r) => r.id);
}

/** The workspace's setting, and the cutoff `days` (the setting unless given) make now, in database time; null when off. */
export async function cutoffOf(db: Executor, tenantId: string, days?: number): Promise<{ retention_days: number | null; days: number | null; cutoff: Date | null }> {
  const { rows } = await sql<{ retention_days: number | null; days: number | null; cutoff: Date | null }>`
    SELECT retention_days, coalesce(${days ?? null}::int, retention_days) AS days,
           now() - make_interval(days => coalesce(${days ?? null}::int, retention_days)) AS cutoff
    FROM tenants WHERE id = ${tenantId}`.execute(db);
  return rows[0] ?? { retention_days: null, days: null, cutoff: null };
}

// ---- the dry run ----

export interface DueCounts {
  tickets: number;
  events: number;
  attachments: number;
  bytes: number;
}

/**
 * What an erasure before `cutoff` would take now: the due tickets, their message events not yet redacted, their
 * files (rows, and the bytes the workspace's usage counts). Each count stops past `cap` rows (the tickets a range of
 * the partial index; events and files, an index probe per ticket), so a workspace with millions due is answered in
 * bounded time: `capped` says a count stopped.
 */
export async function countDue(db: Executor, tenantId: string, cutoff: Date, cap: number): Promise<DueCounts & { capped: boolean }> {
  const { rows } = await countStatement(tenantId, cutoff, cap).execute(db);
  const r = rows[0]!;
  const capped = r.tickets > cap || r.events > cap || r.attachments > cap;
  return { tickets: Math.min(r.tickets, cap), events: Math.min(r.events, cap), attachments: Math.min(r.attachments, cap), bytes: Number(r.bytes ?? 0), capped };
}

/** The dry run's statement (exported for the plan test: the due tickets are a range of the partial index). */
export const countStatement = (tenantId: string, cutoff: Date, cap: number) => sql<{ tickets: number; events: number; attachments: number; bytes: string | null }>`
  WITH due AS MATERIALIZED (
    SELECT tickets.id FROM tickets WHERE ${due(tenantId, cutoff)} LIMIT ${cap + 1}
  )
  SELECT
    (SELECT count(*) FROM due)::int AS tickets,
    (SELECT count(*) FROM (
      SELECT 1 FROM due JOIN ticket_events e ON e.tenant_id = ${tenantId}::uuid AND e.ticket_id = due.id
      WHERE e.redacted_at IS NULL AND ${MESSAGE} LIMIT ${cap + 1}) x)::int AS events,
    f.n::int AS attachments, f.bytes::text AS bytes
  FROM (
    SELECT count(*) AS n, sum(a.size) FILTER (WHERE a.state IN ('stored', 'infected')) AS bytes FROM (
      SELECT a.size, a.state FROM due JOIN attachments a ON a.tenant_id = ${tenantId}::uuid AND a.ticket_id = due.id LIMIT ${cap + 1}
    ) a
  ) f`;

// ---- one batch of the erasure (each in the batch's transaction) ----

export interface Claimed {
  id: string;
  /** The ticket's place in the index (its due time as text, microseconds kept): the next batch's keyset. */
  due_at: string;
  /** Subject and description already read '[erased]': an update to the same text moves no search trigger. */
  head_erased: boolean;
}

/**
 * The next due tickets after `after` in index order (due time, then id), locked; tickets another transaction holds
 * (a concurrent run, an agent's write) are skipped, never waited for. The lock re-checks the conditions on the row as
 * it now is, so a ticket reopened or erased meanwhile is not taken.
 */
export async function claimBatch(db: Executor, tenantId: string, q: ClaimQuery): Promise<Claimed[]> {
  return (await claimStatement(tenantId, q).execute(db)).rows;
}

export interface ClaimQuery {
  cutoff: Date;
  after: { due_at: string; id: string } | null;
  limit: number;
}

/** The batch's claim (exported for the plan test: a range of the partial index, in its order). */
export const claimStatement = (tenantId: string, q: ClaimQuery) => {
  const key = sql`coalesce(tickets.solved_at, tickets.updated_at)`;
  return sql<Claimed>`
    SELECT tickets.id, ${key}::text AS due_at, (tickets.subject = ${ERASED} AND tickets.description = ${ERASED}) AS head_erased
    FROM tickets
    WHERE ${due(tenantId, q.cutoff)}
      ${q.after ? sql`AND ${key} >= ${q.after.due_at}::timestamptz AND (${key}, tickets.id) > (${q.after.due_at}::timestamptz, ${q.after.id}::uuid)` : sql``}
    ORDER BY ${key}, tickets.id
    LIMIT ${q.limit}
    FOR UPDATE SKIP LOCKED`;
};

/**
 * The merged-away tickets whose conversations these tickets hold. A merge copies the source's events to the winner
 * and leaves the originals on the source (status merged, never changed again): erasing the winner's copies without
 * them would keep the conversation. They are found through the winners' `merged` events (a chain's copies included),
 * an index range per winner, and locked.
 */
export async function mergedSources(db: Executor, tenantId: string, ticketIds: string[]): Promise<string[]> {
  if (ticketIds.length === 0) return [];
  const { rows } = await sql<{ id: string }>`
    SELECT tickets.id FROM tickets
    WHERE tickets.tenant_id = ${tenantId}::uuid AND tickets.status = 'merged' AND tickets.content_erased_at IS NULL
      AND tickets.id IN (
        SELECT (e.meta->>'merged_from')::uuid FROM ticket_events e
        WHERE e.tenant_id = ${tenantId}::uuid AND e.ticket_id = ANY(${ticketIds}::uuid[]) AND e.kind = 'merged' AND e.meta ? 'merged_from'
      )
    ORDER BY tickets.id
    FOR UPDATE SKIP LOCKED`.execute(db);
  return rows.map((r) => r.id);
}

/**
 * The message events of these tickets not yet redacted: the body '[erased]', the meta only its ids and bookkeeping,
 * `redacted_at` now. Answers how many there were for each group of tickets (the due ones and the merged-away ones).
 */
export async function eraseMessages(db: Executor, tenantId: string, ticketIds: string[]): Promise<Map<string, number>> {
  if (ticketIds.length === 0) return new Map();
  const { rows } = await sql<{ ticket_id: string; n: number }>`
    WITH erased AS (
      UPDATE ticket_events e SET body = ${ERASED}, meta = ${keptMeta}, redacted_at = now()
      WHERE e.tenant_id = ${tenantId}::uuid AND e.ticket_id = ANY(${ticketIds}::uuid[]) AND e.redacted_at IS NULL AND ${MESSAGE}
      RETURNING e.ticket_id
    )
    SELECT ticket_id, count(*)::int AS n FROM erased GROUP BY ticket_id`.execute(db);
  return new Map(rows.map((r) => [r.ticket_id, r.n]));
}

/**
 * Subject and description '[erased]', `content_erased_at` now: nothing else. `updated_at`, the status, the timings
 * and the counts stay, so the reports and the SLA history are what they were; the version trigger moves the ETag on.
 * The search trigger rebuilds the document of each ticket whose text changed (from the events, already erased).
 */
export async function eraseTickets(db: Executor, tenantId: string, ticketIds: string[]): Promise<number> {
  if (ticketIds.length === 0) return 0;
  const r = await sql`
    UPDATE tickets SET subject = ${ERASED}, description = ${ERASED}, content_erased_at = now()
    WHERE tenant_id = ${tenantId}::uuid AND id = ANY(${ticketIds}::uuid[]) AND content_erased_at IS NULL`.execute(db);
  return Number(r.numAffectedRows ?? 0);
}

/**
 * The other copies of the conversation's text kept per ticket: notifications (their body is the ticket's subject),
 * satisfaction comments, todo titles, and WhatsApp template parameters on the outbox rows (found by the message
 * events' ids: the outbox's key). Each table is read by ticket (the indexes 0043 added for notifications and CSAT).
 */
export async function eraseCopies(db: Executor, tenantId: string, ticketIds: string[]): Promise<void> {
  if (ticketIds.length === 0) return;
  await sql`
    UPDATE notifications SET body = ${ERASED}
    WHERE tenant_id = ${tenantId}::uuid AND ticket_id = ANY(${ticketIds}::uuid[]) AND body <> ${ERASED}`.execute(db);
  await sql`
    UPDATE csat_responses SET comment = ''
    WHERE tenant_id = ${tenantId}::uuid AND ticket_id = ANY(${ticketIds}::uuid[]) AND comment <> ''`.execute(db);
  await sql`
    UPDATE todos SET title = ${ERASED}
    WHERE tenant_id = ${tenantId}::uuid AND ticket_id = ANY(${ticketIds}::uuid[]) AND title <> ${ERASED}`.execute(db);
  await sql`
    UPDATE outbound_messages o
    SET template = jsonb_strip_nulls(jsonb_build_object('name', o.template->'name', 'language', o.template->'language'))
    FROM ticket_events e
    WHERE e.tenant_id = ${tenantId}::uuid AND e.ticket_id = ANY(${ticketIds}::uuid[]) AND e.kind = 'reply'
      AND o.tenant_id = e.tenant_id AND o.event_id = e.id
      AND jsonb_typeof(o.template) = 'object' AND o.template - 'name' - 'language' <> '{}'::jsonb`.execute(db);
}

/**
 * The files of these tickets: their rows deleted (the usage trigger takes their bytes off the workspace's count, as
 * for every other removal), their storage keys answered so the bytes are deleted once the batch commits.
 */
export async function deleteFiles(db: Executor, tenantId: string, ticketIds: string[]): Promise<{ storage_key: string; bytes: number }[]> {
  if (ticketIds.length === 0) return [];
  const { rows } = await sql<{ storage_key: string; bytes: string }>`
    DELETE FROM attachments
    WHERE tenant_id = ${tenantId}::uuid AND ticket_id = ANY(${ticketIds}::uuid[])
    RETURNING storage_key, (CASE WHEN state IN ('stored', 'infected') THEN size ELSE 0 END)::text AS bytes`.execute(db);
  return rows.map((r) => ({ storage_key: r.storage_key, bytes: Number(r.bytes) }));
}
