import { sql } from 'kysely';
import type { Executor } from '../../db';
import type { CustomerJobRow } from '../../db/types';
import { ERASED } from './terms';

/*
 * The erasure's and redaction's SQL (issue 38). Rows are read, their text erased in code (literal terms, see
 * terms.ts) and written back by id with one UPDATE … FROM unnest per table and batch, never a statement per row.
 */

export interface EventText {
  id: string;
  ticket_id: string;
  kind: string;
  actor_type: string;
  body: string;
  meta: Record<string, unknown>;
  actor_name: string | null;
  redacted_at: Date | null;
}

export interface TicketText {
  id: string;
  subject: string;
  description: string;
  metadata: Record<string, unknown>;
  /** What threads a channel's next message into this ticket (the channel and the person's handle). */
  conversation_key: string | null;
  /** The winner, when the ticket was merged: it holds copies of this ticket's events (meta.via_merge). */
  merged_into_id?: string | null;
}

/** The next `limit` tickets of a customer past `after` (by id), locked for the batch's transaction. */
export async function lockTicketsOf(db: Executor, tenantId: string, customerId: string, after: string | null, limit: number): Promise<TicketText[]> {
  const { rows } = await sql<TicketText>`
    SELECT id, subject, description, metadata, conversation_key, merged_into_id FROM tickets
    WHERE tenant_id = ${tenantId} AND customer_id = ${customerId} ${after ? sql`AND id > ${after}` : sql``}
    ORDER BY id LIMIT ${limit} FOR UPDATE`.execute(db);
  return rows;
}

export async function eventsOfTickets(db: Executor, tenantId: string, ticketIds: string[]): Promise<EventText[]> {
  if (ticketIds.length === 0) return [];
  const { rows } = await sql<EventText>`
    SELECT id, ticket_id, kind, actor_type, body, meta, actor_name, redacted_at FROM ticket_events
    WHERE tenant_id = ${tenantId} AND ticket_id = ANY(${ticketIds}::uuid[])`.execute(db);
  return rows;
}

/** Tickets' text, locked (a redaction). */
export async function lockTickets(db: Executor, tenantId: string, ids: string[]): Promise<TicketText[]> {
  const { rows } = await sql<TicketText>`
    SELECT id, subject, description, metadata, conversation_key FROM tickets WHERE tenant_id = ${tenantId} AND id = ANY(${ids}::uuid[]) ORDER BY id FOR UPDATE`.execute(db);
  return rows;
}

/** One event of a ticket, locked (a redaction). */
export async function lockEvent(db: Executor, tenantId: string, ticketId: string, eventId: string): Promise<EventText | undefined> {
  const { rows } = await sql<EventText>`
    SELECT id, ticket_id, kind, actor_type, body, meta, actor_name, redacted_at FROM ticket_events
    WHERE tenant_id = ${tenantId} AND ticket_id = ${ticketId} AND id = ${eventId} FOR UPDATE`.execute(db);
  return rows[0];
}

/** Events' text written back; `redacted` ones are marked redacted now. */
export async function writeEvents(db: Executor, tenantId: string, rows: { id: string; body: string; meta: unknown; actor_name: string | null; redacted: boolean }[]): Promise<void> {
  if (rows.length === 0) return;
  await sql`
    UPDATE ticket_events e SET body = u.body, meta = u.meta, actor_name = u.actor_name,
      redacted_at = CASE WHEN u.redacted THEN coalesce(e.redacted_at, now()) ELSE e.redacted_at END
    FROM unnest(${rows.map((r) => r.id)}::uuid[], ${rows.map((r) => r.body)}::text[], ${rows.map((r) => JSON.stringify(r.meta))}::jsonb[],
                ${rows.map((r) => r.actor_name)}::text[], ${rows.map((r) => r.redacted)}::boolean[]) AS u(id, body, meta, actor_name, redacted)
    WHERE e.tenant_id = ${tenantId} AND e.id = u.id`.execute(db);
}

/** The copies a merge made of these tickets' events on their winners (meta.via_merge names the source ticket). */
export async function mergedCopies(db: Executor, tenantId: string, sources: { id: string; merged_into_id: string }[]): Promise<EventText[]> {
  if (sources.length === 0) return [];
  const { rows } = await sql<EventText>`
    SELECT e.id, e.ticket_id, e.kind, e.actor_type, e.body, e.meta, e.actor_name, e.redacted_at
    FROM unnest(${sources.map((s) => s.merged_into_id)}::uuid[], ${sources.map((s) => s.id)}::text[]) AS m(winner, source)
    JOIN ticket_events e ON e.tenant_id = ${tenantId} AND e.ticket_id = m.winner AND e.meta->>'via_merge' = m.source`.execute(db);
  return rows;
}

