import { defineOperation } from '../../define-operation';
import { agent, agentList, createAgentBody } from './schemas';

export const agentOperations = [
  defineOperation({
    id: 'create_agent',
    method: 'post',
    path: '/v1/agents',
    summary: 'Create an agent (an automated actor keys can be bound to with agent_id)',
    access: { floor: 'admin', tag: 'admin-resources', action: 'write' },
    body: createAgentBody,
    response: { status: 201, description: 'The new agent', schema: agent },
    handler: async ({ principal, body }, s) => ({ status: 201, body: await s.agents.create(principal, body) }),
  }),
  defineOperation({
    id: 'list_agents',
    method: 'get',
    path: '/v1/agents',
    summary: 'List agents (a key bound to agent:<uuid> sees only its agents)',
    access: { floor: 'viewer', tag: 'admin-resources', action: 'read' },
    response: { status: 200, description: 'Agents of the workspace', schema: agentList },
    handler: async ({ principal }, s) => ({ body: await s.agents.list(principal) }),
  }),
];
