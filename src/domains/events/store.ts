import { sql } from 'kysely';
import type { Executor } from '../../db';
import { named, preparedShapes } from '../../db/prepared';

export interface EventInsert {
  id: string;
  type: string;
  ticket_id: string | null;
  data: string;
  data_bytes: number;
}

/** Inserted in the caller's transaction; `position` is set at its commit (the deferred trigger of 0023). */
export async function insertEvents(db: Executor, tenantId: string, events: EventInsert[]): Promise<void> {
  if (events.length === 0) return;
  if (events.length === 1) {
    await insertOne(db, events[0]!, tenantId);
    return;
  }
  // Several at once; one named shape per row count and columns given.
  await named(db, db.insertInto('events').values(events.map((e) => ({ ...e, tenant_id: tenantId }))), { rows: events.length });
}

// Every write that changes a ticket inserts one: compiled once per set of columns given (src/db/prepared.ts).
const insertOne = preparedShapes<[string], EventInsert, unknown>(1, (db: Executor, event, tenantId: string) => db.insertInto('events').values({ ...event, tenant_id: tenantId }));

/** One event of the log as the readers get it; `data` is null when the event was too large to be read whole. */
export interface LogRow {
  id: string;
  type: string;
  occurred_at: Date;
  tenant_id: string;
  ticket_id: string | null;
  /** The log position as exact text (where a reader resumes after this event). */
  page_key: string;
  bytes: number;
  data: unknown;
}

export interface LogRead {
  limit: number;
  /** Past this log position (exclusive). */
  after?: string;
  types?: string[];
  /**
   * The page ends once its events hold this many bytes (the first event is always in it, whatever its size).
   * An event over `wholeBytes` counts as a reference to it.
   */
  maxBytes: number;
  /** Events larger than this come back without `data` (null): the reader sends a reference instead. */
  wholeBytes: number;
  /** Leave out the integration id (the webhook URL's secret) of transcript events: the reader is not an admin. */
  hideIntegrationIds: boolean;
  /** `data` as JSON text (PostgreSQL's rendering), for a reader that only passes it on. */
  asText?: boolean;
}

/** What a reference to a large event counts for in a page's byte budget. */
const REFERENCE_BYTES = 256;

/**
 * One page of the log in commit order past a position, cut by count and by bytes. The sizes are read from the
 * rows (`data_bytes`, written at insert) so that events cut off the page, and events larger than `wholeBytes`,
 * are never read, parsed or held: a viewer's large messages cannot make a reader hold megabytes. Rows of
 * transactions still running are invisible, and a commit only ever adds positions above every visible one.
 * `more`: events past this page exist now (the extra row read, or the byte cut).
 */
export async function readLog(db: Executor, tenantId: string, r: LogRead): Promise<{ rows: LogRow[]; more: boolean }> {
  const after = r.after === undefined ? sql`` : sql`and position > ${r.after}::bigint`;
  const types = r.types === undefined ? sql`` : sql`and type = any(${r.types}::text[])`;
  const { rows } = await sql<LogRow & { n: string }>`
    with page as (
      select id, position, coalesce(data_bytes, octet_length(data::text)) as bytes
      from events
      where tenant_id = ${tenantId} and position is not null ${after} ${types}
      order by position
      limit ${r.limit + 1}
    ), cut as (
      select id, position, bytes,
        sum(case when bytes <= ${r.wholeBytes} then bytes else ${REFERENCE_BYTES} end) over (order by position) as running,
        row_number() over (order by position) as rn,
        count(*) over () as n
      from page
    )
    select e.id, e.type, e.occurred_at, e.tenant_id, e.ticket_id, c.position::text as page_key, c.bytes::int as bytes, c.n,
      case when c.bytes <= ${r.wholeBytes} then
        (case when ${r.hideIntegrationIds} and e.type = 'transcript.event_recorded' then e.data - 'integration_id' else e.data end)${sql.raw(r.asText ? '::text' : '')}
      end as data
    from cut c
    join events e on e.tenant_id = ${tenantId} and e.id = c.id
    where c.rn = 1 or c.running <= ${r.maxBytes}
    order by c.position`.execute(db);
  const shown = rows.slice(0, r.limit);
  const read = rows.length === 0 ? 0 : Number(rows[0]!.n);
  return { rows: shown.map(({ n: _n, ...row }) => row), more: read > shown.length };
}

/** One event by id, as the log shows it to this reader; undefined when unknown, pruned or not yet committed. */
export async function getEvent(db: Executor, tenantId: string, id: string, hideIntegrationIds: boolean): Promise<LogRow | undefined> {
  const { rows } = await sql<LogRow>`
    select id, type, occurred_at, tenant_id, ticket_id, position::text as page_key, coalesce(data_bytes, octet_length(data::text)) as bytes,
      case when ${hideIntegrationIds} and type = 'transcript.event_recorded' then data - 'integration_id' else data end as data
    from events where tenant_id = ${tenantId} and id = ${id} and position is not null`.execute(db);
  return rows[0];
}

/** The log position of one event (where a reader resumes after it); undefined when unknown or pruned. */
export async function positionOf(db: Executor, tenantId: string, id: string): Promise<string | undefined> {
  const row = await db.selectFrom('events').select('position').where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
  return row?.position == null ? undefined : String(row.position);
}

/**
 * The last committed log position of each of these workspaces (null: nothing logged): what the live streams
 * of an API process compare with, one statement per poll however many streams are open. One index probe
 * (the end of `events_log`) per workspace.
 */
export async function crossTenantHeads(db: Executor, tenantIds: string[]): Promise<Map<string, string | null>> {
  const { rows } = await sql<{ tenant_id: string; head: string | null }>`
    select t.id as tenant_id,
      (select max(e.position)::text from events e where e.tenant_id = t.id and e.position is not null) as head
    from unnest(${tenantIds}::uuid[]) as t(id)`.execute(db);
  return new Map(rows.map((r) => [r.tenant_id, r.head]));
}

/** Retention: events older than the window, one workspace at a time. */
export async function deleteOlderThan(db: Executor, tenantId: string, days: number): Promise<number> {
  const r = await db
    .deleteFrom('events')
    .where('tenant_id', '=', tenantId)
    .where('occurred_at', '<', new Date(Date.now() - days * 86_400_000))
    .executeTakeFirst();
  return Number(r.numDeletedRows);
}
