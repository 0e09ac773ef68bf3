import { performance } from 'node:perf_hooks';
import { LRUCache } from 'lru-cache';
import type { Db, Executor } from '../../db';
import type { NewTicketEvent, SlaPolicyRow, TicketRow, TicketStatus } from '../../db/types';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import { dueTimes, DEFAULT_SLA_TARGETS, type Priority, type SlaTargets } from '../sla/targets';
import * as slaStore from '../sla/store';
import { addBusinessMinutes, businessMinutesBetween, type BusinessClock } from '../schedules/business-time';
import { clockOf } from '../schedules/clocks';
import * as scheduleStore from '../schedules/store';
import { lockTenant } from '../workspaces/store';
import { appendToTimeline, type TimelineWatcher } from './timeline';
import type { EventSink } from '../events/types';
import { SLA_LIVE } from './status';
import * as store from './store';

/**
 * Statuses in which a business-time resolution clock stands still: the customer has the ball (Zendesk's
 * "requester wait time"). Calendar policies never pause, as before issue 37.
 */
export const PAUSING: readonly TicketStatus[] = ['pending', 'on_hold'];

/** How many times a recompute batch is tried again when its statement deadlocks with a ticket write. */
const DEADLOCK_RETRIES = 3;

/** What a due time is recomputed from: the ticket's clock, as its row keeps it. */
export type DueBasis = store.DueBasis;

/**
 * A ticket's due times on `clock` for its policy's `targets`, from its row alone (issue 37): what a schedule change
 * recomputes. A target met, breached or not running keeps its due time. The first response counts from the clock's
 * start (reopen or creation); the resolution from where it last started running (a resume, a restart) with the
 * minutes it had counted before taken off, and not at all while paused (its minutes left are business minutes,
 * whatever the hours); the next reply from the customer message that started it.
 */
export function recomputedDues(t: DueBasis, targets: SlaTargets, clock: BusinessClock) {
  const target = targets[t.priority];
  const start = t.reopened_at ?? t.created_at;
  const first = t.first_responded_at === null && t.first_response_breached_at === null ? addBusinessMinutes(clock, start, target.first_response_minutes) : t.first_response_due;
  const left = target.resolution_minutes - t.resolution_elapsed_minutes;
  const resolution =
    t.solved_at === null && t.resolution_breached_at === null && t.resolution_paused_at === null && left > 0
      ? addBusinessMinutes(clock, t.resolution_resumed_at ?? start, left)
      : t.resolution_due;
  const next =
    t.next_reply_due !== null && t.next_reply_from !== null && t.next_reply_breached_at === null && target.next_reply_minutes
      ? addBusinessMinutes(clock, t.next_reply_from, target.next_reply_minutes)
      : t.next_reply_due;
  return { first_response_due: first, resolution_due: resolution, next_reply_due: next };
}

/**
 * The ticket's SLA clock: which policy it runs under, when its targets are due, and the check that marks
 * what is overdue (per ticket, and the sweep that runs it every SLA_SWEEP_SECONDS for every workspace with
 * something due). There are no per-ticket timers: a due time is read where it is stored. A policy that names a
 * schedule counts business minutes on it (issue 37; src/domains/schedules/business-time.ts), pauses the resolution
 * clock in PAUSING, and a schedule change moves its open tickets' due times (`recomputeSchedule`, the workers').
 */
