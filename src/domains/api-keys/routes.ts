import { defineOperation } from '../../define-operation';
import { apiKeyList, createApiKeyBody, createdApiKey, keyIdParams, listApiKeysQuery, revokeResult } from './schemas';

export const apiKeyOperations = [
  defineOperation({
    id: 'create_api_key',
    method: 'post',
    path: '/v1/api-keys',
    summary: 'Mint an API key',
    description:
      'The secret is returned exactly once, in this response. The key acts as its creator: its reach is its scopes intersected with the creator\'s live role.',
    access: { floor: 'admin', tag: 'admin-resources', action: 'write' },
    body: createApiKeyBody,
    secretInAnswer: true,
    response: { status: 201, description: 'The new key, with its secret', schema: createdApiKey },
    errors: ['scope_invalid', 'agent_unknown'],
    handler: async ({ principal, body }, s) => ({ status: 201, body: await s.apiKeys.create(principal, body) }),
  }),
  defineOperation({
    id: 'list_api_keys',
    method: 'get',
    path: '/v1/api-keys',
    summary: 'List API keys (never their secrets)',
    access: { floor: 'admin', tag: 'admin-resources', action: 'read' },
    query: listApiKeysQuery,
    response: { status: 200, description: 'The workspace\'s keys, newest first', schema: apiKeyList },
    handler: async ({ principal, query }, s) => ({ body: await s.apiKeys.list(principal, query.include_revoked) }),
  }),
  defineOperation({
    id: 'revoke_api_key',
    method: 'post',
    path: '/v1/api-keys/{key_id}/revoke',
    summary: 'Revoke an API key, effective from the next request',
    access: { floor: 'admin', tag: 'admin-resources', action: 'write' },
    params: keyIdParams,
    response: { status: 200, description: 'The key is now dead', schema: revokeResult },
    handler: async ({ principal, params }, s) => ({ body: await s.apiKeys.revoke(principal, params.key_id) }),
  }),
  defineOperation({
    id: 'delete_api_key',
    method: 'delete',
    path: '/v1/api-keys/{key_id}',
    summary: 'Delete an API key and its record',
    access: { floor: 'admin', tag: 'admin-resources', action: 'write' },
    params: keyIdParams,
    response: { status: 204, description: 'The key was removed' },
    handler: async ({ principal, params }, s) => {
      await s.apiKeys.remove(principal, params.key_id);
      return { status: 204 };
    },
  }),
];
