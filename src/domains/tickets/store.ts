import { sql, type Compilable, type RawBuilder, type SelectQueryBuilder } from 'kysely';
import type { Executor } from '../../db';
import type { Database, NewTicket, NewTicketEvent, TicketEventRow, TicketRow } from '../../db/types';
import { SLA_LIVE } from './status';
import type { TicketFilters, TicketTimeSort } from './schemas';
import { pageKey, pastCursor, type Keyset } from '../../db/keyset';
import type { Cursor } from '../../lib/paging';
import { named, prepared, preparedShapes } from '../../db/prepared';
import type { AttachmentSummary } from '../files/types';

/** Rows come back in the order given (RETURNING's order is not promised, so they are matched by id). */
export async function insertTickets(db: Executor, tenantId: string, ts: (Omit<NewTicket, 'tenant_id'> & { id: string })[]): Promise<TicketRow[]> {
  const rows = await db.insertInto('tickets').values(ts.map((t) => ({ ...t, tenant_id: tenantId }))).returningAll().execute();
  const byId = new Map(rows.map((r) => [r.id, r]));
  return ts.map((t) => byId.get(t.id)!);
}

/** A customer wrote: the tickets count as updated now, and their latest customer message is now (the event's own time). */
export async function touchTickets(db: Executor, tenantId: string, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await db.updateTable('tickets').set({ updated_at: sql`now()`, last_customer_message_at: sql`now()` }).where('tenant_id', '=', tenantId).where('id', 'in', ids).execute();
}

/** The tickets' timelines changed without their rows: their versions (ETags) move on, updated_at does not. */
export async function bumpVersions(db: Executor, tenantId: string, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  // The row trigger adds one to version on any update. Only a non-key column is written: updating a key column
  // would take FOR UPDATE and deadlock with the FOR KEY SHARE that inserts referencing the ticket hold.
  await db.updateTable('tickets').set({ version: sql`version` } as never).where('tenant_id', '=', tenantId).where('id', 'in', ids).execute();
}

export async function getTicket(db: Executor, tenantId: string, id: string): Promise<TicketRow | undefined> {
  return db.selectFrom('tickets').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
}

/** Row locks taken in id order, so two transactions locking the same pair can never deadlock or interleave. */
export async function lockTickets(db: Executor, tenantId: string, ids: string[]): Promise<TicketRow[]> {
  if (ids.length === 0) return [];
  if (ids.length === 1) return lockOne(db, tenantId, ids[0]!);
  return db
    .selectFrom('tickets')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', 'in', ids)
    .orderBy('id')
    .forUpdate()
    .execute();
}

// Every write on one ticket locks it first: compiled once (src/db/prepared.ts).
const lockOne = prepared(2, (db: Executor, tenantId: string, id: string) =>
  db.selectFrom('tickets').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).forUpdate(),
);

export type TicketUpdate = Partial<
  Pick<
    TicketRow,
    | 'status'
    | 'priority'
    | 'assignee_id'
    | 'team_id'
    | 'tags'
    | 'first_response_due'
    | 'resolution_due'
    | 'first_response_breached_at'
    | 'resolution_breached_at'
    | 'first_responded_at'
    | 'solved_at'
    | 'reopened_at'
    | 'merged_into_id'
    | 'status_entered_at'
    | 'last_customer_message_at'
    | 'last_agent_reply_at'
    | 'next_reply_due'
    | 'next_reply_from'
    | 'next_reply_breached_at'
    | 'resolution_paused_at'
    | 'resolution_remaining_minutes'
    | 'resolution_resumed_at'
    | 'resolution_elapsed_minutes'
    | 'content_erased_at'
  >
> & { metadataPatch?: Record<string, unknown> };

/** The columns an UPDATE of one ticket sets; the metadata merge patch already JSON text. */
type UpdateColumns = Omit<TicketUpdate, 'metadataPatch'> & { metadata_patch_json?: string };

const columnsOf = ({ metadataPatch, ...columns }: TicketUpdate): UpdateColumns =>
  metadataPatch ? { ...columns, metadata_patch_json: JSON.stringify(metadataPatch) } : columns;

