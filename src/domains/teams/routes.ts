import { defineOperation } from '../../define-operation';
import { addTeamMemberBody, assignBody, assignmentResult, createTeamBody, team, teamIdParams, teamList, teamMemberParams } from './schemas';

export const teamOperations = [
  defineOperation({
    id: 'create_team',
    method: 'post',
    path: '/v1/teams',
    summary: 'Create a team',
    access: { floor: 'admin', tag: 'helpdesk-ops', action: 'write' },
    body: createTeamBody,
    response: { status: 201, description: 'The new team', schema: team },
    handler: async ({ principal, body }, s) => ({ status: 201, body: await s.teams.create(principal, body) }),
  }),
  defineOperation({
    id: 'list_teams',
    method: 'get',
    path: '/v1/teams',
    summary: 'Teams with their rotation order',
    access: { floor: 'viewer', tag: 'helpdesk-ops', action: 'read' },
    response: { status: 200, description: 'Teams', schema: teamList },
    handler: async ({ principal }, s) => ({ body: await s.teams.list(principal) }),
  }),
  defineOperation({
    id: 'add_team_member',
    method: 'post',
    path: '/v1/teams/{team_id}/members',
    summary: 'Append a workspace member to the team\'s rotation',
    access: { floor: 'admin', tag: 'helpdesk-ops', action: 'write' },
    params: teamIdParams,
    body: addTeamMemberBody,
    response: { status: 204, description: 'Added at the end of the rotation' },
    errors: ['member_unknown', 'team_member_exists'],
    handler: async ({ principal, params, body }, s) => {
      await s.teams.addMember(principal, params.team_id, body.user_id);
      return { status: 204 };
    },
  }),
  defineOperation({
    id: 'remove_team_member',
    method: 'delete',
    path: '/v1/teams/{team_id}/members/{user_id}',
    summary: 'Take a member out of the rotation',
    access: { floor: 'admin', tag: 'helpdesk-ops', action: 'write' },
    params: teamMemberParams,
    response: { status: 204, description: 'Removed' },
    handler: async ({ principal, params }, s) => {
      await s.teams.removeMember(principal, params.team_id, params.user_id);
      return { status: 204 };
    },
  }),
  defineOperation({
    id: 'team_round_robin_assign',
    method: 'post',
    path: '/v1/teams/{team_id}/assign',
    summary: 'Assign a ticket to the next eligible member of the team (round robin)',
    description:
      'Eligible: active member of the workspace, presence not offline and refreshed within PRESENCE_TTL_SECONDS, helpdesk_unavailable not true. The turn advances in the same transaction. skipped says who was passed over and why.',
    access: { floor: 'editor', tag: 'helpdesk-ingress', action: 'write' },
    params: teamIdParams,
    body: assignBody,
    response: { status: 200, description: 'The assignment', schema: assignmentResult },
    errors: ['no_eligible_member', 'ticket_merged'],
    handler: async ({ principal, params, body }, s) => ({ body: await s.teams.assign(principal, params.team_id, body.ticket_id) }),
  }),
];
