import { sql } from 'kysely';
import type { Executor } from '../../db';
import { pageKey } from '../../db/keyset';
import type { CustomerJobRow } from '../../db/types';

/*
 * The SQL of customer exports (issue 38, access request): the customer_jobs rows of kind 'export', and the reads the
 * export job makes of everything held on one person, each a keyset page so that a person with thousands of tickets
 * is read in bounded batches. Every read takes the workspace second; the two sweeps cross workspaces and say so.
 */

// ------------------------------------------------------------------------------------------------ the jobs

export async function insertExport(
  db: Executor,
  tenantId: string,
  row: { id: string; customer_id: string; reason: string; requested_by_user_id: string | null; requested_by_api_key_id: string | null },
): Promise<CustomerJobRow> {
  return db
    .insertInto('customer_jobs')
    .values({ ...row, tenant_id: tenantId, kind: 'export' })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function getExport(db: Executor, tenantId: string, id: string): Promise<CustomerJobRow | undefined> {
  return db.selectFrom('customer_jobs').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).where('kind', '=', 'export').executeTakeFirst();
}

/** The export done with its file, only while still queued (a second run that got here first wins; answers false then). */
export async function finishExport(db: Executor, tenantId: string, id: string, done: { file_key: string; file_bytes: number; expires_at: Date }): Promise<boolean> {
  const row = await db
    .updateTable('customer_jobs')
    .set({ ...done, state: 'done', completed_at: new Date(), error: null })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .where('kind', '=', 'export')
    .where('state', '=', 'queued')
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * The customer row locked against an erasure or a merge while an export is finished (FOR SHARE: an erasure's final
 * transaction locks it FOR UPDATE first, so one of the two waits for the other's commit), with when it was erased;
 * undefined when the row is gone (merged away, deleted).
 */
export async function lockCustomer(db: Executor, tenantId: string, customerId: string): Promise<{ erased_at: Date | null } | undefined> {
  const { rows } = await sql<{ erased_at: Date | null }>`
    SELECT erased_at FROM customers WHERE tenant_id = ${tenantId} AND id = ${customerId} FOR SHARE`.execute(db);
  return rows[0];
}

/** The export failed for good, with why (only while still queued). */
export async function failExport(db: Executor, tenantId: string, id: string, error: string): Promise<boolean> {
  const row = await db
    .updateTable('customer_jobs')
    .set({ state: 'failed', error, completed_at: new Date() })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .where('kind', '=', 'export')
    .where('state', '=', 'queued')
    .returning('id')
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Up to `limit` exports past their expiry that still hold a file, across workspaces: their file key cleared (so the
 * orphan sweep no longer keeps the object either) and answered, for the caller to delete the objects. One statement
 * over the customer_jobs_expiring partial index; rows another sweep holds are skipped.
 */
export async function crossTenantExpiredExports(db: Executor, limit: number): Promise<{ tenant_id: string; id: string; customer_id: string; file_key: string }[]> {
  const { rows } = await sql<{ tenant_id: string; id: string; customer_id: string; file_key: string }>`
    WITH due AS (
      SELECT tenant_id, id, file_key FROM customer_jobs
      WHERE file_key IS NOT NULL AND expires_at < now()
      ORDER BY expires_at
      LIMIT ${limit}
      FOR UPDATE SKIP LOCKED
    )
    UPDATE customer_jobs j SET file_key = NULL
    FROM due
    WHERE j.tenant_id = due.tenant_id AND j.id = due.id
    RETURNING j.tenant_id, j.id, j.customer_id, due.file_key`.execute(db);
  return rows;
}

/**
 * Exports still queued that were asked for before `before`, across workspaces, oldest first: a job the request could
 * not queue (Redis away after the commit, a process killed between the two) is queued again by the sweep.
 */
export async function crossTenantStaleExports(db: Executor, before: Date, limit: number): Promise<{ tenant_id: string; id: string }[]> {
  const { rows } = await sql<{ tenant_id: string; id: string }>`
    SELECT tenant_id, id FROM customer_jobs
    WHERE kind = 'export' AND state = 'queued' AND created_at < ${before}
    ORDER BY created_at
    LIMIT ${limit}`.execute(db);
  return rows;
}

// ------------------------------------------------------------------------------------------------ the person

export interface TicketRow {
  id: string;
  subject: string;
  description: string;
  status: string;
  priority: string;
  source: string;
  created_at: Date;
  updated_at: Date;
  solved_at: Date | null;
  merged_into_id: string | null;
}

/** A page of the customer's tickets, by id (v7: oldest first), past `afterId`. */
export async function ticketsPage(db: Executor, tenantId: string, customerId: string, afterId: string | null, limit: number): Promise<TicketRow[]> {
  let q = db
    .selectFrom('tickets')
    .select(['id', 'subject', 'description', 'status', 'priority', 'source', 'created_at', 'updated_at', 'solved_at', 'merged_into_id'])
    .where('tenant_id', '=', tenantId)
    .where('customer_id', '=', customerId);
  if (afterId !== null) q = q.where('id', '>', afterId);
  return q.orderBy('id').limit(limit).execute();
}

export interface EventRow {
  id: string;
  ticket_id: string;
  kind: string;
  body: string;
  actor_type: string;
  actor_name: string | null;
  created_at: Date;
  redacted_at: Date | null;
  /** The page key: created_at as exact text (microseconds), and the sequence. */
  at_key: string;
  seq: string;
}

export interface EventCursor {
  ticket_id: string;
  at_key: string;
  seq: string;
}

/**
 * A page of the events the customer can see on some of their tickets, in (ticket, time, sequence) order, past
 * `after`: every event but an internal note (kind `internal_note`, never shown to a customer on any channel) and
 * the copies a ticket merge made (`meta.via_merge`: each message is read once, on the ticket it was written on, as
 * the web chat visitor's timeline reads it).
 */
export async function visibleEventsPage(db: Executor, tenantId: string, ticketIds: string[], after: EventCursor | null, limit: number): Promise<EventRow[]> {
  if (ticketIds.length === 0) return [];
  const past = after ? sql`AND (e.ticket_id, e.created_at, e.seq) > (${after.ticket_id}::uuid, ${after.at_key}::timestamptz, ${after.seq}::bigint)` : sql``;
  const { rows } = await sql<EventRow>`
    SELECT e.id, e.ticket_id, e.kind, e.body, e.actor_type, e.actor_name, e.created_at, e.redacted_at,
           ${pageKey({ key: 'e.created_at', kind: 'timestamp', direction: 'asc' })} AS at_key, e.seq::text AS seq
    FROM ticket_events e
    WHERE e.tenant_id = ${tenantId} AND e.ticket_id = ANY(${ticketIds}::uuid[])
      AND e.kind <> 'internal_note' AND e.meta->'via_merge' IS NULL
      ${past}
    ORDER BY e.ticket_id, e.created_at, e.seq
    LIMIT ${limit}`.execute(db);
  return rows;
}

export interface FileRow {
  id: string;
  event_id: string;
  name: string;
  content_type: string;
  size: number;
}

/** The stored files of some events that are not a note's (internal), by event, oldest first. */
export async function visibleFilesOf(db: Executor, tenantId: string, eventIds: string[]): Promise<FileRow[]> {
  if (eventIds.length === 0) return [];
  const { rows } = await sql<FileRow>`
    SELECT id, event_id, name, content_type, size
    FROM attachments
    WHERE tenant_id = ${tenantId} AND event_id = ANY(${eventIds}::uuid[]) AND NOT internal AND state = 'stored'
    ORDER BY event_id, created_at, id`.execute(db);
  return rows;
}

export interface CsatRow {
  id: string;
  ticket_id: string;
  score: number;
  comment: string;
  created_at: Date;
  at_key: string;
}

/**
 * A page of the CSAT answers on the customer's tickets, oldest first, past `after` (created_at as exact text, id): a
 * walk of the workspace's csat_window index joined to the ticket by its key, continued page by page.
 */
export async function csatPage(db: Executor, tenantId: string, customerId: string, after: { at_key: string; id: string } | null, limit: number): Promise<CsatRow[]> {
  const past = after ? sql`AND (c.created_at, c.id) > (${after.at_key}::timestamptz, ${after.id}::uuid)` : sql``;
  const { rows } = await sql<CsatRow>`
    SELECT c.id, c.ticket_id, c.score, c.comment, c.created_at, ${pageKey({ key: 'c.created_at', kind: 'timestamp', direction: 'asc' })} AS at_key
    FROM csat_responses c
    JOIN tickets t ON t.tenant_id = c.tenant_id AND t.id = c.ticket_id
    WHERE c.tenant_id = ${tenantId} AND t.customer_id = ${customerId} ${past}
    ORDER BY c.created_at, c.id
    LIMIT ${limit}`.execute(db);
  return rows;
}

export interface IntakeRow {
  channel: string;
  provider_message_id: string;
  ticket_id: string | null;
  first_seen_at: Date;
  last_seen_at: Date;
  duplicate_count: number;
  seq: string;
}

/** A page of the channel deliveries that came from the customer (ingest_deliveries), in arrival order, past `afterSeq`. */
export async function intakePage(db: Executor, tenantId: string, customerId: string, afterSeq: string | null, limit: number): Promise<IntakeRow[]> {
  const past = afterSeq !== null ? sql`AND seq > ${afterSeq}::bigint` : sql``;
  const { rows } = await sql<IntakeRow>`
    SELECT channel, provider_message_id, ticket_id, first_seen_at, last_seen_at, duplicate_count, seq::text AS seq
    FROM ingest_deliveries
    WHERE tenant_id = ${tenantId} AND customer_id = ${customerId} ${past}
    ORDER BY seq
    LIMIT ${limit}`.execute(db);
  return rows;
}

export interface TranscriptEventRow {
  id: string;
  transcript_id: string;
  external_ticket_id: string;
  provider_event_id: string | null;
  type: string;
  occurred_at: Date | null;
  status: string | null;
  subject: string | null;
  priority: string | null;
  requester: string;
  received_at: Date;
  seq: string;
}

/**
 * A page of the helpdesk webhook transcript events whose requester is one of `requesters` (compared lower-cased:
 * an address's case means nothing), with their transcript's external ticket id, in (transcript, sequence) order past
 * `after`: a walk of the transcript_events_order index, continued page by page.
 */
export async function transcriptEventsPage(
  db: Executor,
  tenantId: string,
  requesters: string[],
  after: { transcript_id: string; seq: string } | null,
  limit: number,
): Promise<TranscriptEventRow[]> {
  if (requesters.length === 0) return [];
  const past = after ? sql`AND (e.transcript_id, e.seq) > (${after.transcript_id}::uuid, ${after.seq}::bigint)` : sql``;
  const { rows } = await sql<TranscriptEventRow>`
    SELECT e.id, e.transcript_id, t.external_ticket_id, e.provider_event_id, e.type, e.occurred_at, e.status, e.subject, e.priority,
           e.requester, e.received_at, e.seq::text AS seq
    FROM transcript_events e
    JOIN transcripts t ON t.tenant_id = e.tenant_id AND t.id = e.transcript_id
    WHERE e.tenant_id = ${tenantId} AND lower(e.requester) = ANY(${requesters.map((r) => r.toLowerCase())}::text[]) ${past}
    ORDER BY e.transcript_id, e.seq
    LIMIT ${limit}`.execute(db);
  return rows;
}
