import { z } from 'zod';
import type { Db } from '../../db';
import type { SlaPolicyRow } from '../../db/types';
import { defineOperation } from '../../http/operation';
import type { Principal } from '../../http/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import { slaTargets } from './sla';
import * as slaStore from './sla-store';

const policy = z.object({ id: z.uuid(), name: z.string(), is_default: z.boolean(), targets: slaTargets, created_at: z.string() });
const createPolicyBody = z.strictObject({ name: z.string().trim().min(1).max(120), targets: slaTargets, is_default: z.boolean().default(false) });

const present = (p: SlaPolicyRow) => ({ id: p.id, name: p.name, is_default: p.is_default, targets: p.targets, created_at: iso(p.created_at) });

export function createSlaPolicyService(deps: { db: Db }) {
  const { db } = deps;
  return {
    async list(actor: Principal) {
      return { sla_policies: (await slaStore.listPolicies(db, actor.tenantId)).map(present) };
    },
    /** A new default replaces the old one in the same transaction; tickets keep the policy they were opened under. */
    create: (actor: Principal, input: z.output<typeof createPolicyBody>) =>
      db.transaction().execute(async (tx) => {
        if (input.is_default) await slaStore.clearDefault(tx, actor.tenantId);
        return present(await slaStore.insertPolicy(tx, actor.tenantId, { id: newId(), ...input }));
      }),
  };
}

export const slaPolicyOperations = [
  defineOperation({
    id: 'list_sla_policies',
    method: 'get',
    path: '/v1/sla-policies',
    summary: 'SLA policies: first response and resolution targets per priority',
    access: { floor: 'viewer', tag: 'helpdesk-ops', action: 'read' },
    response: { status: 200, description: 'The workspace\'s policies', schema: z.object({ sla_policies: z.array(policy) }) },
    handler: async ({ principal }, s) => ({ body: await s.slaPolicies.list(principal) }),
  }),
  defineOperation({
    id: 'create_sla_policy',
    method: 'post',
    path: '/v1/sla-policies',
    summary: 'Create an SLA policy (is_default makes new tickets use it)',
    access: { floor: 'admin', tag: 'helpdesk-ops', action: 'write' },
    body: createPolicyBody,
    response: { status: 201, description: 'The new policy', schema: policy },
    handler: async ({ principal, body }, s) => ({ status: 201, body: await s.slaPolicies.create(principal, body) }),
  }),
];
