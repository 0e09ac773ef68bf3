import type { Executor } from '../../db';
import { pageKey, pastCursor, type Keyset } from '../../db/keyset';
import type { Cursor } from '../../lib/paging';
import type { CsatResponseRow, TimeEntryRow, TodoRow } from '../../db/types';

export async function insertTimeEntry(db: Executor, tenantId: string, e: Omit<TimeEntryRow, 'tenant_id' | 'created_at'>): Promise<TimeEntryRow> {
  return db.insertInto('time_entries').values({ ...e, tenant_id: tenantId }).returningAll().executeTakeFirstOrThrow();
}

export async function lockTimeEntry(db: Executor, tenantId: string, id: string): Promise<TimeEntryRow | undefined> {
  return db.selectFrom('time_entries').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).forUpdate().executeTakeFirst();
}

export async function updateTimeEntry(db: Executor, tenantId: string, id: string, patch: Partial<Pick<TimeEntryRow, 'minutes' | 'billable' | 'user_id' | 'worked_on'>>) {
  return db.updateTable('time_entries').set(patch).where('tenant_id', '=', tenantId).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

export async function deleteTimeEntry(db: Executor, tenantId: string, id: string): Promise<void> {
  await db.deleteFrom('time_entries').where('tenant_id', '=', tenantId).where('id', '=', id).execute();
}

const ENTRY_PAGES: Keyset = { key: 'created_at', tie: 'id', kind: 'timestamp', direction: 'asc' };

/** Oldest first, one keyset page (src/lib/paging.ts), read with one extra row. */
export async function listTimeEntries(db: Executor, tenantId: string, ticketId: string, page: { limit: number; after?: Cursor }) {
  let q = db.selectFrom('time_entries').selectAll().select(pageKey(ENTRY_PAGES).as('page_key')).where('tenant_id', '=', tenantId).where('ticket_id', '=', ticketId);
  if (page.after) q = q.where(pastCursor(ENTRY_PAGES, page.after));
  return q.orderBy('created_at').orderBy('id').limit(page.limit + 1).execute();
}

export async function insertTodo(db: Executor, tenantId: string, t: Omit<TodoRow, 'tenant_id' | 'created_at' | 'done_at'>): Promise<TodoRow> {
  return db.insertInto('todos').values({ ...t, tenant_id: tenantId }).returningAll().executeTakeFirstOrThrow();
}

export async function updateTodo(db: Executor, tenantId: string, id: string, patch: Partial<Pick<TodoRow, 'title' | 'assignee_id' | 'due_at' | 'done_at'>>) {
  return db.updateTable('todos').set(patch).where('tenant_id', '=', tenantId).where('id', '=', id).returningAll().executeTakeFirst();
}

/** The deleted todo's ticket, or undefined when there was none. */
export async function deleteTodo(db: Executor, tenantId: string, id: string): Promise<string | undefined> {
  const r = await db.deleteFrom('todos').where('tenant_id', '=', tenantId).where('id', '=', id).returning('ticket_id').executeTakeFirst();
  return r?.ticket_id;
}

export async function getTodo(db: Executor, tenantId: string, id: string): Promise<TodoRow | undefined> {
  return db.selectFrom('todos').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
}

export async function insertCsat(db: Executor, tenantId: string, c: Omit<CsatResponseRow, 'tenant_id' | 'created_at'>): Promise<CsatResponseRow> {
  return db.insertInto('csat_responses').values({ ...c, tenant_id: tenantId }).returningAll().executeTakeFirstOrThrow();
}
