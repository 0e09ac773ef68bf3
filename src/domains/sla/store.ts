import type { Executor } from '../../db';
import type { SlaPolicyRow, SlaTargetsJson } from '../../db/types';

export async function insertPolicy(
  db: Executor,
  tenantId: string,
  p: { id: string; name: string; is_default: boolean; targets: SlaTargetsJson; schedule_id?: string | null },
): Promise<SlaPolicyRow> {
  return db
    .insertInto('sla_policies')
    .values({ ...p, tenant_id: tenantId, targets: JSON.stringify(p.targets) })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function clearDefault(db: Executor, tenantId: string): Promise<void> {
  await db.updateTable('sla_policies').set({ is_default: false }).where('tenant_id', '=', tenantId).where('is_default', '=', true).execute();
}

export async function listPolicies(db: Executor, tenantId: string): Promise<SlaPolicyRow[]> {
  return db.selectFrom('sla_policies').selectAll().where('tenant_id', '=', tenantId).orderBy('created_at').orderBy('id').execute();
}

export async function getPolicy(db: Executor, tenantId: string, id: string): Promise<SlaPolicyRow | undefined> {
  return db.selectFrom('sla_policies').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
}

export async function defaultPolicy(db: Executor, tenantId: string): Promise<SlaPolicyRow | undefined> {
  return db.selectFrom('sla_policies').selectAll().where('tenant_id', '=', tenantId).where('is_default', '=', true).executeTakeFirst();
}

/** The policies that count on a schedule (a schedule's change recomputes their open tickets; they keep it from being deleted). */
export async function policiesOnSchedule(db: Executor, tenantId: string, scheduleId: string): Promise<SlaPolicyRow[]> {
  return db.selectFrom('sla_policies').selectAll().where('tenant_id', '=', tenantId).where('schedule_id', '=', scheduleId).orderBy('created_at').orderBy('id').execute();
}
