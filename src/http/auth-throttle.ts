import type { RedisClient } from '../queue/connection';
import type { Logger } from 'pino';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import type { ConfigSection } from '../config';
import { DomainError } from '../lib/errors';
import { problemOf } from './errors';
import type { Principal } from '../domains/identity/principal';

/** The answer while an address is over its failed-authentication budget. */
export const authFailuresThrottled = (retryAfterSeconds: number) =>
  new DomainError('throttled', 'Too many failed authentications from this address; retry later.', { retryAfterSeconds: Math.max(1, retryAfterSeconds) });

/**
 * Failed authentication per client address. Every presented credential that fails (401, or the 404 of a
 * token without membership) spends a point; while an address has spent its budget, every request from it that
 * presents a credential is answered 429 whatever the credential was, so guessing learns nothing. The budget
 * is read while the credential is checked, not before: the two round trips overlap, so a request waits for
 * one of them instead of both in turn. Successes spend nothing. Redis unreachable: authentication goes on as without the throttle (logged), so an
 * outage of the counter never turns into refusals of valid keys.
 */
export function createAuthThrottle(deps: { redis: RedisClient; config: ConfigSection<'identity' | 'redis'>; logger: Logger }) {
  const { config, logger } = deps;
  const limiter = new RateLimiterRedis({
    storeClient: deps.redis,
    keyPrefix: `${config.REDIS_PREFIX}:throttle:auth-failures`,
    points: config.AUTH_FAILURE_RATE_POINTS,
    duration: config.AUTH_FAILURE_WINDOW_SECONDS,
  });
  const unavailable = (err: unknown) => logger.warn({ err_code: 'auth_throttle_unavailable', cause: (err as Error)?.message }, 'auth failure throttle unavailable; not applied');

  return {
    async authenticate(address: string | undefined, authorization: string | undefined, check: (authorization: string | undefined) => Promise<Principal>): Promise<Principal> {
      // No credential: nothing to guess, and the 401 costs nothing to compute.
      if (!authorization) return check(authorization);
      const key = address ?? 'unknown';
      const [spent, checked] = await Promise.all([
        // One GET of the counter (the limiter's own read is a MULTI of two); the time left only when over.
        deps.redis.get(limiter.getKey(key)).then(
          (n) => Number(n ?? 0),
          (err: unknown) => {
            unavailable(err);
            return 0;
          },
        ),
        check(authorization).then(
          (principal) => ({ principal }),
          (err: unknown) => ({ err }),
        ),
      ]);
      // Over the budget, the credential's outcome is never told: valid or not, the answer is 429.
      if (spent >= config.AUTH_FAILURE_RATE_POINTS) {
        const left = await limiter.get(key).catch(() => null);
        throw authFailuresThrottled(Math.ceil((left?.msBeforeNext ?? 1000) / 1000));
      }
      if ('principal' in checked) return checked.principal;
      const refused = problemOf(checked.err);
      if (refused && (refused.status === 401 || refused.status === 404)) {
        // Rejections past the budget are expected here (concurrent failures); only an outage is worth a line.
        await limiter.consume(key).catch((res: unknown) => {
          if (res instanceof Error) unavailable(res);
        });
      }
      throw checked.err;
    },
  };
}

export type AuthThrottle = ReturnType<typeof createAuthThrottle>;
