import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { Db } from '../../db';
import type { MacroRow } from '../../db/types';
import { iso } from '../../lib/time';
import type { QueueHub } from '../../queue/hub';
import type { NewEvent, TicketCommands } from '../tickets/commands';
import { checkTicketFilters } from '../tickets/filters';
import { macroAction, TIME_EVENT, timeCondition, type TimeCondition } from './schemas';
import type { MacroService } from './service';
import * as store from './store';

/**
 * Time-based rules (issue 37): macros whose trigger is a time condition ("pending for 3 days → solve",
 * "unassigned for 30 minutes → escalate"), fired by a sweep every minute. docs/decisions/time-rules.md has the
 * reasons; the shape:
 *
 * - `rules.sweep` (every minute) queues one `rules.run` per enabled time rule of every workspace, so the rules
 *   spread over every worker process, named by the minute so the same minute's is queued once.
 * - `rules.run` takes the rule's qualifying tickets in batches (in anchor order by keyset; at most
 *   TIME_RULE_BATCH_SIZE, each sized from the last one's cost to last about TIME_RULE_BATCH_MS), each batch ONE
 *   transaction: lock the batch FOR UPDATE SKIP LOCKED, insert its firings ON CONFLICT DO NOTHING,
 *   apply the rule's actions to exactly the tickets whose firing went in (the macro apply path: the timeline gets
 *   the changes and a `rule_fired` event, the outbound events go out with them), commit. No ticket is locked
 *   longer than its batch; a ticket someone else holds is left to the next sweep, never waited for.
 * - Exactly once per (rule, ticket, stretch): the firing's primary key. A second worker or a retried job reaching
 *   the same ticket inserts nothing and applies nothing; a worker killed mid-batch commits nothing of it.
 * - A run stops after RUN_BUDGET_MS, under the sweep's minute: a rule with a huge backlog is continued by the next
 *   minute's job (on whichever worker takes it) instead of one job holding a slot for as long as it takes.
 */

/** How long one `rules.run` keeps taking batches (the next minute's job continues a rule with more). */
const RUN_BUDGET_MS = 50_000;

/** A run's first batch: small, so the run learns what a ticket costs before it locks many. */
const FIRST_BATCH = 50;

/**
 * The next batch's size: scaled from what the last batch cost so that a batch, and so every lock it takes, lasts
 * about `targetMs`; growing at most twofold from one batch to the next, at least 1, at most `max`. A ticket's cost
 * is not the sweep's to choose (the apply path, the timeline's listeners, the load on the database); the time a
 * ticket stays locked is.
 */
export function nextBatchSize(size: number, ms: number, targetMs: number, max: number): number {
  const scaled = ms > 0 ? Math.floor((size * targetMs) / ms) : max;
  return Math.max(1, Math.min(max, size * 2, scaled));
}

/** A time rule as the sweep runs it, read from its macro row; null when the macro is not one (or no longer is). */
export function ruleOf(macro: Pick<MacroRow, 'trigger' | 'actions'>) {
  const trigger = macro.trigger as { event?: unknown; conditions?: Record<string, unknown>; time?: unknown } | null;
  if (trigger?.event !== TIME_EVENT) return null;
  const time = timeCondition.safeParse(trigger.time);
  if (!time.success) return null;
  const parsed = macroAction.array().safeParse(macro.actions);
  const t: TimeCondition = time.data;
  return {
    time: t,
    anchor: (t.hours_since ?? t.hours_until)!,
    direction: t.hours_since !== undefined ? ('since' as const) : ('until' as const),
    minutes: t.minutes ?? t.hours! * 60,
    filters: checkTicketFilters(trigger.conditions ?? {}, 'trigger.conditions').parsed,
    actions: parsed.success ? parsed.data : [],
  };
}

/** What one run of a rule did: tickets fired, batches (transactions), tickets seen, the longest batch, whether it reached the end. */
export interface RuleRun {
  fired: number;
  batches: number;
  seen: number;
  longestBatchMs: number;
  done: boolean;
}

