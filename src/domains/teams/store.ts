import { sql } from 'kysely';
import type { Executor } from '../../db';
import { prepared } from '../../db/prepared';
import type { MemberStatus, Presence } from '../../db/types';

export async function insertTeam(db: Executor, tenantId: string, t: { id: string; name: string }) {
  return db.insertInto('teams').values({ ...t, tenant_id: tenantId }).returningAll().executeTakeFirstOrThrow();
}

export async function listTeams(db: Executor, tenantId: string) {
  return db.selectFrom('teams').selectAll().where('tenant_id', '=', tenantId).orderBy('created_at').orderBy('id').execute();
}

export async function listTeamMembers(db: Executor, tenantId: string, teamIds: string[]) {
  if (teamIds.length === 0) return [];
  return db
    .selectFrom('team_members as tm')
    .innerJoin('users as u', 'u.id', 'tm.user_id')
    .select(['tm.team_id', 'tm.user_id', 'tm.position', 'u.name'])
    .where('tm.tenant_id', '=', tenantId)
    .where('tm.team_id', 'in', teamIds)
    .orderBy('tm.position')
    .execute();
}

/** The team row lock is what serialises turns: one assignment per team at a time. */
export async function lockTeam(db: Executor, tenantId: string, teamId: string) {
  return (await lockOne(db, tenantId, teamId))[0];
}

// Every assignment runs this under its team's turn (as are the rotation read and the cursor move): compiled
// once and prepared by name (src/db/prepared.ts), so the statements other callers of the team wait behind
// are not parsed and planned each time.
const lockOne = prepared(2, (db: Executor, tenantId: string, teamId: string) =>
  db.selectFrom('teams').select(['id', 'rr_last_position']).where('tenant_id', '=', tenantId).where('id', '=', teamId).forUpdate(),
);

export async function setCursor(db: Executor, tenantId: string, teamId: string, position: number) {
  await moveCursor(db, tenantId, teamId, position);
}

const moveCursor = prepared(3, (db: Executor, tenantId: string, teamId: string, position: number) =>
  db.updateTable('teams').set({ rr_last_position: position }).where('tenant_id', '=', tenantId).where('id', '=', teamId),
);

export async function appendMember(db: Executor, tenantId: string, teamId: string, userId: string): Promise<boolean> {
  const result = await db
    .insertInto('team_members')
    .columns(['tenant_id', 'team_id', 'user_id', 'position'])
    .expression(
      db
        .selectFrom('team_members')
        .select([
          sql<string>`${tenantId}::uuid`.as('tenant_id'),
          sql<string>`${teamId}::uuid`.as('team_id'),
          sql<string>`${userId}::uuid`.as('user_id'),
          sql<number>`coalesce(max(position), 0) + 1`.as('position'),
        ])
        .where('team_id', '=', teamId),
    )
    .onConflict((oc) => oc.columns(['tenant_id', 'team_id', 'user_id']).doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}

export async function removeMember(db: Executor, tenantId: string, teamId: string, userId: string): Promise<boolean> {
  const result = await db
    .deleteFrom('team_members')
    .where('tenant_id', '=', tenantId)
    .where('team_id', '=', teamId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return Number(result.numDeletedRows) === 1;
}

export interface RotationEntry {
  user_id: string;
  position: number;
  name: string;
  status: MemberStatus | null;
  presence: Presence | null;
  presence_fresh: boolean;
  helpdesk_unavailable: boolean | null;
}

/**
 * Everyone in the rotation with what eligibility needs, read inside the assigning transaction. Staleness is
 * judged at this statement, not at the transaction's start, so time spent waiting for the team lock counts.
 */
export async function rotation(db: Executor, tenantId: string, teamId: string, presenceTtlSeconds: number): Promise<RotationEntry[]> {
  return rotationOf(db, tenantId, teamId, presenceTtlSeconds);
}

const rotationOf = prepared(3, (db: Executor, tenantId: string, teamId: string, presenceTtlSeconds: number) =>
  db
    .selectFrom('team_members as tm')
    .innerJoin('users as u', 'u.id', 'tm.user_id')
    .leftJoin('memberships as m', (j) => j.onRef('m.tenant_id', '=', 'tm.tenant_id').onRef('m.user_id', '=', 'tm.user_id'))
    .select([
      'tm.user_id',
      'tm.position',
      'u.name',
      'm.status',
      'm.presence',
      sql<boolean>`coalesce(m.presence_at > statement_timestamp() - make_interval(secs => ${presenceTtlSeconds}::int), false)`.as('presence_fresh'),
      'm.helpdesk_unavailable',
    ])
    .where('tm.tenant_id', '=', tenantId)
    .where('tm.team_id', '=', teamId)
    .orderBy('tm.position'),
);

/** A person leaving the workspace leaves every rotation with it. */
export async function removeUserEverywhere(db: Executor, tenantId: string, userId: string): Promise<void> {
  await db.deleteFrom('team_members').where('tenant_id', '=', tenantId).where('user_id', '=', userId).execute();
}

export async function teamExists(db: Executor, tenantId: string, teamId: string): Promise<boolean> {
  const row = await db.selectFrom('teams').select('id').where('tenant_id', '=', tenantId).where('id', '=', teamId).executeTakeFirst();
  return row !== undefined;
}
