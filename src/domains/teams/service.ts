import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import { DomainError, notFound, refuse } from '../../lib/errors';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import type { TicketCommands } from '../tickets/commands';
import type { SKIP_REASONS } from './schemas';
import * as store from './store';
import * as memberStore from '../members/store';

type SkipReason = (typeof SKIP_REASONS)[number];

/** Why a member cannot take this turn, or null when they can. Evaluated at call time, inside the lock. */
export function ineligibility(m: store.RotationEntry): SkipReason | null {
  if (m.status === null) return 'not_a_member';
  if (m.status === 'invited') return 'invited';
  if (m.status !== 'active') return 'deactivated';
  if (m.helpdesk_unavailable) return 'unavailable';
  if (m.presence === 'offline') return 'offline';
  if (!m.presence_fresh) return 'presence_stale';
  return null;
}

export function createTeamService(deps: { db: Db; config: ConfigSection<'tickets'>; tickets: Pick<TicketCommands, 'userActor' | 'lockForChange' | 'assign' | 'afterAnswer'> }) {
  const { db, config, tickets } = deps;

  return {
    async create(actor: Principal, input: { name: string }) {
      const row = await store.insertTeam(db, actor.tenantId, { id: newId(), name: input.name });
      return { id: row.id, name: row.name, members: [], created_at: iso(row.created_at) };
    },

    async list(actor: Principal) {
      const teams = await store.listTeams(db, actor.tenantId);
      const members = await store.listTeamMembers(db, actor.tenantId, teams.map((t) => t.id));
      return {
        teams: teams.map((t) => ({
          id: t.id,
          name: t.name,
          members: members.filter((m) => m.team_id === t.id).map((m) => ({ user_id: m.user_id, name: m.name, position: Number(m.position) })),
          created_at: iso(t.created_at),
        })),
      };
    },

    addMember: (actor: Principal, teamId: string, userId: string) =>
      db.transaction().execute(async (tx) => {
        // Appends take turns on the team row so two adds never compute the same position.
        if (!(await store.lockTeam(tx, actor.tenantId, teamId))) throw notFound('team');
        if (!(await memberStore.getMember(tx, actor.tenantId, userId))) throw refuse('member_unknown', 'The user is not a member of this workspace.', [{ path: 'body.user_id', message: 'not a member' }]);
        if (!(await store.appendMember(tx, actor.tenantId, teamId, userId))) throw refuse('team_member_exists', 'The user is already in this team.');
      }),

    async removeMember(actor: Principal, teamId: string, userId: string) {
      if (!(await store.removeMember(db, actor.tenantId, teamId, userId))) throw notFound('team member');
    },

    /**
     * Round robin: the next eligible member after the one chosen last. The team row is locked for the whole
     * transaction and the cursor moves in it, so concurrent calls take strict turns and never pick the same
     * member while enough eligible members exist.
     */
    async assign(actor: Principal, teamId: string, ticketId: string) {
      const outcome = await db.transaction().execute(async (tx) => {
        // Everything that does not need the team lock comes first, the ticket's own lock included: the team lock
        // is what every caller of this team queues on, so it is held for as few round trips as possible. Every
        // assignment locks its ticket before its team, so two of them cannot deadlock.
        const by = await tickets.userActor(tx, actor);
        const ticket = await tickets.lockForChange(tx, actor.tenantId, ticketId);
        const team = await store.lockTeam(tx, actor.tenantId, teamId);
        if (!team) throw notFound('team');
        const members = await store.rotation(tx, actor.tenantId, teamId, config.PRESENCE_TTL_SECONDS);
        const cursor = Number(team.rr_last_position);
        const order = [...members.filter((m) => Number(m.position) > cursor), ...members.filter((m) => Number(m.position) <= cursor)];
        const skipped: { user_id: string; reason: SkipReason }[] = [];
        let chosen: store.RotationEntry | undefined;
        for (const m of order) {
          const reason = ineligibility(m);
          if (reason === null) {
            chosen = m;
            break;
          }
          skipped.push({ user_id: m.user_id, reason });
        }
        if (!chosen) {
          throw new DomainError('no_eligible_member', 'No member of this team can take the ticket now; it was not assigned.', {
            errors: skipped.map((s) => ({ path: s.user_id, message: s.reason })),
          });
        }
        await store.setCursor(tx, actor.tenantId, teamId, Number(chosen.position));
        const eventId = await tickets.assign(tx, actor.tenantId, by, ticket, teamId, chosen.user_id, { via: 'round_robin', skipped });
        return { result: { assignee_id: chosen.user_id, assignee_name: chosen.name, ticket_id: ticketId, team_id: teamId, skipped }, eventId };
      });
      await tickets.afterAnswer(actor.tenantId, ticketId, { trigger: { event: 'ticket.updated', eventId: outcome.eventId } });
      return outcome.result;
    },
  };
}

export type TeamService = ReturnType<typeof createTeamService>;