export function createTimeRules(deps: {
  db: Db;
  queues: QueueHub;
  logger: Logger;
  tickets: Pick<TicketCommands, 'lockMany' | 'recordEvents'>;
  macros: Pick<MacroService, 'fireRule'>;
  /** TIME_RULE_BATCH_SIZE (the most tickets a batch takes) and TIME_RULE_BATCH_MS (how long a batch aims to take). */
  /** Batches: at most `max` tickets, sized to last about `targetMs`; `lanes` of them at once in one run. */
  batch: { max: number; targetMs: number; lanes?: number };
}) {
  const { db, logger } = deps;

  /** The rules.sweep job: one rules.run per enabled time rule, named by the minute. */
  async function sweep(now = Date.now()): Promise<{ rules: number }> {
    const rules = await store.crossTenantTimeRules(db);
    const slot = Math.floor(now / 60_000);
    for (const r of rules) await deps.queues.enqueue('rules.run', { tenant_id: r.tenant_id, macro_id: r.id, slot });
    return { rules: rules.length };
  }

  /**
   * The rules.run job: the rule's qualifying tickets, batch after batch, until a batch comes back short (the
   * rule's tickets are all seen), the budget is spent, or the rule is disabled or no longer a time rule (read
   * again in each batch, so a change is obeyed from the next batch on). Each batch is sized from the last one's
   * cost (`nextBatchSize`). `onBatch` hears each batch's size and duration (the bench's figures: a batch's duration
   * is how long its locks were held, at most).
   */
  async function run(
    tenantId: string,
    macroId: string,
    opts: { budgetMs?: number; onBatch?: (b: { limit: number; seen: number; fired: number; ms: number }) => void } = {},
  ): Promise<RuleRun> {
    const deadline = Date.now() + (opts.budgetMs ?? RUN_BUDGET_MS);
    const out: RuleRun = { fired: 0, batches: 0, seen: 0, longestBatchMs: 0, done: false };
    // A batch waits on the database most of its time (the apply path's statements one after another), so a run
    // takes `lanes` batches at once, each its own transaction: they share the rule's tickets through SKIP LOCKED and
    // the firings' key exactly as two workers' runs do, each following its own keyset. The run is done when every
    // lane has come to the end of what it can take.
    const lanes = Math.max(1, deps.batch.lanes ?? 1);
    const done = await Promise.all(Array.from({ length: lanes }, () => lane(tenantId, macroId, deadline, out, opts.onBatch)));
    out.done = done.every(Boolean);
    if (out.fired > 0 || !out.done) {
      logger.info({ tenant_id: tenantId, macro_id: macroId, fired: out.fired, batches: out.batches, longest_batch_ms: Math.round(out.longestBatchMs), done: out.done }, 'time rule run');
    }
    return out;
  }

  /** One lane of a run: batch after batch along its own keyset; true when it came to the end (or the rule went). */
  async function lane(
    tenantId: string,
    macroId: string,
    deadline: number,
    out: RuleRun,
    onBatch?: (b: { limit: number; seen: number; fired: number; ms: number }) => void,
  ): Promise<boolean> {
    const { max, targetMs } = deps.batch;
    let limit = Math.min(FIRST_BATCH, max);
    let after: { stretch: string; id: string } | null = null;
    for (;;) {
      const started = performance.now();
      const batch = await db.transaction().execute(async (tx) => {
        const macro = await store.getMacro(tx, tenantId, macroId);
        const rule = macro?.enabled ? ruleOf(macro) : null;
        if (!macro || !rule) return null;
        const candidates = await store.claimRuleBatch(tx, tenantId, { macroId, anchor: rule.anchor, direction: rule.direction, minutes: rule.minutes, filters: rule.filters, actions: rule.actions, after, limit });
        const anchorAt = new Map(candidates.filter((c) => c.claimed).map((c) => [c.id, c.stretch_at]));
        // Already locked by this transaction: this only makes them the tickets' commands' locked rows.
        const tickets = await deps.tickets.lockMany(tx, tenantId, [...anchorAt.keys()]);
        const events: NewEvent[] = [];
        for (const ticket of tickets) {
          await deps.macros.fireRule(tx, tenantId, macro, ticket, { condition: rule.time, anchor_at: iso(anchorAt.get(ticket.id)!) }, events);
        }
        // The batch's rule_fired events (and any skipped actions) in one write: one insert, one outbound read and emit.
        await deps.tickets.recordEvents(tx, tenantId, events);
        return { candidates, fired: tickets.length };
      });
      if (!batch) return true;
      const ms = performance.now() - started;
      out.batches += 1;
      out.fired += batch.fired;
      out.seen += batch.candidates.length;
      out.longestBatchMs = Math.max(out.longestBatchMs, ms);
      logger.debug({ tenant_id: tenantId, macro_id: macroId, limit, seen: batch.candidates.length, fired: batch.fired, ms: Math.round(ms) }, 'time rule batch');
      onBatch?.({ limit, seen: batch.candidates.length, fired: batch.fired, ms });
      const last = batch.candidates.at(-1);
      if (batch.candidates.length < limit || !last) return true;
      after = { stretch: last.stretch, id: last.id };
      limit = nextBatchSize(limit, ms, targetMs, max);
      if (Date.now() >= deadline) return false;
    }
  }

  return { sweep, run };
}

export type TimeRules = ReturnType<typeof createTimeRules>;
