import { RateLimiterRes, type RateLimiterRedis } from 'rate-limiter-flexible';
import { dependencyUnavailable, DomainError } from './errors';

/** Whole seconds until the limiter lets `res`'s key through again (at least 1). */
export const retryAfterSeconds = (res: RateLimiterRes): number => Math.max(1, Math.ceil(res.msBeforeNext / 1000));

/**
 * Takes `points` (one per message the request would write) for `key`: over the rate → `throttled` with the
 * seconds to wait; Redis unreachable → `dependency_unavailable`. A refused request wrote nothing, so its
 * points go back: only what is accepted counts against the budget. `what` names the thing throttled in the
 * detail ("channel", "integration").
 */
export async function consumeOrRefuse(limiter: RateLimiterRedis, key: string, what: string, points = 1): Promise<void> {
  try {
    await limiter.consume(key, points);
  } catch (res) {
    if (res instanceof RateLimiterRes) {
      await limiter.reward(key, points).catch(() => {});
      throw new DomainError('throttled', `This ${what} is receiving more than its rate; retry later.`, { retryAfterSeconds: retryAfterSeconds(res) });
    }
    throw dependencyUnavailable('Redis');
  }
}
