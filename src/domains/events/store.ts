import type { Executor } from '../../db';
import { named, preparedShapes } from '../../db/prepared';
import { pageKey, pastCursor, type Keyset } from '../../db/keyset';
import type { Cursor } from '../../lib/paging';

export interface EventInsert {
  id: string;
  type: string;
  ticket_id: string | null;
  data: string;
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

const LOG_PAGES: Keyset = { key: 'position', kind: 'sequence', direction: 'asc' };

/**
 * The log in commit order, one keyset page past the cursor, read with one extra row. Rows of transactions
 * still running are invisible, and a commit only ever adds positions above every visible one.
 */
export async function listEvents(db: Executor, tenantId: string, page: { limit: number; after?: Cursor; types?: string[] }) {
  let q = db
    .selectFrom('events')
    .select(['id', 'type', 'occurred_at', 'tenant_id', 'data', 'ticket_id', 'position'])
    .select(pageKey(LOG_PAGES).as('page_key'))
    .where('tenant_id', '=', tenantId)
    .where('position', 'is not', null);
  if (page.types) q = q.where('type', 'in', page.types);
  if (page.after) q = q.where(pastCursor(LOG_PAGES, page.after));
  return q.orderBy('position').limit(page.limit + 1).execute();
}

/** The log position of one event (where a stream resumes after it); undefined when unknown or pruned. */
export async function positionOf(db: Executor, tenantId: string, id: string): Promise<string | undefined> {
  const row = await db.selectFrom('events').select('position').where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
  return row?.position == null ? undefined : String(row.position);
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