export function createTicketSla(deps: {
  db: Db;
  /** Where the breaches' outbound events go (`ticket.sla_breached`); the timeline module writes them. */
  events?: EventSink | undefined;
  /** Told about the events the SLA check appends (issue 37). */
  reports?: TimelineWatcher | undefined;
}) {
  const { db } = deps;

  // Within one transaction the default policy cannot change under us (a new default takes the workspace
  // lock), so a batch of ingested tickets reads it once.
  const defaults = new WeakMap<Executor, Map<string, SlaPolicyRow>>();
  // A policy's targets and schedule never change once written (nothing updates or deletes them; a new policy is a
  // new row), so one read by id is good for the life of the process: a priority change costs no policy read.
  const byId = new LRUCache<string, SlaPolicyRow>({ max: 10_000 });
  // A schedule does change (its hours, holidays): it is read once per transaction, share-locked (see clockFor).
  const clocks = new WeakMap<Executor, Map<string, BusinessClock>>();

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

  /**
   * What a policy's targets count on: null (calendar minutes) without a schedule, else the schedule as it stands,
   * share-locked until the transaction ends, so a change of the schedule waits for this write and the recompute
   * it queues sees what this write computed. Calendar policies read nothing.
   */
  async function clockFor(tx: Executor, tenantId: string, policy: SlaPolicyRow): Promise<BusinessClock> {
    if (!policy.schedule_id) return null;
    const key = `${tenantId}|${policy.schedule_id}`;
    const memo = clocks.get(tx)?.get(key);
    if (memo !== undefined) return memo;
    // The foreign key keeps a policy's schedule in place.
    const row = await scheduleStore.scheduleForClock(tx, tenantId, policy.schedule_id);
    const clock = row ? clockOf(row) : null;
    if (tx !== db) {
      if (!clocks.has(tx)) clocks.set(tx, new Map());
      clocks.get(tx)!.set(key, clock);
    }
    return clock;
  }

  /** A new or reset clock: both targets counted from `from` under the ticket's policy and priority. */
  async function clockFrom(tx: Executor, tenantId: string, policyId: string, priority: Priority, from: Date) {
    const policy = await policyFor(tx, tenantId, policyId);
    return dueTimes(policy.targets, priority, from, await clockFor(tx, tenantId, policy));
  }

  /** What reopen does to the SLA: every target unmet again, no breach, no pause, both timers from `now`. */
  async function restartedClock(tx: Executor, tenantId: string, t: TicketRow, now: Date): Promise<store.TicketUpdate> {
    return {
      solved_at: null,
      first_responded_at: null,
      first_response_breached_at: null,
      resolution_breached_at: null,
      next_reply_due: null,
      next_reply_from: null,
      next_reply_breached_at: null,
      resolution_paused_at: null,
      resolution_remaining_minutes: null,
      // The resolution clock runs from now (a recompute counts from here, not from the ticket's creation).
      resolution_resumed_at: now,
      resolution_elapsed_minutes: 0,
      ...(await clockFrom(tx, tenantId, t.sla_policy_id, t.priority, now)),
    };
  }

  /**
   * What a change of status or priority does to the clock, as the fields to write. A new priority moves the targets
   * not yet met or breached (the first response from the clock's start, the resolution from where it last started
   * running, less what it had counted). On a business-time policy, entering pending or on_hold stops the resolution
   * clock with the business minutes it had left (negative when already overdue); leaving them starts it again from
   * now with those minutes (a clock already overdue keeps its due time). The first response never pauses.
   */
  async function afterChange(tx: Executor, tenantId: string, t: TicketRow, to: { status: TicketStatus; priority: Priority }, now: Date): Promise<store.TicketUpdate> {
    const policy = await policyFor(tx, tenantId, t.sla_policy_id);
    const clock = await clockFor(tx, tenantId, policy);
    const target = policy.targets[to.priority];
    const start = t.reopened_at ?? t.created_at;
    const update: store.TicketUpdate = {};
    let due = t.resolution_due;
    let left = t.resolution_remaining_minutes;
    if (to.priority !== t.priority) {
      if (t.first_responded_at === null && t.first_response_breached_at === null) update.first_response_due = addBusinessMinutes(clock, start, target.first_response_minutes);
      if (t.solved_at === null && t.resolution_breached_at === null) {
        if (t.resolution_paused_at !== null) {
          // Paused: what is left grows or shrinks with the target; it runs when the ticket leaves the pause.
          left = (left ?? 0) + target.resolution_minutes - policy.targets[t.priority].resolution_minutes;
          update.resolution_remaining_minutes = left;
        } else {
          due = addBusinessMinutes(clock, t.resolution_resumed_at ?? start, target.resolution_minutes - t.resolution_elapsed_minutes);
          update.resolution_due = due;
        }
      }
      if (t.next_reply_due !== null && t.next_reply_from !== null && t.next_reply_breached_at === null) {
        update.next_reply_due = target.next_reply_minutes ? addBusinessMinutes(clock, t.next_reply_from, target.next_reply_minutes) : null;
      }
    }
    if (clock !== null && t.solved_at === null) {
      const pausing = PAUSING.includes(to.status);
      if (t.resolution_paused_at === null && pausing) {
        update.resolution_paused_at = now;
        update.resolution_remaining_minutes = Math.round(businessMinutesBetween(clock, now, due));
      } else if (t.resolution_paused_at !== null && !pausing) {
        const minutes = left ?? 0;
        if (minutes > 0) {
          update.resolution_due = addBusinessMinutes(clock, now, minutes);
          update.resolution_resumed_at = now;
          update.resolution_elapsed_minutes = target.resolution_minutes - minutes;
        }
        update.resolution_paused_at = null;
        update.resolution_remaining_minutes = null;
      }
    }
    return update;
  }

  /**
   * A customer wrote on these tickets: each that owes no next reply yet, is live, has had an agent's reply and runs
   * under a policy with a next-reply target starts its next-reply clock now, in one statement.
   */
  async function startNextReplies(tx: Executor, tenantId: string, tickets: TicketRow[], now: Date): Promise<void> {
    const starts: { id: string; due: Date }[] = [];
    const seen = new Set<string>();
    for (const t of tickets) {
      if (seen.has(t.id) || !SLA_LIVE.includes(t.status) || t.first_responded_at === null || t.next_reply_due !== null) continue;
      seen.add(t.id);
      const policy = await policyFor(tx, tenantId, t.sla_policy_id);
      const minutes = policy.targets[t.priority].next_reply_minutes;
      if (!minutes) continue;
      starts.push({ id: t.id, due: addBusinessMinutes(await clockFor(tx, tenantId, policy), now, minutes) });
    }
    await store.startNextReplies(tx, tenantId, starts, now);
  }

  /** Marks what is overdue in a workspace (one ticket, or all), appending one sla_breached event per ticket and target. */
  async function check(tenantId: string, ticketId?: string): Promise<number> {
    return db.transaction().execute(async (tx) => {
      const events: Omit<NewTicketEvent, 'tenant_id'>[] = [];
      for (const target of ['first_response', 'next_reply', 'resolution'] as const) {
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

  /**
   * The schedules.recompute job (issue 37): every open ticket of every policy counting on the schedule gets the due
   * times the schedule gives now. Read by keyset in batches of `batch` (no lock), computed here, and written back with
   * one statement per batch that re-checks each row (still open, its clock as read): a ticket solved, replied to or
   * re-prioritised meanwhile was written by a transaction that computed its own due times, and is left alone. A
   * batch holds its rows' locks for its one statement; the job is idempotent, so a retry or a repeat is harmless.
   */
  async function recomputeSchedule(
    tenantId: string,
    scheduleId: string,
    // `onStatement`: each write's time and rows (the bench reads the longest lock held from it).
    opts: { batch?: number; onStatement?: (s: { ms: number; rows: number }) => void } = {},
  ): Promise<{ read: number; rewritten: number; statements: number }> {
    const batch = opts.batch ?? 1000;
    const row = await scheduleStore.getSchedule(db, tenantId, scheduleId);
    const out = { read: 0, rewritten: 0, statements: 0 };
    if (!row) return out;
    const clock = clockOf(row);
    for (const policy of await slaStore.policiesOnSchedule(db, tenantId, scheduleId)) {
      let after: string | null = null;
      for (;;) {
        const tickets = await store.openTicketsOfPolicy(db, tenantId, policy.id, after, batch);
        if (tickets.length === 0) break;
        out.read += tickets.length;
        const rewrites: store.DueRewrite[] = [];
        for (const t of tickets) {
          const dues = recomputedDues(t, policy.targets, clock);
          const same = (a: Date | null, b: Date | null) => (a === null ? b === null : b !== null && a.getTime() === b.getTime());
          if (same(dues.first_response_due, t.first_response_due) && same(dues.resolution_due, t.resolution_due) && same(dues.next_reply_due, t.next_reply_due)) continue;
          rewrites.push({ was: t, ...dues });
        }
        if (rewrites.length > 0) {
          out.statements += 1;
          for (let attempt = 1; ; attempt++) {
            try {
              const started = performance.now();
              const rows = await store.rewriteDueTimes(db, tenantId, rewrites);
              opts.onStatement?.({ ms: performance.now() - started, rows });
              out.rewritten += rows;
              break;
            } catch (err) {
              // Two writers locking the same rows in different orders: PostgreSQL stops one; this batch tries again.
              if ((err as { code?: string }).code !== '40P01' || attempt > DEADLOCK_RETRIES) throw err;
            }
          }
        }
        after = tickets[tickets.length - 1]!.id;
        if (tickets.length < batch) break;
      }
    }
    return out;
  }

  return { policyFor, clockFor, clockFrom, restartedClock, afterChange, startNextReplies, check, sweepAllTenants, recomputeSchedule };
}

export type TicketSla = ReturnType<typeof createTicketSla>;
