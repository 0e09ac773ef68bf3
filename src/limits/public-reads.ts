import type { Logger } from 'pino';
import type { RedisClient } from '../queue/connection';
import type { ConfigSection } from '../config';
import { createBudget, throttled } from './budget';

/**
 * The public reads' budget per client address (a help centre's search, issue 36): anyone may call them without a
 * credential, and each search costs the database real work, so every request takes a point from its address's
 * budget before its input is read (the router's limits stage, for operations marked `addressBudget`). Past it,
 * `429 throttled` with Retry-After. Redis unreachable: the request goes on (as the API's own budgets do) and a
 * warning says so; SEARCH_TIMEOUT_MS still bounds each search.
 */
export function createPublicReadBudget(deps: { redis: RedisClient; config: ConfigSection<'search' | 'redis'>; logger: Logger }) {
  const { config, logger } = deps;
  const budget = createBudget({
    redis: deps.redis,
    keyPrefix: `${config.REDIS_PREFIX}:throttle:public-search`,
    points: config.PUBLIC_SEARCH_RATE_POINTS,
    windowSeconds: config.PUBLIC_SEARCH_RATE_WINDOW_SECONDS,
  });
  return {
    async take(address: string | undefined): Promise<void> {
      const taken = await budget.take(address ?? 'unknown');
      if (taken.over === true) throw throttled('This address sends more public searches than its budget; retry after Retry-After seconds.', taken.msLeft);
      if (taken.over === null) logger.warn({ err_code: 'public_search_budget_unavailable', cause: (taken.err as Error)?.message }, 'public search budget unavailable; request not counted');
    },
  };
}

export type PublicReadBudget = ReturnType<typeof createPublicReadBudget>;
