import type { Executor } from '../../db';
import type { AuditRow } from '../../db/types';
import { newId } from '../../lib/ids';

export interface AuditInsert {
  actorUserId: string | null;
  actorApiKeyId: string | null;
  action: string;
  targetType: string;
  targetId: string | null;
  details: Record<string, unknown>;
}

export async function insertEntry(db: Executor, tenantId: string, e: AuditInsert): Promise<void> {
  await db
    .insertInto('audit_log')
    .values({
      id: newId(),
      tenant_id: tenantId,
      actor_user_id: e.actorUserId,
      actor_api_key_id: e.actorApiKeyId,
      action: e.action,
      target_type: e.targetType,
      target_id: e.targetId,
      details: JSON.stringify(e.details),
    })
    .execute();
}

export async function listEntries(db: Executor, tenantId: string, page: { limit: number; offset: number }): Promise<AuditRow[]> {
  return db
    .selectFrom('audit_log')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .orderBy('seq', 'desc')
    .limit(page.limit)
    .offset(page.offset)
    .execute();
}

export async function countEntries(db: Executor, tenantId: string): Promise<number> {
  const row = await db
    .selectFrom('audit_log')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('tenant_id', '=', tenantId)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function deleteOlderThan(db: Executor, tenantId: string, days: number): Promise<number> {
  const result = await db
    .deleteFrom('audit_log')
    .where('tenant_id', '=', tenantId)
    .where('created_at', '<', new Date(Date.now() - days * 86_400_000))
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}
