import type { Db } from '../../db';
import type { SlaPolicyRow } from '../../db/types';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import { lockTenant } from '../workspaces/store';
import type { CreatePolicyInput } from './schemas';
import * as store from './store';

const present = (p: SlaPolicyRow) => ({ id: p.id, name: p.name, is_default: p.is_default, targets: p.targets, created_at: iso(p.created_at) });

export function createSlaPolicyService(deps: { db: Db }) {
  const { db } = deps;
  return {
    async list(actor: Principal) {
      return { sla_policies: (await store.listPolicies(db, actor.tenantId)).map(present) };
    },
    /** A new default replaces the old one; tickets keep the policy they were opened under. */
    create: (actor: Principal, input: CreatePolicyInput) =>
      db.transaction().execute(async (tx) => {
        if (input.is_default) {
          // Two new defaults at once take turns, so the second sees (and clears) the first.
          await lockTenant(tx, actor.tenantId);
          await store.clearDefault(tx, actor.tenantId);
        }
        return present(await store.insertPolicy(tx, actor.tenantId, { id: newId(), ...input }));
      }),
  };
}

export type SlaPolicyService = ReturnType<typeof createSlaPolicyService>;
