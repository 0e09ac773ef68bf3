import { sql } from 'kysely';
import type { Db, Executor } from '../../db';
import { prepared } from '../../db/prepared';
import type { MemberStatus, Role } from '../../db/types';

/*
 * Authentication runs before the workspace is known, so these two lookups are the only store functions
 * that do not take a tenant id first: the credential itself is what selects the tenant.
 */

export interface KeyForAuth {
  id: string;
  tenant_id: string;
  created_by_user_id: string;
  secret_hash: Buffer;
  scopes: string[];
  expires_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
  creator_role: Role | null;
  creator_status: MemberStatus | null;
  /** The creator's display name: what events written through the key are signed with. */
  creator_name: string | null;
  now: Date;
}

/** The key and its creator's live membership in one round trip. */
export async function crossTenantKeyByPrefix(db: Db, prefix: string): Promise<KeyForAuth | undefined> {
  return (await keyByPrefix(db, prefix))[0];
}

// Every authenticated request runs this: compiled once (src/db/prepared.ts).
const keyByPrefix = prepared(1, (db: Executor, prefix: string) =>
  // Through the key's route: on a database distributed by workspace the route (a reference table) names the
  // workspace whose node holds the key; here it is one join in one round trip.
  db
    .selectFrom('routes as r')
    .innerJoin('api_keys as k', (j) => j.onRef('k.tenant_id', '=', 'r.tenant_id').onRef('k.prefix', '=', 'r.key'))
    .leftJoin('memberships as m', (j) => j.onRef('m.tenant_id', '=', 'k.tenant_id').onRef('m.user_id', '=', 'k.created_by_user_id'))
    .leftJoin('users as u', 'u.id', 'k.created_by_user_id')
    .select([
      'k.id',
      'k.tenant_id',
      'k.created_by_user_id',
      'k.secret_hash',
      'k.scopes',
      'k.expires_at',
      'k.revoked_at',
      'k.last_used_at',
      'm.role as creator_role',
      'm.status as creator_status',
      'u.name as creator_name',
      sql<Date>`now()`.as('now'),
    ])
    .where('r.kind', '=', 'api_key')
    .where('r.key', '=', prefix),
);

export interface MembershipForAuth {
  user_id: string;
  role: Role;
  status: MemberStatus;
  /** The member's display name, when the read had it (a sign-in that binds an invitation reads it later). */
  name?: string | null;
}

export async function findMembershipBySubject(db: Db, tenantId: string, subject: string): Promise<MembershipForAuth | undefined> {
  return db
    .selectFrom('memberships as m')
    .leftJoin('users as u', 'u.id', 'm.user_id')
    .select(['m.user_id', 'm.role', 'm.status', 'u.name'])
    .where('m.tenant_id', '=', tenantId)
    .where('m.realm_subject', '=', subject)
    .executeTakeFirst();
}

/**
 * A first sign-in: binds `subject` to the invitation of this workspace whose email matches, in one
 * conditional statement. An active member with no subject yet (an owner bootstrapped without one) is claimed
 * the same way; a deactivated one never is, so a suspension cannot be undone by signing in. Racing sign-ins serialise on the row and the losers' WHERE no longer matches, and
 * the unique (tenant_id, realm_subject) index stops one subject from taking two memberships. At most one
 * row: the workspace holds one member per email, and LIMIT keeps that true for rows older than the rule.
 */
export async function bindInvitation(
  db: Executor,
  tenantId: string,
  email: string,
  subject: string,
): Promise<(MembershipForAuth & { email: string }) | undefined> {
  const row = await sql<MembershipForAuth & { email: string }>`
    UPDATE memberships m SET realm_subject = ${subject}, status = 'active', updated_at = now()
    FROM users u
    WHERE m.tenant_id = ${tenantId}
      AND m.user_id = (
        SELECT i.user_id FROM memberships i JOIN users iu ON iu.id = i.user_id
        WHERE i.tenant_id = ${tenantId} AND i.status IN ('invited', 'active') AND i.realm_subject IS NULL AND lower(iu.email) = lower(${email})
        ORDER BY i.created_at, i.user_id LIMIT 1
      )
      AND u.id = m.user_id
      AND m.realm_subject IS NULL
      AND m.status IN ('invited', 'active')
    RETURNING m.user_id, m.role, m.status, u.email
  `.execute(db);
  return row.rows[0];
}

/** Conditional so that concurrent processes still write last_used_at at most once per interval. */
export async function touchKey(db: Db, tenantId: string, keyId: string, intervalSeconds: number): Promise<void> {
  await db
    .updateTable('api_keys')
    .set({ last_used_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', keyId)
    .where((eb) =>
      eb.or([eb('last_used_at', 'is', null), eb('last_used_at', '<', sql<Date>`now() - make_interval(secs => ${intervalSeconds})`)]),
    )
    .execute();
}
