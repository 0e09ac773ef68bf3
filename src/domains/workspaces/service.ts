import type { Db } from '../../db';
import type { Principal } from '../../http/principal';
import { newId } from '../../lib/ids';
import type { ApiKeyService } from '../api-keys/service';
import type { AuditService } from '../audit/service';
import { findOrCreateUser } from '../members/service';
import * as memberStore from '../members/store';
import * as store from './store';
import { DEFAULT_SLA_TARGETS } from '../sla/targets';
import * as slaStore from '../sla/store';

export interface BootstrapInput {
  workspace: string;
  ownerEmail: string;
  ownerName: string;
  ownerRealmSubject?: string;
}

export function createWorkspaceService(deps: { db: Db; apiKeys: ApiKeyService; audit: AuditService }) {
  const { db, apiKeys, audit } = deps;
  return {
    /** A workspace, its owner and an owner key with scope *, all or nothing. */
    bootstrap: (input: BootstrapInput) =>
      db.transaction().execute(async (tx) => {
        const tenantId = newId();
        await store.insertTenant(tx, tenantId, input.workspace);
        const owner = await findOrCreateUser(tx, {
          email: input.ownerEmail,
          name: input.ownerName,
          realm_subject: input.ownerRealmSubject,
        });
        await memberStore.insertMembership(tx, tenantId, owner.id, 'owner');
        await slaStore.insertPolicy(tx, tenantId, { id: newId(), name: 'Default', is_default: true, targets: DEFAULT_SLA_TARGETS });
        const actor: Principal = {
          kind: 'user',
          tenantId,
          userId: owner.id,
          role: 'owner',
          apiKeyId: null,
          scopes: null,
          agentIds: [],
        };
        await audit.record(tx, actor, 'workspace.created', { type: 'tenant', id: tenantId }, { name: input.workspace });
        const key = await apiKeys.mint(tx, actor, { name: 'Owner bootstrap key', scopes: ['*'] });
        return { tenant_id: tenantId, owner_user_id: owner.id, api_key: { id: key.id, prefix: key.prefix, secret: key.secret } };
      }),
  };
}

export type WorkspaceService = ReturnType<typeof createWorkspaceService>;
