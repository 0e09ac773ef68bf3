import { sql } from 'kysely';
import type { Executor } from '../../db';
import { pageKey, pastCursor, type Keyset } from '../../db/keyset';
import type { Cursor } from '../../lib/paging';

/**
 * One notification per recipient who is an active member of the workspace, in one statement: the membership
 * check is a join here rather than a read before the insert, so a write that notifies pays one round trip for
 * it, not two. `recipients` pairs each user with the id their notification gets.
 */
export async function insertForActiveMembers(
  db: Executor,
  tenantId: string,
  n: { kind: string; ticket_id: string | null; body: string; meta: Record<string, unknown> },
  recipients: { id: string; user_id: string }[],
): Promise<void> {
  if (recipients.length === 0) return;
  await sql`
    INSERT INTO notifications (id, tenant_id, user_id, kind, ticket_id, body, meta)
    SELECT r.id, m.tenant_id, m.user_id, ${n.kind}, ${n.ticket_id}::uuid, ${n.body}, ${JSON.stringify(n.meta)}::jsonb
    FROM unnest(${recipients.map((r) => r.id)}::uuid[], ${recipients.map((r) => r.user_id)}::uuid[]) AS r (id, user_id)
    JOIN memberships m ON m.tenant_id = ${tenantId}::uuid AND m.user_id = r.user_id AND m.status = 'active'`.execute(db);
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

