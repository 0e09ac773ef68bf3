import type { Executor } from '../../db';
import type { SavedViewRow } from '../../db/types';

export async function insertView(
  db: Executor,
  tenantId: string,
  v: { id: string; owner_user_id: string; name: string; filters: Record<string, string>; shared: boolean },
): Promise<SavedViewRow> {
  return db
    .insertInto('saved_views')
    .values({ ...v, tenant_id: tenantId, filters: JSON.stringify(v.filters) })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** The caller's own views and every shared one. */
export async function listVisible(db: Executor, tenantId: string, userId: string): Promise<SavedViewRow[]> {
  return db
    .selectFrom('saved_views')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where((eb) => eb.or([eb('owner_user_id', '=', userId), eb('shared', '=', true)]))
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

export async function getVisible(db: Executor, tenantId: string, userId: string, id: string): Promise<SavedViewRow | undefined> {
  return db
    .selectFrom('saved_views')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .where((eb) => eb.or([eb('owner_user_id', '=', userId), eb('shared', '=', true)]))
    .executeTakeFirst();
}

export async function deleteView(db: Executor, tenantId: string, id: string): Promise<void> {
  await db.deleteFrom('saved_views').where('tenant_id', '=', tenantId).where('id', '=', id).execute();
}
