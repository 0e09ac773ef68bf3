import type { Logger } from 'pino';
import type { RedisClient } from '../queue/connection';
import type { ConfigSection } from '../config';
import { DomainError } from '../lib/errors';
import { API_KEY_MARK } from '../lib/secrets';
import { problemOf } from '../http/errors';
import type { Principal } from '../domains/identity/principal';
import { createBudget, retryAfterSeconds } from './budget';

/** The answer while an address is over its failed-authentication budget. */
export const authFailuresThrottled = (seconds: number) =>
  new DomainError('throttled', 'Too many failed authentications from this address; retry later.', { retryAfterSeconds: Math.max(1, seconds) });

type Checked = { principal: Principal } | { err: unknown };
const settle = (p: Promise<Principal>): Promise<Checked> => p.then((principal) => ({ principal }), (err: unknown) => ({ err }));

/** A bearer credential that is not an API key: an access token, whose check is a signature verification. */
const isAccessToken = (authorization: string) => {
  const token = authorization.trim().slice('bearer '.length).trim();
  return /^bearer /i.test(authorization.trim()) && !token.startsWith(API_KEY_MARK);
};

/**
 * Failed authentication per client address (issue 32, finding 5). Every presented credential that fails (401,
 * or the 404 of a token without membership) spends a point; past the budget an address's failing credentials
 * are answered 429, whatever they were, so guessing learns nothing. A credential that verifies is served
 * whatever its address's record: an office NAT or a shared proxy is not locked out by one misconfigured client
 * or by a stranger sharing the address. What the budget bounds is the work failures cost:
 *
 * - an API key is checked by one indexed read and an HMAC, cheap either way, so it is always checked;
 * - an access token this process has verified before is too (its signature is not verified again);
 * - a token seen for the first time costs a signature verification: past the failure budget, an address gets
 *   at most AUTH_FAILURE_RATE_POINTS of those per window, then 429 without verifying.
 *
 * Successes spend nothing. Redis unreachable: authentication goes on as without the budget (logged), so an
 * outage of the counter never turns into refusals of valid keys.
 */
export function createAuthFailureBudget(deps: {
  redis: RedisClient;
  config: ConfigSection<'identity' | 'redis'>;
  logger: Logger;
  /** Whether this process verified the token's signature before (its check is then a database read). */
  knownToken?: (authorization: string) => boolean;
}) {
  const { config, logger } = deps;
  const budget = config.AUTH_FAILURE_RATE_POINTS;
  const window = { redis: deps.redis, points: budget, windowSeconds: config.AUTH_FAILURE_WINDOW_SECONDS };
  const failures = createBudget({ ...window, keyPrefix: `${config.REDIS_PREFIX}:throttle:auth-failures` });
  // Signature verifications of unseen tokens from an address that is over its failure budget.
  const verifications = createBudget({ ...window, keyPrefix: `${config.REDIS_PREFIX}:throttle:auth-verifications` });
  const unavailable = (err: unknown) => logger.warn({ err_code: 'auth_throttle_unavailable', cause: (err as Error)?.message }, 'auth failure throttle unavailable; not applied');

  /** Failures spent by the address this window (0 when Redis does not answer). */
  const spentBy = (key: string) =>
    failures.spent(key).catch((err: unknown) => {
      unavailable(err);
      return 0;
    });

  const throttled = async (key: string) => authFailuresThrottled(retryAfterSeconds(await failures.msLeft(key)));

  /** A failed check: spends a point, and past the budget the answer is 429 instead of what failed. */
  async function failed(key: string, spent: number, err: unknown): Promise<never> {
    const refused = problemOf(err);
    if (!refused || (refused.status !== 401 && refused.status !== 404)) throw err;
    // Over the budget here is expected (concurrent failures); only an outage is worth a line.
    const taken = await failures.take(key);
    if (taken.over === null) unavailable(taken.err);
    if (spent >= budget || taken.over === true) throw await throttled(key);
    throw err;
  }

  return {
    async authenticate(address: string | undefined, authorization: string | undefined, check: (authorization: string | undefined) => Promise<Principal>): Promise<Principal> {
      // No credential: nothing to guess, and the 401 costs nothing to compute.
      if (!authorization) return check(authorization);
      const key = address ?? 'unknown';
      if (!isAccessToken(authorization) || deps.knownToken?.(authorization)) {
        // Cheap to check: the budget is read while the credential is checked, not before (one wait, not two).
        const [spent, checked] = await Promise.all([spentBy(key), settle(check(authorization))]);
        if ('principal' in checked) return checked.principal;
        return failed(key, spent, checked.err);
      }
      const spent = await spentBy(key);
      if (spent >= budget) {
        const taken = await verifications.take(key);
        if (taken.over === null) unavailable(taken.err);
        if (taken.over === true) throw await throttled(key);
      }
      const checked = await settle(check(authorization));
      if ('principal' in checked) return checked.principal;
      return failed(key, spent, checked.err);
    },
  };
}

export type AuthFailureBudget = ReturnType<typeof createAuthFailureBudget>;
