import type { Executor } from '../../db';
import { pageKey, pastCursor, type Keyset } from '../../db/keyset';
import type { Cursor } from '../../lib/paging';
import { newId } from '../../lib/ids';

export interface AuditInsert {
  actorUserId: string | null;
  actorApiKeyId: string | null;
  action: string;
  targetType: string;
  targetId: string | null;
  details: Record<string, unknown>;
}

export async function insertEntry(db: Executor, tenantId: string, e: AuditInsert): Promise<void> {
  await db
    .insertInto('audit_log')
    .values({
      id: newId(),
      tenant_id: tenantId,
      actor_user_id: e.actorUserId,
      actor_api_key_id: e.actorApiKeyId,
      action: e.action,
      target_type: e.targetType,
      target_id: e.targetId,
      details: JSON.stringify(e.details),
    })
    .execute();
}

const AUDIT_PAGES: Keyset = { key: 'seq', kind: 'sequence', direction: 'desc' };

/** Newest first, one keyset page (src/lib/paging.ts), read with one extra row. */
export async function listEntries(db: Executor, tenantId: string, page: { limit: number; after?: Cursor }) {
  let q = db.selectFrom('audit_log').selectAll().select(pageKey(AUDIT_PAGES).as('page_key')).where('tenant_id', '=', tenantId);
  if (page.after) q = q.where(pastCursor(AUDIT_PAGES, page.after));
  return q.orderBy('seq', 'desc').limit(page.limit + 1).execute();
}

export async function deleteOlderThan(db: Executor, tenantId: string, days: number): Promise<number> {
  const result = await db
    .deleteFrom('audit_log')
    .where('tenant_id', '=', tenantId)
    .where('created_at', '<', new Date(Date.now() - days * 86_400_000))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
