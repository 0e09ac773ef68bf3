import type { Executor } from '../../db';

export async function insertTenant(db: Executor, tenantId: string, name: string) {
  return db.insertInto('tenants').values({ id: tenantId, name }).returningAll().executeTakeFirstOrThrow();
}

/** For maintenance sweeps that visit every workspace in turn. */
export async function listTenantIds(db: Executor): Promise<string[]> {
  const rows = await db.selectFrom('tenants').select('id').orderBy('id').execute();
  return rows.map((r) => r.id);
}
