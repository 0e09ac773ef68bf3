import { defineOperation } from '../../define-operation';
import { createPolicyBody, slaPolicy, slaPolicyList } from './schemas';

export const slaPolicyOperations = [
  defineOperation({
    id: 'list_sla_policies',
    method: 'get',
    path: '/v1/sla-policies',
    summary: 'SLA policies: first response and resolution targets per priority',
    access: { floor: 'viewer', tag: 'helpdesk-ops', action: 'read' },
    response: { status: 200, description: 'The workspace\'s policies', schema: slaPolicyList },
    handler: async ({ principal }, s) => ({ body: await s.slaPolicies.list(principal) }),
  }),
  defineOperation({
    id: 'create_sla_policy',
    method: 'post',
    path: '/v1/sla-policies',
    summary: 'Create an SLA policy (is_default makes new tickets use it)',
    access: { floor: 'admin', tag: 'helpdesk-ops', action: 'write' },
    body: createPolicyBody,
    response: { status: 201, description: 'The new policy', schema: slaPolicy },
    handler: async ({ principal, body }, s) => ({ status: 201, body: await s.slaPolicies.create(principal, body) }),
  }),
];
