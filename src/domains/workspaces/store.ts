import type { Executor } from '../../db';

export async function insertTenant(db: Executor, tenantId: string, name: string) {
  return db.insertInto('tenants').values({ id: tenantId, name }).returningAll().executeTakeFirstOrThrow();
}

/** For maintenance sweeps that visit every workspace in turn. */
export async function listTenantIds(db: Executor): Promise<string[]> {
  const rows = await db.selectFrom('tenants').select('id').orderBy('id').execute();
  return rows.map((r) => r.id);
}

/**
 * Serialises workspace-wide invariants (the last owner, the one default SLA policy): concurrent writers of
 * the same workspace take turns on its row.
 */
export async function lockTenant(db: Executor, tenantId: string): Promise<void> {
  await db.selectFrom('tenants').select('id').where('id', '=', tenantId).forUpdate().executeTakeFirst();
}
