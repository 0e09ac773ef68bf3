import type { Logger } from 'pino';
import type { RedisClient } from '../queue/connection';
import type { ConfigSection } from '../config';
import { callerOf, type Principal } from '../domains/identity/principal';
import { throttled } from './budget';

/** One budget's state after a request: what is left and when the window resets. */
interface BudgetState {
  name: string;
  remaining: number;
  resetSeconds: number;
}

/**
 * The one budget pair not built on `createBudget` (budget.ts), kept as our own Lua on purpose. What it does that
 * `rate-limiter-flexible` cannot: take from two keys *conditionally and atomically in one round trip*. The
 * caller's point is taken first; over it, the workspace is not charged (one runaway key must not spend its
 * workspace's budget); over the workspace's, the caller's point goes back (the request does not run).
 * `rate-limiter-flexible` consumes one key per call, and its `RateLimiterUnion` consumes every limiter
 * unconditionally, so the same rule would be two or three round trips (consume, consume, reward) and not atomic
 * between them; this runs on every authenticated request (it was two consumes: ten Redis commands and two waits).
 *
 * KEYS[1] the caller's counter, KEYS[2] the workspace's; ARGV: the caller's budget, the workspace's, the window
 * in ms (fixed windows). Answers {refused: 0 none | 1 caller | 2 workspace, caller count, caller ms left,
 * workspace count, workspace ms left}. Both keys carry the workspace as their hash tag, so on a cluster they
 * share a slot.
 */
const TAKE_BOTH = `
local function take(key, ms)
  local n = redis.call('INCR', key)
  local left = redis.call('PTTL', key)
  if left < 0 then
    redis.call('PEXPIRE', key, ms)
    left = ms
  end
  return n, left
end
local window = tonumber(ARGV[3])
local c, cl = take(KEYS[1], window)
if c > tonumber(ARGV[1]) then return {1, c, cl, 0, 0} end
local w, wl = take(KEYS[2], window)
if w > tonumber(ARGV[2]) then
  redis.call('DECR', KEYS[1])
  return {2, c - 1, cl, w, wl}
end
return {0, c, cl, w, wl}
`;

type TakeBoth = (callerKey: string, workspaceKey: string, callerPoints: number, workspacePoints: number, windowMs: number) => Promise<[number, number, number, number, number]>;

/**
 * The authenticated API's budgets (IETF httpapi RateLimit header fields draft): one per caller (the API key,
 * or the user of an access token, in its workspace) and one per workspace. Every authenticated answer says
 * them in `RateLimit-Policy` and what is left in `RateLimit`; past either, `429 throttled` with an integer
 * Retry-After, before anything runs.
 */
export function createApiBudgets(deps: { redis: RedisClient; config: ConfigSection<'http' | 'redis'>; logger: Logger }) {
  const { config, logger } = deps;
  const window = config.API_RATE_WINDOW_SECONDS;
  const redis = deps.redis as RedisClient & { hdApiTakeBoth?: TakeBoth };
  if (!redis.hdApiTakeBoth) redis.defineCommand('hdApiTakeBoth', { numberOfKeys: 2, lua: TAKE_BOTH });
  const policy = `"caller";q=${config.API_RATE_POINTS};w=${window}, "workspace";q=${config.WORKSPACE_RATE_POINTS};w=${window}`;
  const keyOf = (p: Principal) => {
    const tag = `${config.REDIS_PREFIX}:throttle:api:{${p.tenantId}}`;
    return { caller: `${tag}:${callerOf(p)}`, workspace: `${tag}:workspace` };
  };
  const stateOf = (name: string, points: number, count: number, msLeft: number): BudgetState => ({
    name,
    remaining: Math.max(0, points - count),
    resetSeconds: Math.max(1, Math.ceil(msLeft / 1000)),
  });
  const headers = (states: BudgetState[]) => ({
    'RateLimit-Policy': policy,
    RateLimit: states.map((s) => `"${s.name}";r=${s.remaining};t=${s.resetSeconds}`).join(', '),
  });
  const over = (states: BudgetState[], msLeft: number) =>
    throttled('This API key (or workspace) is sending more requests than its budget; retry after Retry-After seconds.', msLeft, { headers: headers(states) });

  return {
    policy,
    /**
     * Takes one point from the caller's and the workspace's budget and returns the headers to send. Over
     * either: throttled. Redis unreachable: the request goes on without headers (the budgets protect the
     * service; losing Redis must not stop every read), and a warning says so.
     */
    async take(p: Principal): Promise<Record<string, string>> {
      const keys = keyOf(p);
      let answer: [number, number, number, number, number];
      try {
        answer = await redis.hdApiTakeBoth!(keys.caller, keys.workspace, config.API_RATE_POINTS, config.WORKSPACE_RATE_POINTS, window * 1000);
      } catch (err) {
        logger.warn({ err_code: 'api_limits_unavailable', cause: (err as Error)?.message }, 'API rate limits unavailable; request not counted');
        return {};
      }
      const [refused, callerCount, callerMs, workspaceCount, workspaceMs] = answer.map(Number) as typeof answer;
      const caller = stateOf('caller', config.API_RATE_POINTS, callerCount, callerMs);
      if (refused === 1) throw over([caller], callerMs);
      const workspace = stateOf('workspace', config.WORKSPACE_RATE_POINTS, workspaceCount, workspaceMs);
      if (refused === 2) throw over([workspace], workspaceMs);
      return headers([caller, workspace]);
    },
  };
}

export type ApiBudgets = ReturnType<typeof createApiBudgets>;