/** The UPDATE of one ticket (updated_at moves; the row trigger moves the version). */
function updateOne(db: Executor, tenantId: string, id: string, update: UpdateColumns) {
  const { metadata_patch_json: metadataJson, ...columns } = update;
  return db
    .updateTable('tickets')
    .set({
      ...columns,
      // JSON merge patch in SQL: keys sent are set, keys sent as null are removed, the rest are kept.
      ...(metadataJson !== undefined ? { metadata: sql`jsonb_strip_nulls(metadata || ${metadataJson}::jsonb)` as unknown as string } : {}),
      updated_at: sql`now()`,
    })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id);
}

export async function updateTicket(db: Executor, tenantId: string, id: string, patch: TicketUpdate): Promise<void> {
  await updateOne(db, tenantId, id, columnsOf(patch)).execute();
}

/**
 * The UPDATE and the detail row after it, in one statement: the update is a data-modifying CTE named like
 * the table, and the detail's joins read the customer, assignee, team and work totals beside it (none of
 * which it changes). The write's answer and its outbound events then need no read of their own.
 */
export async function updateTicketDetail(db: Executor, tenantId: string, id: string, patch: TicketUpdate): Promise<TicketDetailRow | undefined> {
  return (await updateWithDetail(db, columnsOf(patch), tenantId, id))[0];
}

// Every write on one ticket runs this: compiled once per set of columns written (src/db/prepared.ts).
const updateWithDetail = preparedShapes<[string, string], UpdateColumns, TicketDetailRow>(2, (db: Executor, columns: UpdateColumns, tenantId: string, id: string) => {
  const updated = db.with('t', () => updateOne(db, tenantId, id, columns).returningAll()).selectFrom('t');
  return withDetail(updated as unknown as DetailBase, tenantId) as unknown as Compilable<TicketDetailRow>;
});

export interface TicketDetailRow extends TicketRow {
  customer_name: string;
  customer_email: string;
  assignee_name: string | null;
  assignee_email: string | null;
  team_name: string | null;
  /** The work logged on it and its todos, counted in the same statement (one snapshot, one round trip). */
  time_total: number;
  time_billable: number;
  todos_open: number;
  todos_done: number;
  todos_overdue: number;
}

/** One timeline event as the detail read returns it: already JSON, its time already ISO 8601 in UTC. */
export interface TimelineEventJson {
  id: string;
  kind: string;
  body: string;
  meta: Record<string, unknown>;
  actor_type: string;
  actor_user_id: string | null;
  actor_name: string | null;
  created_at: string;
  /** The event's files (issue 34), only on events that have any. */
  attachments?: AttachmentSummary[];
}

/** Where a detail read starts: the tickets table, or the rows an UPDATE just returned, named `t` either way. */
type DetailBase = SelectQueryBuilder<Database & { t: Database['tickets'] }, 't', object>;

/** The detail rows' statement: the ticket, its customer, assignee and team, and its work totals. */
const detailQuery = (db: Executor, tenantId: string) => withDetail(db.selectFrom('tickets as t') as unknown as DetailBase, tenantId);

function withDetail(base: DetailBase, tenantId: string) {
  return base
    .innerJoin('customers as c', (j) => j.onRef('c.tenant_id', '=', 't.tenant_id').onRef('c.id', '=', 't.customer_id'))
    .leftJoin('users as u', 'u.id', 't.assignee_id')
    .leftJoin('teams as tm', (j) => j.onRef('tm.tenant_id', '=', 't.tenant_id').onRef('tm.id', '=', 't.team_id'))
    .innerJoinLateral(
      (eb) =>
        eb
          .selectFrom('time_entries as te')
          .select([sql<number>`coalesce(sum(te.minutes), 0)::int`.as('time_total'), sql<number>`coalesce(sum(te.minutes) filter (where te.billable), 0)::int`.as('time_billable')])
          .whereRef('te.tenant_id', '=', 't.tenant_id')
          .whereRef('te.ticket_id', '=', 't.id')
          .as('w'),
      (j) => j.onTrue(),
    )
    .innerJoinLateral(
      (eb) =>
        eb
          .selectFrom('todos as td')
          .select([
            sql<number>`count(*) filter (where td.done_at is null)::int`.as('todos_open'),
            sql<number>`count(*) filter (where td.done_at is not null)::int`.as('todos_done'),
            sql<number>`count(*) filter (where td.done_at is null and td.due_at < now())::int`.as('todos_overdue'),
          ])
          .whereRef('td.tenant_id', '=', 't.tenant_id')
          .whereRef('td.ticket_id', '=', 't.id')
          .as('k'),
      (j) => j.onTrue(),
    )
    .selectAll('t')
    .select(['c.display_name as customer_name', 'c.email as customer_email', 'u.name as assignee_name', 'u.email as assignee_email', 'tm.name as team_name'])
    .select(['w.time_total', 'w.time_billable', 'k.todos_open', 'k.todos_done', 'k.todos_overdue'])
    .where('t.tenant_id', '=', tenantId);
}

