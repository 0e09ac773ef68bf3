import { LRUCache } from 'lru-cache';
import type { Db, Executor } from '../../db';
import type { NewTicketEvent, SlaPolicyRow, TicketRow } from '../../db/types';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import { dueTimes, DEFAULT_SLA_TARGETS, type Priority } from '../sla/targets';
import * as slaStore from '../sla/store';
import { lockTenant } from '../workspaces/store';
import { appendToTimeline } from './timeline';
import type { EventSink } from '../events/types';
import * as store from './store';

/**
 * The ticket's SLA clock: which policy it runs under, when its targets are due, and the check that marks
 * what is overdue (per ticket, and the sweep that runs it every SLA_SWEEP_SECONDS for every workspace with
 * something due). There are no per-ticket timers: a due time is read where it is stored.
 */
export function createTicketSla(deps: {
  db: Db;
  /** Where the breaches' outbound events go (`ticket.sla_breached`); the timeline module writes them. */
  events?: EventSink | undefined;
}) {
  const { db } = deps;

  // Within one transaction the default policy cannot change under us (a new default takes the workspace
  // lock), so a batch of ingested tickets reads it once.
  const defaults = new WeakMap<Executor, Map<string, SlaPolicyRow>>();
  // A policy's targets never change once written (nothing updates or deletes them; a new policy is a new row),
  // so one read by id is good for the life of the process: a priority change costs no policy read.
  const byId = new LRUCache<string, SlaPolicyRow>({ max: 10_000 });

  async function policyFor(tx: Executor, tenantId: string, policyId?: string) {
    if (!policyId) {
      const memo = defaults.get(tx)?.get(tenantId);
      if (memo) return memo;
    } else {
      const known = byId.get(`${tenantId}|${policyId}`);
      if (known) return known;
    }
    const policy = policyId ? await slaStore.getPolicy(tx, tenantId, policyId) : await slaStore.defaultPolicy(tx, tenantId);
    if (policy && policyId) byId.set(`${tenantId}|${policyId}`, policy);
    if (policy && !policyId && tx !== db) {
      if (!defaults.has(tx)) defaults.set(tx, new Map());
      defaults.get(tx)!.set(tenantId, policy);
    }
    if (policy) return policy;
    // A workspace always gets a default policy; this only covers one created before SLA policies existed.
    await lockTenant(tx, tenantId);
    const raced = await slaStore.defaultPolicy(tx, tenantId);
    if (raced) return raced;
    return slaStore.insertPolicy(tx, tenantId, { id: newId(), name: 'Default', is_default: true, targets: DEFAULT_SLA_TARGETS });
  }

  /** A new or reset clock: both targets counted from `from` under the ticket's policy and priority. */
  async function clockFrom(tx: Executor, tenantId: string, policyId: string, priority: Priority, from: Date) {
    const policy = await policyFor(tx, tenantId, policyId);
    return dueTimes(policy.targets, priority, from);
  }

  /** What reopen does to the SLA: every target unmet again, no breach, both timers from `now`. */
  async function restartedClock(tx: Executor, tenantId: string, t: TicketRow, now: Date): Promise<store.TicketUpdate> {
    return {
      solved_at: null,
      first_responded_at: null,
      first_response_breached_at: null,
      resolution_breached_at: null,
      ...(await clockFrom(tx, tenantId, t.sla_policy_id, t.priority, now)),
    };
  }

  /** Marks what is overdue in a workspace (one ticket, or all), appending one sla_breached event per ticket and target. */
  async function check(tenantId: string, ticketId?: string): Promise<number> {
    return db.transaction().execute(async (tx) => {
      const events: Omit<NewTicketEvent, 'tenant_id'>[] = [];
      for (const target of ['first_response', 'resolution'] as const) {
        for (const hit of await store.markBreaches(tx, tenantId, target, ticketId)) {
          events.push({
            id: newId(),
            ticket_id: hit.id,
            kind: 'sla_breached',
            body: '',
            meta: JSON.stringify({ target, due_at: iso(hit.due) }),
            actor_type: 'system',
            actor_user_id: null,
            actor_name: null,
          });
        }
      }
      await appendToTimeline(deps, tx, tenantId, events);
      return events.length;
    });
  }

  /**
   * The sla.sweep job, the one way breaches are found: the workspaces with something due, read from the due
   * indexes in one statement, each checked in a transaction of its own. Workspaces with nothing due cost nothing.
   */
  async function sweepAllTenants(): Promise<{ breached: number; workspaces: number }> {
    let breached = 0;
    const due = await store.crossTenantWithBreachesDue(db);
    for (const tenantId of due) breached += await check(tenantId);
    return { breached, workspaces: due.length };
  }

  return { policyFor, clockFrom, restartedClock, check, sweepAllTenants };
}

export type TicketSla = ReturnType<typeof createTicketSla>;
