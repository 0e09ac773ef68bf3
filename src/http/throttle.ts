import { RateLimiterRes, type RateLimiterRedis } from 'rate-limiter-flexible';
import { AppError, dependencyUnavailable } from './errors';

/**
 * Takes one point for `key`: over the rate → 429 with an integer Retry-After (nothing was written yet);
 * Redis unreachable → 503. `what` names the thing throttled in the detail ("channel", "integration").
 */
export async function consumeOrRefuse(limiter: RateLimiterRedis, key: string, what: string): Promise<void> {
  try {
    await limiter.consume(key);
  } catch (res) {
    if (res instanceof RateLimiterRes) {
      throw new AppError(429, 'throttled', 'Too many requests', `This ${what} is receiving more than its rate; retry later.`, {
        headers: { 'Retry-After': String(Math.max(1, Math.ceil(res.msBeforeNext / 1000))) },
      });
    }
    throw dependencyUnavailable('Redis');
  }
}