/** Several tickets' detail rows in one statement (a write's answer, the outbound events of an ingest batch). */
export async function getTicketDetails(db: Executor, tenantId: string, ids: string[]): Promise<TicketDetailRow[]> {
  if (ids.length === 0) return [];
  return detailQuery(db, tenantId).where('t.id', 'in', ids).execute();
}

/**
 * The ticket with its whole timeline in one statement: one snapshot without a transaction, one round trip
 * whatever the timeline's length. Times are formatted as the rest of the API writes them (ISO 8601, UTC,
 * milliseconds; PostgreSQL's microseconds truncated, as the driver's dates truncate them).
 *
 * `unlessVersion`: the version whose timeline the caller already holds (-1 for none). When the ticket is still
 * at it, `events` comes back null and the timeline is not read: a ticket's events only ever change with its
 * version (they are append-only, and every append updates the row, whose trigger bumps the version), and both
 * are decided in this one snapshot.
 */
export async function getTicketWithTimeline(
  db: Executor,
  tenantId: string,
  id: string,
  unlessVersion: string | number = -1,
): Promise<(TicketDetailRow & { events: TimelineEventJson[] | null }) | undefined> {
  return (await ticketWithTimeline(db, tenantId, id, unlessVersion))[0];
}

/** One event of a timeline as JSON (times as the API writes them: ISO 8601, UTC, milliseconds). */
const eventJson = (more: RawBuilder<unknown>) => sql`json_build_object(
  'id', e.id, 'kind', e.kind, 'body', e.body, 'meta', e.meta, 'actor_type', e.actor_type,
  'actor_user_id', e.actor_user_id, 'actor_name', e.actor_name,
  'created_at', to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')${more}
)`;
/** One file as the timeline lists it on its event. */
const fileJson = sql`jsonb_build_object('id', a.id, 'name', a.name, 'content_type', a.content_type, 'size', a.size, 'sha256', a.sha256, 'state', a.state)`;

// Every GET of a ticket runs this: compiled once (src/db/prepared.ts).
// The ticket's files (issue 34) are read in the same statement: one range scan of their (tenant, ticket) index,
// grouped by event and joined to the events by hash, so a timeline of 5,000 events costs one lookup, not 5,000.
const ticketWithTimeline = prepared(3, (db: Executor, tenantId: string, id: string, unlessVersion: string | number) =>
  detailQuery(db, tenantId)
    .select(
      sql<TimelineEventJson[] | null>`CASE WHEN t.version = ${unlessVersion}::bigint THEN NULL ELSE (
        SELECT coalesce(json_agg(CASE WHEN f.files IS NULL THEN ${eventJson(sql``)} ELSE ${eventJson(sql`, 'attachments', f.files`)} END
          ORDER BY e.created_at, e.seq), '[]'::json)
        FROM ticket_events e
        LEFT JOIN (
          SELECT a.event_id, jsonb_agg(${fileJson} ORDER BY a.created_at, a.id) AS files
          FROM attachments a WHERE a.tenant_id = t.tenant_id AND a.ticket_id = t.id AND a.event_id IS NOT NULL
          GROUP BY a.event_id
        ) f ON f.event_id = e.id
        WHERE e.tenant_id = t.tenant_id AND e.ticket_id = t.id) END`.as('events'),
    )
    .where('t.id', '=', id),
);

