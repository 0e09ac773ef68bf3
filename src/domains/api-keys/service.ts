import type { ConfigSection } from '../../config';
import type { Db, Executor } from '../../db';
import type { ApiKeyRow } from '../../db/types';
import { type FieldError, insufficientScope, notFound, refuse, unauthenticated } from '../../lib/errors';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { hashApiKeySecret, mintApiKeySecret } from '../../lib/secrets';
import { addDays, iso, isoOrNull } from '../../lib/time';
import type { AuditService } from '../audit/service';
import { agentIdsOf, parseScope, scopeWithin } from '../identity/scopes';
import type { CreateApiKeyInput } from './schemas';
import * as store from './store';

const auditDetails = (k: ApiKeyRow) => ({ key_id: k.id, name: k.name, prefix: k.prefix, scopes: k.scopes });

const presentListed = (k: ApiKeyRow) => ({
  id: k.id,
  name: k.name,
  prefix: k.prefix,
  scopes: k.scopes,
  expires_at: isoOrNull(k.expires_at),
  created_at: iso(k.created_at),
  created_by_user_id: k.created_by_user_id,
  last_used_at: isoOrNull(k.last_used_at),
  revoked_at: isoOrNull(k.revoked_at),
});

export function createApiKeyService(deps: { db: Db; config: ConfigSection<'secrets'>; audit: AuditService }) {
  const { db, config, audit } = deps;

  /**
   * The agent narrowing a key minted by a key must keep: a minting key bound to agents can only mint keys
   * bound to a non-empty subset of them (none asked for: its own), never an unbound key or another agent's.
   */
  function agentScopesFor(actor: Principal, wanted: string[]): string[] {
    if (!actor.scopes) return wanted;
    const held = new Set(agentIdsOf(actor.scopes));
    if (held.size === 0) return wanted;
    const asked = agentIdsOf(wanted.filter((raw) => !('invalid' in parseScope(raw))));
    if (asked.length === 0) return [...wanted, ...[...held].map((id) => `agent:${id}`)];
    const outside = asked.find((id) => !held.has(id));
    if (outside) throw insufficientScope(`the agent scope "agent:${outside}"`);
    return wanted;
  }

  /** Validates every scope against what this deployment can grant; nothing is stored on a refusal. */
  async function resolveScopes(tx: Executor, actor: Principal, input: CreateApiKeyInput): Promise<string[]> {
    const wanted = agentScopesFor(actor, input.agent_id ? [...input.scopes, `agent:${input.agent_id}`] : input.scopes);
    const errors: FieldError[] = [];
    const agentIds: string[] = [];
    const parsed = wanted.map((raw, i) => {
      const p = parseScope(raw);
      if ('invalid' in p) errors.push({ path: `scopes.${i}`, message: `"${raw}" ${p.invalid}` });
      else if (p.kind === 'agent') agentIds.push(p.agentId);
      return p;
    });
    if (errors.length > 0) throw refuse('scope_invalid', 'One or more scopes cannot be granted by this deployment.', errors);

    const known = await store.existingAgentIds(tx, actor.tenantId, agentIds);
    const unknown = agentIds.filter((id) => !known.has(id));
    if (unknown.length > 0) {
      throw refuse('agent_unknown', `No agent ${unknown.join(', ')} exists in this workspace.`, [
        { path: input.agent_id && unknown.includes(input.agent_id) ? 'agent_id' : 'scopes', message: 'unknown agent' },
      ]);
    }
    // A key may mint keys, but never one that reaches further than itself.
    if (actor.scopes) {
      const wider = parsed.findIndex((p) => !('invalid' in p) && !scopeWithin(actor.scopes!, p));
      if (wider >= 0) throw insufficientScope(`the requested scope "${wanted[wider]}"`);
    }
    return [...new Set(parsed.map((p, i) => (!('invalid' in p) && p.kind === 'agent' ? `agent:${p.agentId}` : wanted[i]!)))];
  }

  /** Shared by the route and the bootstrap CLI; runs inside the caller's transaction. */
  async function mint(tx: Executor, actor: Principal, input: CreateApiKeyInput) {
    // Minting serialises with the creator's removal: the removal waits for this transaction (and then
    // revokes the key with the rest) or has already committed, and the key is refused here.
    const status = await store.lockCreatorMembership(tx, actor.tenantId, actor.userId);
    if (status === undefined) {
      throw actor.kind === 'api_key' ? unauthenticated('The API key is no longer valid: its creator is not an active member of the workspace.') : notFound('workspace');
    }
    if (status !== 'active') throw refuse('member_deactivated', 'Your membership in this workspace is deactivated.');
    const scopes = await resolveScopes(tx, actor, input);
    const { secret, prefix } = mintApiKeySecret();
    const created = new Date();
    const row = await store.insertKey(tx, actor.tenantId, {
      id: newId(),
      created_by_user_id: actor.userId,
      name: input.name,
      prefix,
      secret_hash: hashApiKeySecret(config.API_KEY_PEPPER, secret),
      scopes,
      expires_at: input.expires_in_days ? addDays(created, input.expires_in_days) : null,
      created_at: created,
    });
    await audit.record(tx, actor, 'api_key.created', { type: 'api_key', id: row.id }, auditDetails(row));
    return {
      id: row.id,
      name: row.name,
      prefix: row.prefix,
      scopes: row.scopes,
      expires_at: isoOrNull(row.expires_at),
      created_at: iso(row.created_at),
      secret,
    };
  }

  return {
    mint,

    create: (actor: Principal, input: CreateApiKeyInput) => db.transaction().execute((tx) => mint(tx, actor, input)),

    async list(actor: Principal, includeRevoked: boolean) {
      const rows = await store.listKeys(db, actor.tenantId, includeRevoked);
      return { api_keys: rows.map(presentListed) };
    },

    revoke: (actor: Principal, keyId: string) =>
      db.transaction().execute(async (tx) => {
        const row = await store.revokeKey(tx, actor.tenantId, keyId);
        if (!row) throw notFound('active API key');
        await audit.record(tx, actor, 'api_key.revoked', { type: 'api_key', id: row.id }, auditDetails(row));
        return { id: row.id, revoked: true };
      }),

    /** Used when a member leaves the workspace; each revocation is audited like a manual one. */
    async revokeAllCreatedBy(tx: Executor, actor: Principal, creatorId: string, reason: string) {
      for (const row of await store.revokeKeysOfCreator(tx, actor.tenantId, creatorId)) {
        await audit.record(tx, actor, 'api_key.revoked', { type: 'api_key', id: row.id }, { ...auditDetails(row), reason });
      }
    },

    remove: (actor: Principal, keyId: string) =>
      db.transaction().execute(async (tx) => {
        const row = await store.deleteKey(tx, actor.tenantId, keyId);
        if (!row) throw notFound('API key');
        await audit.record(tx, actor, 'api_key.deleted', { type: 'api_key', id: row.id }, auditDetails(row));
      }),
  };
}

export type ApiKeyService = ReturnType<typeof createApiKeyService>;
