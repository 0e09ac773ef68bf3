import type { Db, Executor } from '../../db';
import type { AuditRow } from '../../db/types';
import type { Principal } from '../identity/principal';
import { iso } from '../../lib/time';
import { pageOf, type Cursor } from '../../lib/paging';
import { AUDIT_SORT } from './schemas';
import * as store from './store';
import { crossTenantListIds } from '../workspaces/store';

export interface AuditTarget {
  type: string;
  id: string | null;
}

function present(row: AuditRow) {
  return {
    id: row.id,
    action: row.action,
    actor_user_id: row.actor_user_id,
    actor_api_key_id: row.actor_api_key_id,
    target_type: row.target_type,
    target_id: row.target_id,
    details: row.details,
    created_at: iso(row.created_at),
  };
}

export function createAuditService(deps: { db: Db }) {
  const { db } = deps;
  return {
    /** Written inside the caller's transaction so an audited change and its entry land together. */
    async record(tx: Executor, actor: Principal, action: string, target: AuditTarget, details: Record<string, unknown>) {
      await store.insertEntry(tx, actor.tenantId, {
        actorUserId: actor.userId,
        actorApiKeyId: actor.apiKeyId,
        action,
        targetType: target.type,
        targetId: target.id,
        details,
      });
    },

    /** An entry for what the service itself did (no user or key acted), e.g. disabling a failing webhook endpoint. */
    async recordBySystem(tx: Executor, tenantId: string, action: string, target: AuditTarget, details: Record<string, unknown>) {
      await store.insertEntry(tx, tenantId, { actorUserId: null, actorApiKeyId: null, action, targetType: target.type, targetId: target.id, details });
    },

    async list(actor: Principal, page: { limit: number; after?: Cursor }) {
      const rows = await store.listEntries(db, actor.tenantId, page);
      return pageOf('audit_entries', rows, page.limit, AUDIT_SORT, present);
    },

    /** Retention sweep run by the maintenance worker; each workspace is pruned on its own. */
    async prune(retentionDays: number): Promise<{ deleted: number; tenants: number }> {
      const ids = await crossTenantListIds(db);
      let deleted = 0;
      for (const tenantId of ids) deleted += await store.deleteOlderThan(db, tenantId, retentionDays);
      return { deleted, tenants: ids.length };
    },
  };
}

export type AuditService = ReturnType<typeof createAuditService>;