/** Some events of one ticket, by id, in timeline order (a replayed write's answer names the events it appended). */
export async function eventsByIds(db: Executor, tenantId: string, ticketId: string, ids: string[]): Promise<(TicketEventRow & { attachments: AttachmentSummary[] | null })[]> {
  if (ids.length === 0) return [];
  return db
    .selectFrom('ticket_events as e')
    .selectAll('e')
    .select(
      sql<AttachmentSummary[] | null>`(SELECT jsonb_agg(${fileJson} ORDER BY a.created_at, a.id) FROM attachments a WHERE a.tenant_id = e.tenant_id AND a.event_id = e.id)`.as('attachments'),
    )
    .where('e.tenant_id', '=', tenantId)
    .where('e.ticket_id', '=', ticketId)
    .where('e.id', 'in', ids)
    .orderBy('e.created_at')
    .orderBy('e.seq')
    .execute();
}

export async function listEvents(db: Executor, tenantId: string, ticketId: string): Promise<TicketEventRow[]> {
  return db
    .selectFrom('ticket_events')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('ticket_id', '=', ticketId)
    .orderBy('created_at')
    .orderBy('seq')
    .execute();
}

/** The rows as written (their created_at and seq are the database's). */
export async function insertEvents(db: Executor, tenantId: string, events: Omit<NewTicketEvent, 'tenant_id'>[]): Promise<TicketEventRow[]> {
  if (events.length === 0) return [];
  if (events.length === 1) return insertOneEvent(db, events[0]!, tenantId);
  // A write of several events; one named shape per row count and columns given.
  return named(db, db.insertInto('ticket_events').values(events.map((e) => ({ ...e, tenant_id: tenantId }))).returningAll(), { rows: events.length });
}

// Most writes on a ticket insert one event: compiled once per set of columns given (src/db/prepared.ts).
const insertOneEvent = preparedShapes<[string], Omit<NewTicketEvent, 'tenant_id'>, TicketEventRow>(1, (db: Executor, event, tenantId: string) =>
  db.insertInto('ticket_events').values({ ...event, tenant_id: tenantId }).returningAll(),
);

/** An assignee or team filter: any of the ids, or (`none`) no one at all. */
const heldBy = (column: 'assignee_id' | 'team_id', values: string[]) => {
  const ids = values.filter((v) => v !== 'none');
  const none = ids.length < values.length;
  return sql<boolean>`(${ids.length > 0 ? sql`${sql.ref(column)} IN (${sql.join(ids)})` : sql`false`} OR ${none ? sql`${sql.ref(column)} IS NULL` : sql`false`})`;
};

function applyFilters<O>(q: SelectQueryBuilder<Database, 'tickets', O>, f: TicketFilters) {
  if (f.status) q = q.where('status', 'in', f.status as TicketRow['status'][]);
  if (f.priority) q = q.where('priority', 'in', f.priority);
  if (f.assignee_id) q = q.where(heldBy('assignee_id', f.assignee_id));
  if (f.team_id) q = q.where(heldBy('team_id', f.team_id));
  if (f.customer_id) q = q.where('customer_id', 'in', f.customer_id);
  if (f.tag) q = q.where(sql<boolean>`tags @> ARRAY[${f.tag}]::text[]`);
  if (f.source) q = q.where('source', 'in', f.source);
  if (f.sla_breached !== undefined) q = q.where('sla_breached', '=', f.sla_breached);
  if (f.created_after) q = q.where('created_at', '>=', new Date(f.created_after));
  if (f.created_before) q = q.where('created_at', '<', new Date(f.created_before));
  if (f.updated_after) q = q.where('updated_at', '>=', new Date(f.updated_after));
  if (f.updated_before) q = q.where('updated_at', '<', new Date(f.updated_before));
  return q;
}

/**
 * The workspace's tickets passing the list filters, as a statement to build on (a search, issue 36, adds its
 * match, order and page). Columns are filtered by bare names, so the statement may join a table that has none
 * of them (ticket_search).
 */
