import { sql } from 'kysely';
import type { Executor } from '../../db';

/**
 * Routing rows (migration 0029): what a request carries before its workspace is known, mapped to the
 * workspace. A reference table in a database distributed by workspace (copied to every node), so the lookup is
 * local anywhere and the tenant row is then read on its workspace's node; its primary key is also what keeps
 * each of these keys unique across all workspaces.
 */
export type RouteKind = 'api_key' | 'inbound_token' | 'help_centre_host' | 'help_centre' | 'oauth_state' | 'integration' | 'agent';

/** Claims `key` for the workspace; false when it routes somewhere already (this workspace or another). */
export async function addRoute(db: Executor, tenantId: string, kind: RouteKind, key: string): Promise<boolean> {
  const r = await db.insertInto('routes').values({ kind, key, tenant_id: tenantId }).onConflict((oc) => oc.columns(['kind', 'key']).doNothing()).executeTakeFirst();
  return Number(r.numInsertedOrUpdatedRows ?? 0) === 1;
}

export async function removeRoute(db: Executor, tenantId: string, kind: RouteKind, key: string): Promise<void> {
  await db.deleteFrom('routes').where('kind', '=', kind).where('key', '=', key).where('tenant_id', '=', tenantId).execute();
}

/** The workspace a key routes to. */
export async function crossTenantRoute(db: Executor, kind: RouteKind, key: string): Promise<string | undefined> {
  return (await db.selectFrom('routes').select('tenant_id').where('kind', '=', kind).where('key', '=', key).executeTakeFirst())?.tenant_id;
}

/** Hashes (tokens, OAuth states) are routed by their hex form. */
export const hexKey = (hash: Buffer) => hash.toString('hex');

/** Routes of the given kind whose key no longer has its row (after a cross-workspace prune). */
export async function crossTenantDropRoutes(db: Executor, kind: RouteKind, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  await sql`DELETE FROM routes WHERE kind = ${kind} AND key = ANY(${keys}::text[])`.execute(db);
}
