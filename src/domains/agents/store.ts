import type { Executor } from '../../db';
import { addRoute } from '../routing/store';

export async function insertAgent(db: Executor, tenantId: string, a: { id: string; name: string }) {
  await addRoute(db, tenantId, 'agent', a.id);
  return db.insertInto('agents').values({ ...a, tenant_id: tenantId }).returningAll().executeTakeFirstOrThrow();
}

/** `onlyIds` narrows the list for a key bound to agent:<uuid> scopes. */
export async function listAgents(db: Executor, tenantId: string, onlyIds: string[]) {
  let q = db.selectFrom('agents').selectAll().where('tenant_id', '=', tenantId);
  if (onlyIds.length > 0) q = q.where('id', 'in', onlyIds);
  return q.orderBy('created_at').orderBy('id').execute();
}