export function filteredTickets(db: Executor, tenantId: string, f: TicketFilters) {
  return applyFilters(db.selectFrom('tickets').selectAll('tickets').where('tickets.tenant_id', '=', tenantId), f);
}

/** The keyset a time order of the list pages by (the plain list's, and a search's when not by relevance). */
export const timeKeyset = (sort: TicketTimeSort): Keyset => ({
  key: sort.endsWith('updated_at') ? 'updated_at' : 'created_at',
  tie: 'id',
  kind: 'timestamp',
  direction: sort.startsWith('-') ? 'desc' : 'asc',
});

/** One page of tickets in `sort` order, read with one extra row (src/lib/paging.ts says why). */
export async function listTickets(db: Executor, tenantId: string, f: TicketFilters, page: { limit: number; sort: TicketTimeSort; after?: Cursor }) {
  const keyset = timeKeyset(page.sort);
  let q = db.selectFrom('tickets').selectAll().select(pageKey(keyset).as('page_key')).where('tenant_id', '=', tenantId);
  if (page.after) q = q.where(pastCursor(keyset, page.after));
  return applyFilters(q, f)
    .orderBy(sql.ref(keyset.key), keyset.direction)
    .orderBy('id', keyset.direction)
    .limit(page.limit + 1)
    .execute();
}

export type BreachTarget = 'first_response' | 'resolution' | 'next_reply';

/** Each target's due time, what meets it (the next reply's due is cleared when met), and its breach mark. */
const TARGET_COLUMNS = {
  first_response: ['first_response_due', 'first_responded_at', 'first_response_breached_at'],
  resolution: ['resolution_due', 'solved_at', 'resolution_breached_at'],
  next_reply: ['next_reply_due', null, 'next_reply_breached_at'],
} as const;

/**
 * Marks overdue targets as breached, once each: the WHERE clause re-checks everything at run time, so a stale
 * or repeated job finds nothing, and concurrent runs serialise on the row lock and see the first one's write.
 * A paused resolution clock (issue 37) is not running, so it is never overdue.
 */
