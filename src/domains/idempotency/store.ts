import { sql } from 'kysely';
import type { Executor } from '../../db';

export interface IdempotencyRow {
  fingerprint: string;
  state: 'running' | 'done';
  response_status: number | null;
  response_body: string | null;
}

/**
 * Claims the key for this request: a new row, or an expired one taken over, both `running`. Returns whether
 * the claim won; a live row (running or done) is left as it is for the caller to read.
 */
export async function claimKey(db: Executor, tenantId: string, scope: string, key: string, fingerprint: string, ttlSeconds: number): Promise<boolean> {
  const { rows } = await sql<{ key: string }>`
    insert into idempotency_keys (tenant_id, scope, key, fingerprint, state, expires_at)
    values (${tenantId}, ${scope}, ${key}, ${fingerprint}, 'running', now() + make_interval(secs => ${ttlSeconds}))
    on conflict (tenant_id, scope, key) do update
      set fingerprint = excluded.fingerprint, state = 'running', response_status = null, response_body = null,
          created_at = now(), expires_at = excluded.expires_at
      where idempotency_keys.expires_at <= now()
    returning key`.execute(db);
  return rows.length === 1;
}

export async function getKey(db: Executor, tenantId: string, scope: string, key: string): Promise<IdempotencyRow | undefined> {
  const { rows } = await sql<IdempotencyRow>`
    select fingerprint, state, response_status, response_body from idempotency_keys
    where tenant_id = ${tenantId} and scope = ${scope} and key = ${key} and expires_at > now()`.execute(db);
  return rows[0];
}

/** The first answer, kept for replay. */
export async function completeKey(db: Executor, tenantId: string, scope: string, key: string, status: number, body: string | null): Promise<void> {
  await sql`
    update idempotency_keys set state = 'done', response_status = ${status}, response_body = ${body}
    where tenant_id = ${tenantId} and scope = ${scope} and key = ${key} and state = 'running'`.execute(db);
}

/** A request that ended without an answer worth replaying: the key is free again. */
export async function releaseKey(db: Executor, tenantId: string, scope: string, key: string): Promise<void> {
  await sql`delete from idempotency_keys where tenant_id = ${tenantId} and scope = ${scope} and key = ${key} and state = 'running'`.execute(db);
}

/** The hourly prune: expired keys of every workspace. */
export async function crossTenantPruneExpiredKeys(db: Executor): Promise<number> {
  const r = await sql`delete from idempotency_keys where expires_at <= now()`.execute(db);
  return Number(r.numAffectedRows ?? 0);
}
