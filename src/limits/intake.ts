import type { RedisClient } from '../queue/connection';
import { dependencyUnavailable } from '../lib/errors';
import { createBudget, throttled } from './budget';

/** What an intake's worker answered (src/queue/results.ts `ItemResult`), as far as the refund rule reads it. */
type Answered = { accepted: true } | { accepted: false; results: readonly { ok: boolean; value?: unknown }[] };

/**
 * A written item's answer says whether it was a redelivery (`was_duplicate`), in ingest and webhooks alike.
 * Refused items and duplicates wrote nothing.
 */
const unwritten = (results: readonly { ok: boolean; value?: unknown }[]) =>
  results.filter((r) => !r.ok || (r.value as { was_duplicate?: boolean } | undefined)?.was_duplicate === true).length;

/** Points taken for one request, and the rule for giving them back. */
export interface IntakeCharge {
  /** Gives every point back: nothing was written (refused before queueing, or the connection was gone). */
  refundAll(): Promise<void>;
  /**
   * Gives back exactly what was not written: refused items and duplicates. An accepted (202) answer keeps its
   * points: its items are still being written, and a redelivery among them is not known yet.
   */
  settle(answered: Answered): Promise<void>;
}

/**
 * An intake budget (channel ingest per workspace and channel; provider webhooks per integration), with the one
 * refund rule every intake follows (issue 35): **points bound writes.** A request takes one point per item it
 * would write, taken only once it is known to be worth writing (after lookup, signature and parse: a sender's
 * refusals are the refusal budget's, refusals.ts), and every point of an item that was not written goes back —
 * refused by the worker, a duplicate (a provider's redelivery), or the whole request refused 429. An item known
 * to be written by nobody (a receipt, a non-ticket event) is never charged. So retries and redeliveries, which
 * providers send on their own, never eat the room of new messages.
 */
export function createIntakeBudget(deps: { redis: RedisClient; keyPrefix: string; points: number; windowSeconds: number; what: string }) {
  const budget = createBudget(deps);
  return {
    /**
     * Takes `points` (one per item the request would write) for `key`: over the rate → `throttled` with the
     * seconds to wait, and the points go back (a refused request wrote nothing); Redis unreachable →
     * `dependency_unavailable`.
     */
    async take(key: string, points = 1): Promise<IntakeCharge> {
      const taken = await budget.take(key, points);
      if (taken.over === true) {
        await budget.giveBack(key, points);
        throw throttled(`This ${deps.what} is receiving more than its rate; retry later.`, taken.msLeft);
      }
      if (taken.over === null) throw dependencyUnavailable('Redis');
      return {
        refundAll: () => budget.giveBack(key, points),
        settle: (answered) => (answered.accepted ? Promise.resolve() : budget.giveBack(key, unwritten(answered.results))),
      };
    },
  };
}

export type IntakeBudget = ReturnType<typeof createIntakeBudget>;
