import type { ConfigSection } from '../../config';
import type { Db, Executor } from '../../db';
import { refuse, requireVersion, type VersionCondition } from '../../lib/errors';
import { createFieldSealer } from '../../lib/crypto';
import { iso } from '../../lib/time';
import { PROVIDER_KEY_NAMES, type PatchTenantInput } from './schemas';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import type { ApiKeyService } from '../api-keys/service';
import type { AuditService } from '../audit/service';
import type { ReportService } from '../reports/service';
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
        // The owner is active at once (the bootstrap key acts as them); their realm subject, when given, is
        // bound in this workspace only. Without one the owner acts through that key and has no realm sign-in.
        const owner = await memberStore.insertUser(tx, { id: newId(), email: input.ownerEmail, name: input.ownerName });
        await memberStore.insertMembership(tx, tenantId, owner.id, { role: 'owner', status: 'active', realm_subject: input.ownerRealmSubject ?? null });
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

/** A workspace's model-provider keys are sealed at rest, bound to the workspace and provider. */
export const providerKeyContext = (tenantId: string, provider: string) => `provider_key:${tenantId}:${provider}`;

/**
 * GET/PATCH /v1/tenants/me. Each sent setting is its own statement (a column update, an SQL-side jsonb
 * merge, a row upsert or delete per provider key), all in one transaction so a refused PATCH stores
 * nothing, and never a read-modify-write of the workspace: two admins saving different settings at once
 * both keep theirs. The database enforces daily cap ≤ monthly cap on the row as it stands.
 */
export function createWorkspaceSettingsService(deps: {
  db: Db;
  config: ConfigSection<'secrets'>;
  audit: AuditService;
  /** Told after a change of the workspace's zone commits (its report days are cut again: issue 37). */
  reports?: Pick<ReportService, 'zoneChanged'>;
}) {
  const { db, audit } = deps;
  const providerKeys = createFieldSealer(deps.config.ENCRYPTION_KEYS, providerKeyContext);

  async function read(exec: Executor, tenantId: string) {
    const t = await store.getTenant(exec, tenantId);
    const set = new Set(await store.providerKeysSet(exec, tenantId));
    return {
      id: t.id,
      name: t.name,
      region: t.region,
      default_model: t.default_model,
      default_embedding_model: t.default_embedding_model,
      daily_usd_cap: t.daily_usd_cap === null ? null : Number(t.daily_usd_cap),
      monthly_usd_cap: t.monthly_usd_cap === null ? null : Number(t.monthly_usd_cap),
      deployment_mode: t.deployment_mode,
      time_zone: t.time_zone,
      retention_days: t.retention_days,
      onboarding: t.onboarding,
      provider_keys_set: Object.fromEntries(PROVIDER_KEY_NAMES.map((p) => [p, set.has(p)])),
      created_at: iso(t.created_at),
      updated_at: iso(t.updated_at),
      /** Not in the body (the response schema drops it): the strong ETag of this read. */
      version: String(t.version),
    };
  }

  return {
    get: (actor: Principal) => read(db, actor.tenantId),

    async patch(actor: Principal, input: PatchTenantInput, ifMatch?: VersionCondition) {
      try {
        const answer = await db.transaction().execute(async (tx) => {
          const t = actor.tenantId;
          // No lost updates: the settings are locked, then the caller's If-Match checked against them.
          await store.lockTenant(tx, t);
          requireVersion(ifMatch, 'workspace settings', (await store.getTenant(tx, t)).version);
          for (const column of ['name', 'region', 'default_model', 'default_embedding_model', 'deployment_mode', 'daily_usd_cap', 'monthly_usd_cap', 'time_zone', 'retention_days'] as const) {
            if (input[column] !== undefined) await store.setColumn(tx, t, column, input[column]);
          }
          if (input.onboarding) await store.mergeOnboarding(tx, t, input.onboarding);
          for (const [provider, key] of Object.entries(input.provider_keys ?? {})) {
            if (key === undefined) continue;
            if (key === '') await store.deleteProviderKey(tx, t, provider);
            else await store.upsertProviderKey(tx, t, provider, providerKeys.seal(t, provider, key));
          }
          // What changed, never to what: provider keys are named, not shown.
          await audit.record(tx, actor, 'tenant.updated', { type: 'tenant', id: t }, {
            settings: Object.keys(input).filter((k) => k !== 'provider_keys'),
            provider_keys: Object.fromEntries(Object.entries(input.provider_keys ?? {}).filter(([, v]) => v !== undefined).map(([p, v]) => [p, v === '' ? 'deleted' : 'set'])),
          });
          // Provider keys live in their own rows: the settings' version moves on with any change.
          await store.bumpTenantVersion(tx, t);
          return read(tx, t);
        });
        if (input.time_zone !== undefined) await deps.reports?.zoneChanged(actor.tenantId);
        return answer;
      } catch (err) {
        if ((err as { constraint?: string })?.constraint === 'tenants_cap_order') {
          throw refuse('cap_order', 'The daily cap may not exceed the monthly cap.', [{ path: 'body.daily_usd_cap', message: 'greater than the monthly cap' }]);
        }
        throw err;
      }
    },
  };
}

export type WorkspaceSettingsService = ReturnType<typeof createWorkspaceSettingsService>;
