import { sql } from 'kysely';
import type { Executor } from '../../db';
import type { MacroRow } from '../../db/types';

export async function insertMacro(
  db: Executor,
  tenantId: string,
  m: { id: string; name: string; description: string; actions: unknown[]; enabled: boolean; trigger: object | null; created_by_user_id: string },
): Promise<MacroRow> {
  return db
    .insertInto('macros')
    .values({ ...m, tenant_id: tenantId, actions: JSON.stringify(m.actions), trigger: m.trigger ? JSON.stringify(m.trigger) : null })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function listMacros(db: Executor, tenantId: string): Promise<MacroRow[]> {
  return db.selectFrom('macros').selectAll().where('tenant_id', '=', tenantId).orderBy('created_at').orderBy('id').execute();
}

export async function getMacro(db: Executor, tenantId: string, id: string): Promise<MacroRow | undefined> {
  return db.selectFrom('macros').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
}

/** The macro, locked for a change (its version checked against the caller's If-Match before the write). */
export async function lockMacro(db: Executor, tenantId: string, id: string): Promise<MacroRow | undefined> {
  return db.selectFrom('macros').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).forUpdate().executeTakeFirst();
}

/** Each sent field is its own column write; `trigger` is written only when the patch names it. */
export async function updateMacro(
  db: Executor,
  tenantId: string,
  id: string,
  patch: { name?: string; description?: string; actions?: unknown[]; enabled?: boolean; trigger?: object | null },
): Promise<MacroRow | undefined> {
  return db
    .updateTable('macros')
    .set({
      ...(patch.name !== undefined ? { name: patch.name } : {}),
      ...(patch.description !== undefined ? { description: patch.description } : {}),
      ...(patch.actions !== undefined ? { actions: JSON.stringify(patch.actions) } : {}),
      ...(patch.enabled !== undefined ? { enabled: patch.enabled } : {}),
      ...(patch.trigger !== undefined ? { trigger: patch.trigger === null ? null : JSON.stringify(patch.trigger) } : {}),
      updated_at: sql`now()`,
    })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function triggeredBy(db: Executor, tenantId: string, event: string): Promise<MacroRow[]> {
  return db
    .selectFrom('macros')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('enabled', '=', true)
    .where(sql`trigger->>'event'`, '=', event)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

export async function anyTriggeredBy(db: Executor, tenantId: string, event: string): Promise<boolean> {
  const row = await db
    .selectFrom('macros')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('enabled', '=', true)
    .where(sql`trigger->>'event'`, '=', event)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** Claims the (macro, event) pair; false when a previous run already did, so a re-run changes nothing. */
export async function claimRun(db: Executor, tenantId: string, macroId: string, eventId: string): Promise<boolean> {
  const result = await db
    .insertInto('macro_runs')
    .values({ tenant_id: tenantId, macro_id: macroId, event_id: eventId })
    .onConflict((oc) => oc.columns(['tenant_id', 'macro_id', 'event_id']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}
