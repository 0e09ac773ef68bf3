import { defineOperation } from '../../define-operation';
import { addMemberBody, listMembersQuery, member, memberList, patchMemberBody, preferencesBody, preferencesResult, presenceBody, presenceResult, userIdParams } from './schemas';

export const memberOperations = [
  defineOperation({
    id: 'list_members',
    method: 'get',
    path: '/v1/members',
    summary: 'List workspace members',
    access: { floor: 'viewer', tag: 'admin-resources', action: 'read' },
    query: listMembersQuery,
    response: { status: 200, description: 'Members of the workspace, oldest membership first', schema: memberList },
    handler: async ({ principal, query }, s) => ({ body: await s.members.list(principal, query) }),
  }),
  defineOperation({
    id: 'add_member',
    method: 'post',
    path: '/v1/members',
    summary: 'Invite a member of this workspace',
    description:
      'Only an owner may grant the owner role. Without realm_subject the member is `invited` until the person signs in with a realm token whose verified email matches; with realm_subject the member is bound to that subject in this workspace only and active at once. Nothing outside this workspace is read or changed.',
    access: { floor: 'admin', tag: 'admin-resources', action: 'write' },
    body: addMemberBody,
    response: { status: 201, description: 'The new membership', schema: member },
    errors: ['member_exists', 'realm_subject_taken'],
    handler: async ({ principal, body }, s) => ({ status: 201, body: await s.members.add(principal, body) }),
  }),
  defineOperation({
    id: 'patch_member',
    method: 'patch',
    path: '/v1/members/{user_id}',
    summary: 'Change a member\'s role or status',
    description:
      'Only an owner may grant or remove the owner role. The last active owner cannot be demoted or deactivated. An invited member\'s status changes only by their first sign-in.',
    access: { floor: 'admin', tag: 'admin-resources', action: 'write' },
    params: userIdParams,
    body: patchMemberBody,
    response: { status: 200, description: 'The membership as it now stands', schema: member },
    errors: ['last_owner', 'member_invited'],
    handler: async ({ principal, params, body }, s) => ({ body: await s.members.patch(principal, params.user_id, body) }),
  }),
  defineOperation({
    id: 'remove_member',
    method: 'delete',
    path: '/v1/members/{user_id}',
    summary: 'Remove a member; keys they created stop working at once',
    access: { floor: 'admin', tag: 'admin-resources', action: 'write' },
    params: userIdParams,
    response: { status: 204, description: 'The membership was removed' },
    errors: ['last_owner'],
    handler: async ({ principal, params }, s) => {
      await s.members.remove(principal, params.user_id);
      return { status: 204 };
    },
  }),
  defineOperation({
    id: 'set_my_presence',
    method: 'put',
    path: '/v1/me/presence',
    summary: 'Set the calling user\'s presence; it goes stale (counts as offline) after PRESENCE_TTL_SECONDS',
    access: { floor: 'viewer', tag: 'helpdesk-ops', action: 'write' },
    body: presenceBody,
    response: { status: 200, description: 'Presence as stored', schema: presenceResult },
    handler: async ({ principal, body }, s) => ({ body: await s.members.setPresence(principal, body.presence) }),
  }),
  defineOperation({
    id: 'patch_my_preferences',
    method: 'patch',
    path: '/v1/me/preferences',
    summary: 'Set the calling user\'s helpdesk preferences',
    access: { floor: 'viewer', tag: 'helpdesk-ops', action: 'write' },
    body: preferencesBody,
    response: { status: 200, description: 'Preferences as stored', schema: preferencesResult },
    handler: async ({ principal, body }, s) => ({ body: await s.members.setPreferences(principal, body) }),
  }),
];