export async function markBreaches(
  db: Executor,
  tenantId: string,
  target: BreachTarget,
  ticketId?: string,
): Promise<{ id: string; due: Date }[]> {
  const [dueCol, doneCol, breachCol] = TARGET_COLUMNS[target];
  let q = db
    .updateTable('tickets')
    .set({ [breachCol]: sql`now()`, updated_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('status', 'in', SLA_LIVE)
    .where(breachCol, 'is', null)
    .where(dueCol, '<=', sql<Date>`now()`);
  if (doneCol) q = q.where(doneCol, 'is', null);
  if (target === 'resolution') q = q.where('resolution_paused_at', 'is', null);
  if (ticketId) q = q.where('id', '=', ticketId);
  const rows = await q.returning(['id', `${dueCol} as due`]).execute();
  return rows as { id: string; due: Date }[];
}

/**
 * The workspaces with a target due and not yet marked, in one range scan of each target's partial index
 * (0026): the sweep then checks only those. A cross-workspace read by design (it backs up lost timers), and
 * rare: once a minute, and it returns what is overdue, not what is open.
 */
export async function crossTenantWithBreachesDue(db: Executor): Promise<string[]> {
  const { rows } = await sql<{ tenant_id: string }>`
    SELECT tenant_id FROM tickets
      WHERE status IN (${sql.join(SLA_LIVE)}) AND first_responded_at IS NULL AND first_response_breached_at IS NULL
        AND first_response_due <= now()
    UNION
    SELECT tenant_id FROM tickets
      WHERE status IN (${sql.join(SLA_LIVE)}) AND solved_at IS NULL AND resolution_breached_at IS NULL AND resolution_paused_at IS NULL
        AND resolution_due <= now()
    UNION
    SELECT tenant_id FROM tickets
      WHERE status IN (${sql.join(SLA_LIVE)}) AND next_reply_due IS NOT NULL AND next_reply_breached_at IS NULL
        AND next_reply_due <= now()`.execute(db);
  return rows.map((r) => r.tenant_id);
}

// ------------------------------------------------------------------------------- business-time clocks (issue 37)

/** The columns a ticket's due times are computed from (src/domains/tickets/sla.ts, `recomputedDues`). */
const BASIS = [
  'id',
  'priority',
  'created_at',
  'reopened_at',
  'first_responded_at',
  'first_response_breached_at',
  'first_response_due',
  'solved_at',
  'resolution_breached_at',
  'resolution_due',
  'resolution_paused_at',
  'resolution_resumed_at',
  'resolution_elapsed_minutes',
  'next_reply_from',
  'next_reply_due',
  'next_reply_breached_at',
] as const;
export type DueBasis = Pick<TicketRow, (typeof BASIS)[number]>;

/** A ticket's new due times, with the row they were computed from (the rewrite re-checks it). */
export interface DueRewrite {
  was: DueBasis;
  first_response_due: Date;
  resolution_due: Date;
  next_reply_due: Date | null;
}

/** One batch of a policy's open tickets, by id after `after`, read without a lock (from tickets_sla_policy_open). */
export async function openTicketsOfPolicy(db: Executor, tenantId: string, policyId: string, after: string | null, limit: number): Promise<DueBasis[]> {
  let q = db
    .selectFrom('tickets')
    .select(BASIS)
    .where('tenant_id', '=', tenantId)
    .where('sla_policy_id', '=', policyId)
    .where('status', 'in', SLA_LIVE);
  if (after) q = q.where('id', '>', after);
  return q.orderBy('id').limit(limit).execute();
}

/** A time as the rewrite compares it: to the millisecond, as the row was read. */
const ms = (column: string) => sql.raw(`date_trunc('milliseconds', t.${column})`);
const sameTime = (column: string, value: string) => sql`${ms(column)} IS NOT DISTINCT FROM ${sql.raw(value)}`;

/**
 * Writes a batch of recomputed due times in one statement (`UPDATE … FROM (VALUES …)`), each row only while it is
 * as it was read: still open, same priority and clock (its due times, pause, restart and next-reply start, its met
 * and breached marks). A row changed meanwhile was written by a transaction that computed its own due times on the
 * schedule as it stood, and is skipped. `updated_at` stays: nobody changed the ticket; its version moves (the
 * trigger), as its due times did. Returns how many rows were written.
 */
export async function rewriteDueTimes(db: Executor, tenantId: string, rows: DueRewrite[]): Promise<number> {
  if (rows.length === 0) return 0;
  const values = sql.join(
    [...rows]
      .sort((a, b) => (a.was.id < b.was.id ? -1 : 1))
      .map(
        (r) => sql`(${r.was.id}::uuid, ${r.first_response_due}::timestamptz, ${r.resolution_due}::timestamptz, ${r.next_reply_due}::timestamptz,
          ${r.was.priority}::text, ${r.was.first_response_due}::timestamptz, ${r.was.resolution_due}::timestamptz, ${r.was.next_reply_due}::timestamptz,
          ${r.was.reopened_at}::timestamptz, ${r.was.resolution_resumed_at}::timestamptz, ${r.was.next_reply_from}::timestamptz,
          ${r.was.resolution_paused_at !== null}::boolean, ${r.was.first_responded_at !== null || r.was.first_response_breached_at !== null}::boolean,
          ${r.was.resolution_breached_at !== null}::boolean, ${r.was.next_reply_breached_at !== null}::boolean)`,
      ),
  );
  const result = await sql`
    UPDATE tickets t SET first_response_due = v.frd, resolution_due = v.rd, next_reply_due = v.nrd
    FROM (VALUES ${values}) AS v(id, frd, rd, nrd, priority, frd0, rd0, nrd0, reopened0, resumed0, nrfrom0, paused0, first_done0, rbreached0, nrbreached0)
    WHERE t.tenant_id = ${tenantId} AND t.id = v.id
      AND t.status IN (${sql.join(SLA_LIVE)}) AND t.solved_at IS NULL AND t.priority = v.priority
      AND ${sameTime('first_response_due', 'v.frd0')} AND ${sameTime('resolution_due', 'v.rd0')} AND ${sameTime('next_reply_due', 'v.nrd0')}
      AND ${sameTime('reopened_at', 'v.reopened0')} AND ${sameTime('resolution_resumed_at', 'v.resumed0')} AND ${sameTime('next_reply_from', 'v.nrfrom0')}
      AND (t.resolution_paused_at IS NOT NULL) = v.paused0
      AND (t.first_responded_at IS NOT NULL OR t.first_response_breached_at IS NOT NULL) = v.first_done0
      AND (t.resolution_breached_at IS NOT NULL) = v.rbreached0 AND (t.next_reply_breached_at IS NOT NULL) = v.nrbreached0`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}

/** Next-reply clocks started by a customer's message: each ticket that owes none yet gets its due time (one statement). */
export async function startNextReplies(db: Executor, tenantId: string, starts: { id: string; due: Date }[], at: Date): Promise<void> {
  if (starts.length === 0) return;
  const values = sql.join(starts.map((s) => sql`(${s.id}::uuid, ${s.due}::timestamptz)`));
  await sql`
    UPDATE tickets t SET next_reply_due = v.due, next_reply_from = ${at}::timestamptz, next_reply_breached_at = NULL
    FROM (VALUES ${values}) AS v(id, due)
    WHERE t.tenant_id = ${tenantId} AND t.id = v.id AND t.next_reply_due IS NULL`.execute(db);
}

/** Whether one ticket passes a filter set, with exactly the list's semantics (macro trigger conditions). */
export async function matchesFilters(db: Executor, tenantId: string, ticketId: string, f: TicketFilters): Promise<boolean> {
  const q = db.selectFrom('tickets').select('id').where('tenant_id', '=', tenantId).where('id', '=', ticketId);
  return (await applyFilters(q, f).executeTakeFirst()) !== undefined;
}

// ------------------------------------------------------------------------------- threading (ticket rule)

/** Message-ID → ticket, newest first (a Message-ID may be remembered once per ticket it reached). */
export async function ticketsByMessageIds(db: Executor, tenantId: string, ids: string[]): Promise<{ message_id: string; ticket_id: string }[]> {
  if (ids.length === 0) return [];
  return db
    .selectFrom('email_message_ids')
    .select(['message_id', 'ticket_id'])
    .where('tenant_id', '=', tenantId)
    .where('message_id', 'in', ids)
    .orderBy('created_at', 'desc')
    .execute();
}

export async function rememberMessageIds(db: Executor, tenantId: string, pairs: { message_id: string; ticket_id: string }[]): Promise<void> {
  if (pairs.length === 0) return;
  await db
    .insertInto('email_message_ids')
    .values(pairs.map((p) => ({ tenant_id: tenantId, ...p })))
    .onConflict((oc) => oc.columns(['tenant_id', 'message_id']).doNothing())
    .execute();
}

export const conversationId = (source: string, key: string) => `${source}|${key}`;

/**
 * Each conversation's latest ticket that is still in play (not closed or spam) and was active within the
 * window. A merged one is returned too: the caller forwards it to its winner.
 */
export async function openConversationTickets(
  db: Executor,
  tenantId: string,
  conversations: { source: string; key: string }[],
  windowHours: number,
): Promise<Map<string, string>> {
  if (conversations.length === 0) return new Map();
  // One index probe per conversation (LATERAL … LIMIT 1), never a scan of the workspace's tickets.
  const { rows } = await sql<{ source: string; conversation_key: string; id: string }>`
    select u.source, u.key as conversation_key, t.id
    from unnest(${conversations.map((c) => c.source)}::text[], ${conversations.map((c) => c.key)}::text[]) as u(source, key)
    cross join lateral (
      select id from tickets t
      where t.tenant_id = ${tenantId} and t.source = u.source and t.conversation_key = u.key
        and t.status not in ('closed', 'spam')
        and t.updated_at > now() - make_interval(hours => ${windowHours})
      order by t.updated_at desc
      limit 1
    ) as t`.execute(db);
  return new Map(rows.map((r) => [conversationId(r.source, r.conversation_key), r.id]));
}