/** Tickets' text written back (the version trigger moves each ticket's version: cached timelines are not reused). */
export async function writeTickets(db: Executor, tenantId: string, rows: TicketText[]): Promise<void> {
  if (rows.length === 0) return;
  await sql`
    UPDATE tickets t SET subject = u.subject, description = u.description, metadata = u.metadata, conversation_key = u.conversation_key
    FROM unnest(${rows.map((r) => r.id)}::uuid[], ${rows.map((r) => r.subject)}::text[], ${rows.map((r) => r.description)}::text[],
                ${rows.map((r) => JSON.stringify(r.metadata))}::jsonb[], ${rows.map((r) => r.conversation_key)}::text[]) AS u(id, subject, description, metadata, conversation_key)
    WHERE t.tenant_id = ${tenantId} AND t.id = u.id`.execute(db);
}

/**
 * The person's files on these tickets, deleted (the usage trigger gives the bytes back): those bound to their
 * own events and those a web-chat visitor of theirs uploaded. Answers the stored objects to delete after commit.
 */
export async function deleteFilesOf(db: Executor, tenantId: string, q: { eventIds: string[]; visitorIds: string[] }): Promise<string[]> {
  if (q.eventIds.length === 0 && q.visitorIds.length === 0) return [];
  const { rows } = await sql<{ storage_key: string }>`
    DELETE FROM attachments
    WHERE tenant_id = ${tenantId} AND (event_id = ANY(${q.eventIds}::uuid[]) OR uploaded_by_visitor = ANY(${q.visitorIds}::text[]))
    RETURNING storage_key`.execute(db);
  return rows.map((r) => r.storage_key).filter((k) => k !== '');
}

/** A table's text columns, as the erasure reads and writes them: every row of the workspace LIKE one of the patterns. */
export interface TextRow {
  key: string[];
  values: (string | null)[];
}

/**
 * Where a person can be named outside their tickets' rows, table by table: the key that finds a row again and
 * the text columns (jsonb read and written as text). Read with the workspace's rows LIKE any term; written back
 * by key. These tables are bounded by their prunes (events, idempotency records, delivery attempts) or small per
 * person (transcripts of one requester, the audit of one request).
 */
export const TEXT_TABLES = {
  events: { key: ['id'], columns: ['data'], jsonb: ['data'] },
  idempotency_keys: { key: ['scope', 'key'], columns: ['response_body'], jsonb: [] },
  transcript_events: { key: ['id'], columns: ['requester', 'subject', 'raw'], jsonb: ['raw'] },
  notifications: { key: ['id'], columns: ['body', 'meta'], jsonb: ['meta'] },
  audit_log: { key: ['id'], columns: ['details'], jsonb: ['details'] },
  event_delivery_attempts: { key: ['id'], columns: ['error'], jsonb: [] },
  outbound_messages: { key: ['event_id'], columns: ['recipient', 'parts', 'template', 'last_error'], jsonb: ['parts', 'template'] },
  csat_responses: { key: ['id'], columns: ['comment'], jsonb: [] },
  attachments: { key: ['id'], columns: ['name'], jsonb: [] },
} as const;
export type TextTable = keyof typeof TEXT_TABLES;

const shapeOf = (table: TextTable) => TEXT_TABLES[table];

/** The workspace's rows of `table` (of these tickets, when given; the table must have ticket_id) whose text columns contain one of the LIKE patterns (case-insensitive). */
export async function rowsMentioning(db: Executor, tenantId: string, table: TextTable, patterns: string[], ticketIds?: string[]): Promise<TextRow[]> {
  if (patterns.length === 0) return [];
  const shape = shapeOf(table);
  const text = (c: string) => sql.raw((shape.jsonb as readonly string[]).includes(c) ? `"${c}"::text` : `"${c}"`);
  const cols = shape.columns.map(text);
  const keys = shape.key.map((k) => sql.raw(`"${k}"::text`));
  const { rows } = await sql<{ k: string[]; v: (string | null)[] }>`
    SELECT ARRAY[${sql.join(keys)}] AS k, ARRAY[${sql.join(cols)}] AS v FROM ${sql.table(table)}
    WHERE tenant_id = ${tenantId} ${ticketIds ? sql`AND ticket_id = ANY(${ticketIds}::uuid[])` : sql``}
      AND (${sql.join(cols.map((c) => sql`${c} ILIKE ANY(${patterns}::text[])`), sql` OR `)})`.execute(db);
  return rows.map((r) => ({ key: r.k, values: r.v }));
}

/** Rows of `table` written back by key (the text columns in TEXT_TABLES order). */
export async function writeRows(db: Executor, tenantId: string, table: TextTable, rows: TextRow[]): Promise<void> {
  if (rows.length === 0) return;
  const shape = shapeOf(table);
  const set = shape.columns.map((c, i) => sql.raw(`"${c}" = (u.v)[${i + 1}]${(shape.jsonb as readonly string[]).includes(c) ? '::jsonb' : ''}`));
  const match = shape.key.map((k, i) => sql.raw(`t."${k}"::text = (u.k)[${i + 1}]`));
  // Arrays of arrays cannot be unnested into rows of arrays: each row's key and values travel as JSON text.
  await sql`
    UPDATE ${sql.table(table)} t SET ${sql.join(set)}
    FROM (SELECT ARRAY(SELECT jsonb_array_elements_text(r->'k')) AS k, ARRAY(SELECT jsonb_array_elements_text(r->'v')) AS v
          FROM jsonb_array_elements(${JSON.stringify(rows.map((r) => ({ k: r.key, v: r.values })))}::jsonb) AS r) u
    WHERE t.tenant_id = ${tenantId} AND ${sql.join(match, sql` AND `)}`.execute(db);
}

