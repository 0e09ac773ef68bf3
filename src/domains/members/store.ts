import { sql } from 'kysely';
import type { Executor } from '../../db';
import { pageKey, pastCursor, type Keyset } from '../../db/keyset';
import type { Cursor } from '../../lib/paging';
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
  'm.realm_subject',
  'm.created_at',
  'm.updated_at',
] as const;

const MEMBER_PAGES: Keyset = { key: 'm.created_at', tie: 'm.user_id', kind: 'timestamp', direction: 'asc' };

/** Oldest membership first, one keyset page (src/lib/paging.ts), read with one extra row. */
export async function listMembers(db: Executor, tenantId: string, page: { limit: number; after?: Cursor }) {
  let q = db
    .selectFrom('memberships as m')
    .innerJoin('users as u', 'u.id', 'm.user_id')
    .select(memberColumns)
    .select(pageKey(MEMBER_PAGES).as('page_key'))
    .where('m.tenant_id', '=', tenantId);
  if (page.after) q = q.where(pastCursor(MEMBER_PAGES, page.after));
  return q.orderBy('m.created_at').orderBy('m.user_id').limit(page.limit + 1).execute();
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

export async function insertMembership(
  db: Executor,
  tenantId: string,
  userId: string,
  membership: { role: Role; status: MemberStatus; realm_subject: string | null },
): Promise<boolean> {
  const result = await db
    .insertInto('memberships')
    .values({ tenant_id: tenantId, user_id: userId, ...membership })
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

/** Whether this workspace already has a member with this email (case-insensitive); no other workspace is read. */
export async function memberEmailTaken(db: Executor, tenantId: string, email: string): Promise<boolean> {
  const row = await db
    .selectFrom('memberships as m')
    .innerJoin('users as u', 'u.id', 'm.user_id')
    .select('m.user_id')
    .where('m.tenant_id', '=', tenantId)
    .where(sql`lower(u.email)`, '=', email.toLowerCase())
    .executeTakeFirst();
  return row !== undefined;
}

export async function memberSubjectTaken(db: Executor, tenantId: string, subject: string): Promise<boolean> {
  const row = await db
    .selectFrom('memberships')
    .select('user_id')
    .where('tenant_id', '=', tenantId)
    .where('realm_subject', '=', subject)
    .executeTakeFirst();
  return row !== undefined;
}

/** A fresh person row per invitation: user rows are never shared between workspaces' invitations. */
export async function insertUser(db: Executor, user: { id: string; email: string; name: string }): Promise<UserRow> {
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

/** Which of the users are active members (only they are notified, assigned or rotated to). */
export async function activeMemberIds(db: Executor, tenantId: string, userIds: string[]): Promise<string[]> {
  if (userIds.length === 0) return [];
  const rows = await db
    .selectFrom('memberships')
    .select('user_id')
    .where('tenant_id', '=', tenantId)
    .where('user_id', 'in', userIds)
    .where('status', '=', 'active')
    .execute();
  return rows.map((r) => r.user_id);
}

/** Whether the user is an active member (ticket assignees must be). */
export const activeMember = async (db: Executor, tenantId: string, userId: string): Promise<boolean> =>
  (await activeMemberIds(db, tenantId, [userId])).length === 1;

/** The name shown as the actor of what a user does. */
export async function userName(db: Executor, userId: string): Promise<string | null> {
  const row = await db.selectFrom('users').select('name').where('id', '=', userId).executeTakeFirst();
  return row?.name ?? null;
}

/** Whether the user holds a membership of any status (work may be attributed to an invited or former member). */
export async function isMember(db: Executor, tenantId: string, userId: string): Promise<boolean> {
  return (await db.selectFrom('memberships').select('user_id').where('tenant_id', '=', tenantId).where('user_id', '=', userId).executeTakeFirst()) !== undefined;
}
