import type { Db, Executor } from '../../db';
import type { Role } from '../../db/types';
import { insufficientRole, isUniqueViolation, notFound, refuse } from '../../lib/errors';
import { roleAtLeast } from '../identity/roles';
import { pageOf, type Cursor } from '../../lib/paging';
import { MEMBER_SORT } from './schemas';
import type { ApiKeyService } from '../api-keys/service';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import type { AuditService } from '../audit/service';
import type { AddMemberInput, PatchMemberInput } from './schemas';
import * as store from './store';
import { lockTenant } from '../workspaces/store';
import * as teamStore from '../teams/store';

const present = (m: store.MemberRow) => ({
  user_id: m.user_id,
  email: m.email,
  name: m.name,
  role: m.role,
  status: m.status,
  realm_subject: m.realm_subject,
  created_at: iso(m.created_at),
  updated_at: iso(m.updated_at),
});


const subjectTaken = () => refuse('realm_subject_taken', 'This realm subject is already bound to another member of this workspace.');

/**
 * Creates the person this workspace invites and their membership, reading and writing nothing outside the
 * workspace: the user row is new for every invitation (name and email as this admin typed them), so no
 * other workspace's view of a person is reused or revealed. Without a realm subject the membership waits as
 * `invited` until its person signs in with a verified email; with one (an admin provisioning from their own
 * identity realm) it is bound to that subject in this workspace only and active at once.
 */
async function createMembership(
  tx: Executor,
  tenantId: string,
  input: { email: string; name: string; role: Role; realm_subject?: string | undefined },
) {
  if (await store.memberEmailTaken(tx, tenantId, input.email)) {
    throw refuse('member_exists', 'This workspace already has a member with this email.');
  }
  const subject = input.realm_subject ?? null;
  if (subject !== null && (await store.memberSubjectTaken(tx, tenantId, subject))) throw subjectTaken();
  const user = await store.insertUser(tx, { id: newId(), email: input.email, name: input.name });
  try {
    await store.insertMembership(tx, tenantId, user.id, {
      role: input.role,
      status: subject === null ? 'invited' : 'active',
      realm_subject: subject,
    });
  } catch (err) {
    // A first sign-in binds subjects without the workspace lock; the unique index settles that race.
    if (isUniqueViolation(err)) throw subjectTaken();
    throw err;
  }
  return user;
}

function requireOwnerFor(actorRole: Role, touchesOwner: boolean): void {
  if (touchesOwner && actorRole !== 'owner') throw insufficientRole('owner');
}

export function createMemberService(deps: { db: Db; audit: AuditService; apiKeys: ApiKeyService }) {
  const { db, audit, apiKeys } = deps;

  /**
   * Locks the workspace and re-reads the caller's own role under that lock: the role authentication saw may
   * have been changed by a concurrent request (an owner demoted mid-flight must not act as an owner).
   */
  async function lockAsActor(tx: Executor, actor: Principal): Promise<Role> {
    await lockTenant(tx, actor.tenantId);
    const me = await store.getMember(tx, actor.tenantId, actor.userId);
    if (!me) throw notFound('workspace');
    if (me.status !== 'active') throw refuse('member_deactivated', 'Your membership in this workspace is deactivated.');
    if (!roleAtLeast(me.role, 'admin')) throw insufficientRole('admin');
    return me.role;
  }

  async function loadLocked(tx: Executor, actor: Principal, userId: string) {
    const actorRole = await lockAsActor(tx, actor);
    const current = await store.getMember(tx, actor.tenantId, userId);
    if (!current) throw notFound('member');
    return { current, actorRole };
  }

  async function guardLastOwner(tx: Executor, tenantId: string, target: store.MemberRow, losesOwner: boolean) {
    if (losesOwner && target.role === 'owner' && target.status === 'active' && (await store.countActiveOwners(tx, tenantId)) <= 1) {
      throw refuse('last_owner', 'The workspace must keep at least one active owner.');
    }
  }

  return {
    /** The caller's own presence; refreshing it (even to the same value) restarts the staleness clock. */
    async setPresence(actor: Principal, presence: 'online' | 'away' | 'offline') {
      const row = await store.setPresence(db, actor.tenantId, actor.userId, presence);
      return { presence: row.presence, refreshed_at: iso(row.presence_at!) };
    },

    async setPreferences(actor: Principal, prefs: { helpdesk_unavailable?: boolean }) {
      return store.setPreferences(db, actor.tenantId, actor.userId, prefs);
    },

    async list(actor: Principal, page: { limit: number; after?: Cursor }) {
      const rows = await store.listMembers(db, actor.tenantId, page);
      return pageOf('members', rows, page.limit, MEMBER_SORT, present, (m) => m.user_id);
    },

    add: (actor: Principal, input: AddMemberInput) =>
      db.transaction().execute(async (tx) => {
        requireOwnerFor(await lockAsActor(tx, actor), input.role === 'owner');
        const user = await createMembership(tx, actor.tenantId, input);
        await audit.record(tx, actor, 'member.added', { type: 'user', id: user.id }, { email: user.email, role: input.role });
        return present((await store.getMember(tx, actor.tenantId, user.id))!);
      }),

    patch: (actor: Principal, userId: string, input: PatchMemberInput) =>
      db.transaction().execute(async (tx) => {
        const { current, actorRole } = await loadLocked(tx, actor, userId);
        const nextRole: Role = input.role ?? current.role;
        // An invitation becomes active only by its person's sign-in; an admin may change its role only.
        if (current.status === 'invited' && input.status !== undefined) {
          throw refuse('member_invited', 'This member has not signed in yet; only their role can be changed.');
        }
        requireOwnerFor(actorRole, current.role === 'owner' || nextRole === 'owner');
        await guardLastOwner(tx, actor.tenantId, current, nextRole !== 'owner' || input.status === 'deactivated');
        await store.updateMembership(tx, actor.tenantId, userId, input);
        await audit.record(tx, actor, 'member.updated', { type: 'user', id: userId }, {
          before: { role: current.role, status: current.status },
          after: { role: nextRole, status: input.status ?? current.status },
        });
        return present((await store.getMember(tx, actor.tenantId, userId))!);
      }),

    remove: (actor: Principal, userId: string) =>
      db.transaction().execute(async (tx) => {
        const { current, actorRole } = await loadLocked(tx, actor, userId);
        requireOwnerFor(actorRole, current.role === 'owner');
        await guardLastOwner(tx, actor.tenantId, current, true);
        await store.deleteMembership(tx, actor.tenantId, userId);
        // Removal kills the person's keys for good: re-adding them later must not bring old keys back.
        await apiKeys.revokeAllCreatedBy(tx, actor, userId, 'creator_removed');
        await teamStore.removeUserEverywhere(tx, actor.tenantId, userId);
        await audit.record(tx, actor, 'member.removed', { type: 'user', id: userId }, { email: current.email, role: current.role });
      }),
  };
}

export type MemberService = ReturnType<typeof createMemberService>;
