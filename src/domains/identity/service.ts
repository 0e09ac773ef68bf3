import { createRemoteJWKSet, errors as joseErrors, importSPKI, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { createHash } from 'node:crypto';
import { types } from 'node:util';
import { LRUCache } from 'lru-cache';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import type { AuditService } from '../audit/service';
import { dependencyUnavailable, isUniqueViolation, notFound, refuse, unauthenticated } from '../../lib/errors';
import type { Principal } from './principal';
import { isUuid } from '../../lib/ids';
import { API_KEY_MARK, apiKeyPrefixOf, hashApiKeySecret, sameHash } from '../../lib/secrets';
import { agentIdsOf } from './scopes';
import * as store from './store';

type KeySource = JWTVerifyGetKey | Awaited<ReturnType<typeof importSPKI>>;

export interface IdentityService {
  authenticate(authorization: string | undefined): Promise<Principal>;
  /** Whether this process verified this access token's signature already (it is then not verified again). */
  knownToken(authorization: string): boolean;
}

/** Verified access tokens remembered per process, and for at most this long (or until they expire). */
const VERIFIED_TOKENS = 10_000;
const VERIFIED_FOR_MS = 5 * 60 * 1000;
const tokenKey = (token: string) => createHash('sha256').update(token).digest('base64url');
const bearerToken = (authorization: string | undefined) => /^Bearer ([^\s]+)$/i.exec(authorization?.trim() ?? '')?.[1];


/** The standard OIDC email claims, only when the realm vouches for the address (`email_verified` true). */
function verifiedEmailOf(payload: JWTPayload): string | null {
  const email = payload['email'];
  if (payload['email_verified'] !== true || typeof email !== 'string') return null;
  const trimmed = email.trim();
  return trimmed.length > 0 && trimmed.length <= 320 ? trimmed : null;
}

export function createIdentityService(deps: { db: Db; config: ConfigSection<'identity' | 'secrets'>; audit: AuditService }): IdentityService {
  const { db, config, audit } = deps;
  const touchedAt = new Map<string, number>();
  const touchIntervalMs = config.API_KEY_TOUCH_INTERVAL_SECONDS * 1000;
  let realmKey: Promise<KeySource> | null = null;
  // A token's signature, issuer, audience and expiry are what they were when it was verified: remembered (by
  // its hash) until it expires, or VERIFIED_FOR_MS, so a caller's next requests cost no signature work. Who the
  // token's subject is in the workspace is still read live on every request.
  const verified = new LRUCache<string, { payload: JWTPayload; until: number }>({ max: VERIFIED_TOKENS });

  function realmKeySource(): Promise<KeySource> | null {
    if (realmKey) return realmKey;
    if (config.REALM_JWKS_URL) {
      const jwks = createRemoteJWKSet(new URL(config.REALM_JWKS_URL), { timeoutDuration: 3000, cooldownDuration: 30000 });
      realmKey = Promise.resolve(jwks);
    } else if (config.REALM_PUBLIC_KEY) {
      const alg = config.REALM_ALGORITHMS[0] ?? 'RS256';
      realmKey = importSPKI(config.REALM_PUBLIC_KEY.replace(/\\n/g, '\n'), alg);
    }
    return realmKey;
  }

  async function fromApiKey(secret: string): Promise<Principal> {
    const row = await store.crossTenantKeyByPrefix(db, apiKeyPrefixOf(secret));
    // One message for every failure so a caller cannot probe which prefixes exist.
    if (!row || !sameHash(row.secret_hash, hashApiKeySecret(config.API_KEY_PEPPER, secret))) {
      throw unauthenticated('The API key is not valid.');
    }
    if (row.revoked_at) throw unauthenticated('The API key has been revoked.');
    if (row.expires_at && row.expires_at <= row.now) throw unauthenticated('The API key has expired.');
    // The key acts as its creator: a creator no longer (actively) in the workspace leaves it powerless.
    if (!row.creator_role || row.creator_status !== 'active') {
      throw unauthenticated('The API key is no longer valid: its creator is not an active member of the workspace.');
    }
    await touch(row.tenant_id, row.id, row.last_used_at);
    return {
      kind: 'api_key',
      tenantId: row.tenant_id,
      userId: row.created_by_user_id,
      role: row.creator_role,
      apiKeyId: row.id,
      scopes: row.scopes,
      agentIds: agentIdsOf(row.scopes),
      userName: row.creator_name,
      ...(row.expires_at ? { expiresAt: row.expires_at.getTime() } : {}),
    };
  }

  async function touch(tenantId: string, keyId: string, lastUsedAt: Date | null): Promise<void> {
    const now = Date.now();
    if (lastUsedAt && now - lastUsedAt.getTime() < touchIntervalMs) return;
    const memo = touchedAt.get(keyId);
    if (memo && now - memo < touchIntervalMs) return;
    touchedAt.set(keyId, now);
    if (touchedAt.size > 50_000) touchedAt.clear();
    await store.touchKey(db, tenantId, keyId, config.API_KEY_TOUCH_INTERVAL_SECONDS);
  }

  async function verifyAccessToken(token: string): Promise<JWTPayload> {
    const known = verified.get(tokenKey(token));
    if (known && known.until > Date.now()) return known.payload;
    const payload = await verifySignature(token);
    verified.set(tokenKey(token), { payload, until: Math.min(Date.now() + VERIFIED_FOR_MS, (payload.exp ?? 0) * 1000) });
    return payload;
  }

  async function verifySignature(token: string): Promise<JWTPayload> {
    const source = realmKeySource();
    if (!source) throw unauthenticated('This deployment accepts API keys only; no identity realm is configured.');
    try {
      const key = await source;
      const options = {
        issuer: config.REALM_ISSUER,
        audience: config.REALM_AUDIENCE,
        algorithms: config.REALM_ALGORITHMS,
        clockTolerance: 5,
        // A token without an expiry would be valid forever once leaked: the realm must say when it ends.
        requiredClaims: ['exp'],
      };
      const result =
        typeof key === 'function' ? await jwtVerify(token, key, options) : await jwtVerify(token, key, options);
      return result.payload;
    } catch (err) {
      if (err instanceof joseErrors.JWKSTimeout || (types.isNativeError(err) && err.name === 'TypeError' && /fetch/i.test(err.message))) {
        throw dependencyUnavailable('The identity realm');
      }
      if (err instanceof joseErrors.JWTExpired) throw unauthenticated('The access token has expired.');
      if (err instanceof joseErrors.JWTClaimValidationFailed && err.claim === 'exp') throw unauthenticated('The access token has no expiry (exp claim); only tokens that expire are accepted.');
      if (err instanceof joseErrors.JOSEError) throw unauthenticated('The access token is not valid.');
      throw err;
    }
  }

  /**
   * The binding of a realm identity to a person comes from the identity: a subject with no membership here
   * joins the invitation whose email its realm has verified, and nothing else. An unverified or missing
   * email binds nothing, and what an admin of any workspace typed is never used to pick the subject.
   */
  async function joinByEmail(tenantId: string, subject: string, payload: JWTPayload): Promise<store.MembershipForAuth | undefined> {
    const email = verifiedEmailOf(payload);
    if (email === null) return undefined;
    try {
      const joined = await db.transaction().execute(async (tx) => {
        const row = await store.bindInvitation(tx, tenantId, email, subject);
        if (row) {
          const actor: Principal = { kind: 'user', tenantId, userId: row.user_id, role: row.role, apiKeyId: null, scopes: null, agentIds: [] };
          await audit.record(tx, actor, 'member.joined', { type: 'user', id: row.user_id }, { email: row.email, role: row.role });
        }
        return row;
      });
      if (joined) return { user_id: joined.user_id, role: joined.role, status: joined.status };
    } catch (err) {
      // The same subject was bound here by a racing request (its other sign-in, or an admin); read it below.
      if (!isUniqueViolation(err)) throw err;
    }
    // A racing sign-in of the same subject may have bound the invitation first: it is theirs either way.
    return store.findMembershipBySubject(db, tenantId, subject);
  }

  async function fromAccessToken(token: string): Promise<Principal> {
    const payload = await verifyAccessToken(token);
    const tenantId = payload['tenant_id'];
    if (typeof payload.sub !== 'string' || payload.sub === '') throw unauthenticated('The access token has no subject.');
    if (typeof tenantId !== 'string' || !isUuid(tenantId)) {
      throw unauthenticated('The access token does not select a workspace (tenant_id claim).');
    }
    const membership = (await store.findMembershipBySubject(db, tenantId, payload.sub)) ?? (await joinByEmail(tenantId, payload.sub, payload));
    if (!membership) throw notFound('workspace');
    if (membership.status !== 'active') {
      throw refuse('member_deactivated', 'Your membership in this workspace is deactivated.');
    }
    return {
      kind: 'user',
      tenantId,
      userId: membership.user_id,
      role: membership.role,
      apiKeyId: null,
      scopes: null,
      agentIds: [],
      ...(membership.name !== undefined ? { userName: membership.name } : {}),
      // requiredClaims makes `exp` present; what outlives this request (a live stream) ends with the token.
      expiresAt: (payload.exp ?? 0) * 1000,
    };
  }

  return {
    async authenticate(authorization) {
      const token = bearerToken(authorization);
      if (!token) throw unauthenticated();
      return token.startsWith(API_KEY_MARK) ? fromApiKey(token) : fromAccessToken(token);
    },
    knownToken(authorization) {
      const token = bearerToken(authorization);
      const known = token === undefined ? undefined : verified.get(tokenKey(token));
      return known !== undefined && known.until > Date.now();
    },
  };
}

