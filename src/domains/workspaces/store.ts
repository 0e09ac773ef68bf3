import type { Executor } from '../../db';

export async function insertTenant(db: Executor, tenantId: string, name: string) {
  return db.insertInto('tenants').values({ id: tenantId, name }).returningAll().executeTakeFirstOrThrow();
}
