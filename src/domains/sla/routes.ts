import { defineOperation } from '../../define-operation';
import { createPolicyBody, slaPolicy, slaPolicyList } from './schemas';

export const slaPolicyOperations = [
  defineOperation({
    id: 'list_sla_policies',
    method: 'get',
    path: '/v1/sla-policies',
    summary: 'SLA policies: first response, next reply and resolution targets per priority',
    access: { floor: 'viewer', tag: 'helpdesk-ops', action: 'read' },
    response: { status: 200, description: 'The workspace\'s policies', schema: slaPolicyList },
    handler: async ({ principal }, s) => ({ body: await s.slaPolicies.list(principal) }),
  }),
  defineOperation({
    id: 'create_sla_policy',
    method: 'post',
    path: '/v1/sla-policies',
    summary: 'Create an SLA policy (is_default makes new tickets use it; schedule_id counts its targets in business hours)',
    description:
      'With `schedule_id` the targets are business minutes on that schedule and the resolution clock stops while the ticket is `pending` or `on_hold`; without, calendar minutes that never pause. `next_reply_minutes` (optional): due from the first customer message after an agent reply, met by the next reply.',
    access: { floor: 'admin', tag: 'helpdesk-ops', action: 'write' },
    body: createPolicyBody,
    response: { status: 201, description: 'The new policy', schema: slaPolicy },
    errors: ['schedule_unknown', 'sla_target_unreachable'],
    handler: async ({ principal, body }, s) => ({ status: 201, body: await s.slaPolicies.create(principal, body) }),
  }),
];
