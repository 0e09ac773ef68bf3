import { sql } from 'kysely';
import type { Executor } from '../../db';

export async function insertTenant(db: Executor, tenantId: string, name: string) {
  return db.insertInto('tenants').values({ id: tenantId, name }).returningAll().executeTakeFirstOrThrow();
}

/** For maintenance sweeps that visit every workspace in turn. */
export async function crossTenantListIds(db: Executor): Promise<string[]> {
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

/** The settings changed in rows of their own (provider keys): their version (ETag) moves on. */
export async function bumpTenantVersion(db: Executor, tenantId: string): Promise<void> {
  // A non-key column (see tickets' bumpVersions): the trigger adds one.
  await db.updateTable('tenants').set({ version: sql`version` } as never).where('id', '=', tenantId).execute();
}

export async function getTenant(db: Executor, tenantId: string) {
  return db.selectFrom('tenants').selectAll().where('id', '=', tenantId).executeTakeFirstOrThrow();
}

export async function providerKeysSet(db: Executor, tenantId: string): Promise<string[]> {
  return (await db.selectFrom('tenant_provider_keys').select('provider').where('tenant_id', '=', tenantId).execute()).map((r) => r.provider);
}

type ColumnSetting = 'name' | 'region' | 'default_model' | 'default_embedding_model' | 'daily_usd_cap' | 'monthly_usd_cap' | 'deployment_mode' | 'time_zone' | 'retention_days';

/** One setting, one statement: a concurrent writer of another setting is never overwritten. */
export async function setColumn(db: Executor, tenantId: string, column: ColumnSetting, value: string | number | null) {
  await db
    .updateTable('tenants')
    .set({ [column]: value, updated_at: sql`now()` } as never)
    .where('id', '=', tenantId)
    .execute();
}

/** The merge happens in SQL on the row as it stands: keys sent are set, keys sent as null are removed. */
export async function mergeOnboarding(db: Executor, tenantId: string, patch: Record<string, unknown>) {
  const removed = Object.entries(patch).filter(([, v]) => v === null).map(([k]) => k);
  const set = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== null));
  await db
    .updateTable('tenants')
    .set({ onboarding: sql`(onboarding || ${JSON.stringify(set)}::jsonb) - ${removed}::text[]` as unknown as string, updated_at: sql`now()` })
    .where('id', '=', tenantId)
    .execute();
}

export async function upsertProviderKey(db: Executor, tenantId: string, provider: string, sealed: string) {
  await db
    .insertInto('tenant_provider_keys')
    .values({ tenant_id: tenantId, provider, key_sealed: sealed })
    .onConflict((oc) => oc.columns(['tenant_id', 'provider']).doUpdateSet({ key_sealed: sealed, updated_at: sql`now()` }))
    .execute();
}

export async function deleteProviderKey(db: Executor, tenantId: string, provider: string) {
  await db.deleteFrom('tenant_provider_keys').where('tenant_id', '=', tenantId).where('provider', '=', provider).execute();
}