/**
 * Intake ledger keys naming the person (a provider's message id can hold a chat or phone id): replaced by a
 * digest of themselves, so the ledger keeps one row per message and a redelivery of the same id still matches.
 */
export async function digestLedgerKeys(db: Executor, tenantId: string, patterns: string[]): Promise<number> {
  if (patterns.length === 0) return 0;
  const digest = sql.raw(`'erased:' || encode(sha256(convert_to(provider_message_id, 'UTF8')), 'hex')`);
  const a = await sql`UPDATE ingest_deliveries SET provider_message_id = ${digest}
    WHERE tenant_id = ${tenantId} AND provider_message_id ILIKE ANY(${patterns}::text[])`.execute(db);
  const b = await sql`UPDATE ingest_duplicate_copies SET provider_message_id = ${digest}
    WHERE tenant_id = ${tenantId} AND provider_message_id ILIKE ANY(${patterns}::text[])`.execute(db);
  return Number(a.numAffectedRows ?? 0n) + Number(b.numAffectedRows ?? 0n);
}

/** The customer's row emptied (it keeps its id and timestamps, so tickets keep their customer) and its handles removed. */
export async function scrubCustomer(db: Executor, tenantId: string, customerId: string): Promise<void> {
  await sql`DELETE FROM customer_handles WHERE tenant_id = ${tenantId} AND customer_id = ${customerId}`.execute(db);
  await sql`
    UPDATE customers SET display_name = ${ERASED}, email = '', phone = '', notes = '', locale = '', time_zone = '', company = '',
      country = '', metadata = '{}'::jsonb, erased_at = coalesce(erased_at, now()), updated_at = now()
    WHERE tenant_id = ${tenantId} AND id = ${customerId}`.execute(db);
}

/** Export files made of the person: their objects, to delete after commit; the jobs keep that they ran. */
export async function dropExportFiles(db: Executor, tenantId: string, customerId: string): Promise<string[]> {
  const { rows } = await sql<{ file_key: string }>`
    UPDATE customer_jobs j SET file_key = NULL, expires_at = NULL
    FROM (SELECT id, file_key FROM customer_jobs WHERE tenant_id = ${tenantId} AND customer_id = ${customerId} AND file_key IS NOT NULL FOR UPDATE) old
    WHERE j.tenant_id = ${tenantId} AND j.id = old.id
    RETURNING old.file_key`.execute(db);
  return rows.map((r) => r.file_key);
}

export async function insertJob(db: Executor, tenantId: string, job: { id: string; customer_id: string; kind: 'erase'; reason: string; requested_by_user_id: string | null; requested_by_api_key_id: string | null }): Promise<CustomerJobRow> {
  return db.insertInto('customer_jobs').values({ ...job, tenant_id: tenantId }).returningAll().executeTakeFirstOrThrow();
}

export async function getJob(db: Executor, tenantId: string, id: string): Promise<CustomerJobRow | undefined> {
  return db.selectFrom('customer_jobs').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
}

/** The customer's latest erasure in this state, if any (a second request joins a pending one, or answers the done one). */
export async function latestErasure(db: Executor, tenantId: string, customerId: string, state: 'queued' | 'done'): Promise<CustomerJobRow | undefined> {
  return db
    .selectFrom('customer_jobs')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('customer_id', '=', customerId)
    .where('kind', '=', 'erase')
    .where('state', '=', state)
    .orderBy('created_at', 'desc')
    .limit(1)
    .executeTakeFirst();
}

export async function finishJob(db: Executor, tenantId: string, id: string, reason: string): Promise<void> {
  await db.updateTable('customer_jobs').set({ state: 'done', completed_at: new Date(), reason }).where('tenant_id', '=', tenantId).where('id', '=', id).execute();
}

/**
 * Erasures still queued that were asked for before `before`, across workspaces, oldest first: their job may never
 * have reached Redis. Queuing one again is harmless (the job id is the erasure's; the erasure is idempotent).
 */
export async function crossTenantStaleErasures(db: Executor, before: Date, limit: number): Promise<{ tenant_id: string; id: string }[]> {
  const { rows } = await sql<{ tenant_id: string; id: string }>`
    SELECT tenant_id, id FROM customer_jobs WHERE kind = 'erase' AND state = 'queued' AND created_at < ${before}
    ORDER BY created_at LIMIT ${limit}`.execute(db);
  return rows;
}
