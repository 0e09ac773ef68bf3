import { sql } from 'kysely';
import type { Executor } from '../../db';
import type { MemberStatus, Presence, Role, UserRow } from '../../db/types';

export interface MemberRow {
  user_id: string;
  email: string;
  name: string;
  role: Role;
  status: MemberStatus;
  realm_subject: string | null;
  created_at: Date;
  updated_at: Date;
}

const memberColumns = [
  'u.id as user_id',
  'u.email',
  'u.name',
  'm.role',
  'm.status',
  'u.realm_subject',
  'm.created_at',
  'm.updated_at',
] as const;

export async function listMembers(db: Executor, tenantId: string): Promise<MemberRow[]> {
  return db
    .selectFrom('memberships as m')
    .innerJoin('users as u', 'u.id', 'm.user_id')
    .select(memberColumns)
    .where('m.tenant_id', '=', tenantId)
    .orderBy('m.created_at')
    .orderBy('u.id')
    .execute();
}

export async function getMember(db: Executor, tenantId: string, userId: string): Promise<MemberRow | undefined> {
  return db
    .selectFrom('memberships as m')
    .innerJoin('users as u', 'u.id', 'm.user_id')
    .select(memberColumns)
    .where('m.tenant_id', '=', tenantId)
    .where('m.user_id', '=', userId)
    .executeTakeFirst();
}

export async function countActiveOwners(db: Executor, tenantId: string): Promise<number> {
  const row = await db
    .selectFrom('memberships')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('tenant_id', '=', tenantId)
    .where('role', '=', 'owner')
    .where('status', '=', 'active')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function insertMembership(db: Executor, tenantId: string, userId: string, role: Role): Promise<boolean> {
  const result = await db
    .insertInto('memberships')
    .values({ tenant_id: tenantId, user_id: userId, role, status: 'active' })
    .onConflict((oc) => oc.columns(['tenant_id', 'user_id']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}

export async function updateMembership(
  db: Executor,
  tenantId: string,
  userId: string,
  patch: { role?: Role; status?: MemberStatus },
): Promise<void> {
  await db
    .updateTable('memberships')
    .set({ ...patch, updated_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('user_id', '=', userId)
    .execute();
}

export async function deleteMembership(db: Executor, tenantId: string, userId: string): Promise<void> {
  await db.deleteFrom('memberships').where('tenant_id', '=', tenantId).where('user_id', '=', userId).execute();
}

/*
 * Users are global identities shared by workspaces; these lookups are therefore not tenant-scoped, and
 * nothing a workspace admin does may rewrite an existing user's identity fields.
 */
export async function findUserByEmail(db: Executor, email: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where(sql`lower(email)`, '=', email.toLowerCase()).executeTakeFirst();
}

export async function findUserBySubject(db: Executor, subject: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('realm_subject', '=', subject).executeTakeFirst();
}

export async function insertUser(
  db: Executor,
  user: { id: string; email: string; name: string; realm_subject: string | null },
): Promise<UserRow> {
  return db.insertInto('users').values(user).returningAll().executeTakeFirstOrThrow();
}

export async function setPresence(db: Executor, tenantId: string, userId: string, presence: Presence) {
  return db
    .updateTable('memberships')
    .set({ presence, presence_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('user_id', '=', userId)
    .returning(['presence', 'presence_at'])
    .executeTakeFirstOrThrow();
}

export async function setPreferences(db: Executor, tenantId: string, userId: string, prefs: { helpdesk_unavailable?: boolean }) {
  let q = db.updateTable('memberships').where('tenant_id', '=', tenantId).where('user_id', '=', userId);
  if (prefs.helpdesk_unavailable !== undefined) q = q.set({ helpdesk_unavailable: prefs.helpdesk_unavailable });
  else q = q.set({ updated_at: sql`now()` });
  return q.returning(['helpdesk_unavailable']).executeTakeFirstOrThrow();
}
