import { sql } from 'kysely';
import type { Db } from '../../db';
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
  now: Date;
}

/** The key and its creator's live membership in one round trip. */
export async function findKeyByPrefix(db: Db, prefix: string): Promise<KeyForAuth | undefined> {
  return db
    .selectFrom('api_keys as k')
    .leftJoin('memberships as m', (j) => j.onRef('m.tenant_id', '=', 'k.tenant_id').onRef('m.user_id', '=', 'k.created_by_user_id'))
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
      sql<Date>`now()`.as('now'),
    ])
    .where('k.prefix', '=', prefix)
    .executeTakeFirst();
}

export interface MembershipForAuth {
  user_id: string;
  role: Role;
  status: MemberStatus;
}

export async function findMembershipBySubject(db: Db, tenantId: string, subject: string): Promise<MembershipForAuth | undefined> {
  return db
    .selectFrom('users as u')
    .innerJoin('memberships as m', 'm.user_id', 'u.id')
    .select(['u.id as user_id', 'm.role', 'm.status'])
    .where('m.tenant_id', '=', tenantId)
    .where('u.realm_subject', '=', subject)
    .executeTakeFirst();
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
