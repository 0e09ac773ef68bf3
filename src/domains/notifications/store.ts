import { sql } from 'kysely';
import type { Executor } from '../../db';
import { pageKey, pastCursor, type Keyset } from '../../db/keyset';
import type { Cursor } from '../../lib/paging';

export async function insertNotifications(
  db: Executor,
  tenantId: string,
  rows: { id: string; user_id: string; kind: string; ticket_id: string | null; body: string; meta: Record<string, unknown> }[],
): Promise<void> {
  if (rows.length === 0) return;
  await db
    .insertInto('notifications')
    .values(rows.map((r) => ({ ...r, tenant_id: tenantId, meta: JSON.stringify(r.meta) })))
    .execute();
}

const INBOX_PAGES: Keyset = { key: 'created_at', tie: 'id', kind: 'timestamp', direction: 'desc' };

/** Newest first, one keyset page (src/lib/paging.ts), read with one extra row. */
export async function listForUser(
  db: Executor,
  tenantId: string,
  userId: string,
  q: { unreadOnly: boolean; limit: number; after?: Cursor },
) {
  let query = db.selectFrom('notifications').selectAll().select(pageKey(INBOX_PAGES).as('page_key')).where('tenant_id', '=', tenantId).where('user_id', '=', userId);
  if (q.unreadOnly) query = query.where('read_at', 'is', null);
  if (q.after) query = query.where(pastCursor(INBOX_PAGES, q.after));
  return query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(q.limit + 1).execute();
}

/** Only the caller's unread rows change: others' ids and already-read rows simply do not match. */
export async function markRead(db: Executor, tenantId: string, userId: string, ids: string[] | 'all'): Promise<number> {
  let q = db
    .updateTable('notifications')
    .set({ read_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('user_id', '=', userId)
    .where('read_at', 'is', null);
  if (ids !== 'all') q = q.where('id', 'in', ids);
  const result = await q.executeTakeFirst();
  return Number(result.numUpdatedRows);
}

