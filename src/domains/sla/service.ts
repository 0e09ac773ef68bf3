import type { Db } from '../../db';
import type { SlaPolicyRow } from '../../db/types';
import type { Principal } from '../identity/principal';
import { refuse } from '../../lib/errors';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import { lockTenant } from '../workspaces/store';
import { reachable } from '../schedules/business-time';
import { clockOf } from '../schedules/clocks';
import * as schedules from '../schedules/store';
import type { CreatePolicyInput } from './schemas';
import { longestTarget } from './targets';
import * as store from './store';

const present = (p: SlaPolicyRow) => ({
  id: p.id,
  name: p.name,
  is_default: p.is_default,
  targets: p.targets,
  ...(p.schedule_id ? { schedule_id: p.schedule_id } : {}),
  created_at: iso(p.created_at),
});

export function createSlaPolicyService(deps: { db: Db }) {
  const { db } = deps;
  return {
    async list(actor: Principal) {
      return { sla_policies: (await store.listPolicies(db, actor.tenantId)).map(present) };
    },
    /**
     * A new default replaces the old one; tickets keep the policy they were opened under. A policy naming a schedule
     * must be able to meet its longest target on it within ten years (a year's minutes on an hour a week cannot).
     */
    create: (actor: Principal, input: CreatePolicyInput) =>
      db.transaction().execute(async (tx) => {
        if (input.schedule_id) {
          // Share-locked: the schedule cannot be deleted or changed under the policy being written.
          const schedule = await schedules.scheduleForClock(tx, actor.tenantId, input.schedule_id);
          if (!schedule) throw refuse('schedule_unknown', `No schedule ${input.schedule_id} in this workspace.`, [{ path: 'body.schedule_id', message: 'unknown schedule' }]);
          const clock = clockOf(schedule);
          const longest = longestTarget(input.targets);
          if (!reachable(clock, new Date(), longest)) {
            throw refuse('sla_target_unreachable', `The schedule gives ${clock.weeklyMinutes} business minutes a week; a target of ${longest} minutes could not be met within 10 years.`, [
              { path: 'body.targets', message: 'unreachable on this schedule' },
            ]);
          }
        }
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
