import type { Executor } from '../../db';
import { addRoute, removeRoute } from '../routing/store';
import type { ApiKeyRow, MemberStatus, NewApiKey } from '../../db/types';

/** The key and its route (the prefix, unique across workspaces: a taken one fails like a duplicate key). */
export async function insertKey(db: Executor, tenantId: string, key: Omit<NewApiKey, 'tenant_id'>): Promise<ApiKeyRow> {
  if (!(await addRoute(db, tenantId, 'api_key', key.prefix))) throw Object.assign(new Error('API key prefix already routed'), { code: '23505' });
  return db
    .insertInto('api_keys')
    .values({ ...key, tenant_id: tenantId })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function listKeys(db: Executor, tenantId: string, includeRevoked: boolean): Promise<ApiKeyRow[]> {
  let q = db.selectFrom('api_keys').selectAll().where('tenant_id', '=', tenantId);
  if (!includeRevoked) q = q.where('revoked_at', 'is', null);
  return q.orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
}

/** Only an active key flips, so a second revoke finds nothing and answers 404. */
export async function revokeKey(db: Executor, tenantId: string, keyId: string): Promise<ApiKeyRow | undefined> {
  return db
    .updateTable('api_keys')
    .set({ revoked_at: new Date() })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', keyId)
    .where('revoked_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
}

export async function revokeKeysOfCreator(db: Executor, tenantId: string, creatorId: string): Promise<ApiKeyRow[]> {
  return db
    .updateTable('api_keys')
    .set({ revoked_at: new Date() })
    .where('tenant_id', '=', tenantId)
    .where('created_by_user_id', '=', creatorId)
    .where('revoked_at', 'is', null)
    .returningAll()
    .execute();
}

export async function deleteKey(db: Executor, tenantId: string, keyId: string): Promise<ApiKeyRow | undefined> {
  const row = await db.deleteFrom('api_keys').where('tenant_id', '=', tenantId).where('id', '=', keyId).returningAll().executeTakeFirst();
  if (row) await removeRoute(db, tenantId, 'api_key', row.prefix);
  return row;
}

export async function existingAgentIds(db: Executor, tenantId: string, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db.selectFrom('agents').select('id').where('tenant_id', '=', tenantId).where('id', 'in', ids).execute();
  return new Set(rows.map((r) => r.id));
}

/**
 * Locks the creator's membership for the rest of the minting transaction and returns its status. Member
 * changes lock the workspace row FOR UPDATE and then the membership; taking the workspace row (FOR KEY
 * SHARE, which inserting the key takes anyway) before the membership keeps the same order, so a removal
 * and a mint wait for each other instead of deadlocking.
 */
export async function lockCreatorMembership(db: Executor, tenantId: string, userId: string): Promise<MemberStatus | undefined> {
  await db.selectFrom('tenants').select('id').where('id', '=', tenantId).forKeyShare().executeTakeFirst();
  const row = await db
    .selectFrom('memberships')
    .select('status')
    .where('tenant_id', '=', tenantId)
    .where('user_id', '=', userId)
    .forShare()
    .executeTakeFirst();
  return row?.status;
}
