import type { RedisClient } from '../queue/connection';
import type { Logger } from 'pino';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { ConfigSection } from '../config';
import type { Principal } from '../domains/identity/principal';
import { DomainError } from '../lib/errors';
import { retryAfterSeconds } from '../lib/rate';

/** One policy's state after a request: what is left and when the window resets. */
interface PolicyState {
  name: string;
  remaining: number;
  resetSeconds: number;
}

/**
 * The authenticated API's budgets (IETF httpapi RateLimit header fields draft): one per caller (the API key,
 * or the user of an access token, in its workspace) and one per workspace, both on Redis so every API
 * process shares them. Every authenticated answer says them in `RateLimit-Policy` and what is left in
 * `RateLimit`; past either, `429 throttled` with an integer Retry-After, before anything runs.
 */
export function createApiLimits(deps: { redis: RedisClient; config: ConfigSection<'http' | 'redis'>; logger: Logger }) {
  const { config, logger } = deps;
  const window = config.API_RATE_WINDOW_SECONDS;
  const caller = new RateLimiterRedis({ storeClient: deps.redis, keyPrefix: `${config.REDIS_PREFIX}:throttle:api-caller`, points: config.API_RATE_POINTS, duration: window });
  const workspace = new RateLimiterRedis({ storeClient: deps.redis, keyPrefix: `${config.REDIS_PREFIX}:throttle:api-workspace`, points: config.WORKSPACE_RATE_POINTS, duration: window });
  const policy = `"caller";q=${config.API_RATE_POINTS};w=${window}, "workspace";q=${config.WORKSPACE_RATE_POINTS};w=${window}`;
  const callerKey = (p: Principal) => (p.apiKeyId ? `key:${p.apiKeyId}` : `user:${p.tenantId}:${p.userId}`);
  const stateOf = (name: string, res: RateLimiterRes): PolicyState => ({ name, remaining: Math.max(0, res.remainingPoints), resetSeconds: retryAfterSeconds(res) });
  const headers = (states: PolicyState[]) => ({
    'RateLimit-Policy': policy,
    RateLimit: states.map((s) => `"${s.name}";r=${s.remaining};t=${s.resetSeconds}`).join(', '),
  });

  return {
    policy,
    /**
     * Takes one point from the caller's and the workspace's budget and returns the headers to send. Over
     * either: throttled (the other's point is given back). Redis unreachable: the request goes on without
     * headers (the budgets protect the service; losing Redis must not stop every read), and a warning says so.
     */
    async take(p: Principal): Promise<Record<string, string>> {
      let mine: RateLimiterRes;
      try {
        mine = await caller.consume(callerKey(p));
      } catch (res) {
        if (!(res instanceof RateLimiterRes)) return unavailable(res);
        throw throttled([stateOf('caller', res)], res);
      }
      try {
        const ours = await workspace.consume(p.tenantId);
        return headers([stateOf('caller', mine), stateOf('workspace', ours)]);
      } catch (res) {
        await caller.reward(callerKey(p)).catch(() => {});
        if (!(res instanceof RateLimiterRes)) return unavailable(res);
        throw throttled([stateOf('workspace', res)], res);
      }
    },
  };

  function unavailable(err: unknown): Record<string, string> {
    logger.warn({ err_code: 'api_limits_unavailable', cause: (err as Error)?.message }, 'API rate limits unavailable; request not counted');
    return {};
  }

  function throttled(states: PolicyState[], res: RateLimiterRes): DomainError {
    return new DomainError('throttled', 'This API key (or workspace) is sending more requests than its budget; retry after Retry-After seconds.', {
      retryAfterSeconds: retryAfterSeconds(res),
      headers: headers(states),
    });
  }
}

export type ApiLimits = ReturnType<typeof createApiLimits>;
