import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { RedisClient } from '../queue/connection';
import { DomainError } from '../lib/errors';

/**
 * The one technique of the limits room (issue 35): a budget is `points` per fixed window of `windowSeconds`, per
 * key, counted in Redis (so every process shares it) by `rate-limiter-flexible`. Every budget of the service is
 * one of these, except the API's caller and workspace pair (api.ts says why). Words, one per idea: a *budget* is
 * taken from (`take`), given back (`giveBack`); past it the answer is `429 throttled` with `Retry-After`.
 */

/** Whole seconds until a window resets (at least 1): what `Retry-After` says. */
export const retryAfterSeconds = (msLeft: number | { msBeforeNext: number }): number =>
  Math.max(1, Math.ceil((typeof msLeft === 'number' ? msLeft : msLeft.msBeforeNext) / 1000));

/** The 429 of every budget: `throttled`, the detail saying which, an integer Retry-After. */
export const throttled = (detail: string, msLeft: number, extra: { headers?: Record<string, string> } = {}) =>
  new DomainError('throttled', detail, { retryAfterSeconds: retryAfterSeconds(msLeft), ...extra });

/** What one take came to: taken, over the budget (with the wait), or Redis did not answer. */
export type Taken = { over: false } | { over: true; msLeft: number } | { over: null; err: unknown };

export function createBudget(deps: { redis: RedisClient; keyPrefix: string; points: number; windowSeconds: number }) {
  const limiter = new RateLimiterRedis({ storeClient: deps.redis, keyPrefix: deps.keyPrefix, points: deps.points, duration: deps.windowSeconds });
  return {
    points: deps.points,
    /** Takes `points` from `key`'s budget. Never throws: an outage is `{over: null}`, and each caller decides. */
    take: (key: string, points = 1): Promise<Taken> =>
      limiter.consume(key, points).then(
        () => ({ over: false }) as const,
        (res: unknown) => (res instanceof RateLimiterRes ? ({ over: true, msLeft: res.msBeforeNext } as const) : ({ over: null, err: res } as const)),
      ),
    /** Gives `points` back to `key`'s budget (nothing when Redis does not answer: the window ends anyway). */
    async giveBack(key: string, points: number): Promise<void> {
      if (points > 0) await limiter.reward(key, points).catch(() => {});
    },
    /** Points spent by `key` this window: one GET, no write (rejects when Redis does not answer). */
    spent: async (key: string): Promise<number> => Number((await deps.redis.get(limiter.getKey(key))) ?? 0),
    /** Milliseconds until `key`'s window resets (a second when unknown). */
    msLeft: (key: string): Promise<number> => limiter.get(key).then((r) => r?.msBeforeNext ?? 1000, () => 1000),
  };
}

export type Budget = ReturnType<typeof createBudget>;
