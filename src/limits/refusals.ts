import type { Logger } from 'pino';
import type { RedisClient } from '../queue/connection';
import type { ConfigSection } from '../config';
import { problemOf } from '../http/errors';
import { createBudget, throttled } from './budget';

/** A 4xx the caller caused (not a throttle answer): what the refusal budget counts. */
const isRefusal = (err: unknown): boolean => {
  const p = problemOf(err);
  return p !== null && p.status >= 400 && p.status < 500 && p.status !== 429;
};

/**
 * The public intake routes' refusals (unknown connection or integration, bad signature, unreadable payload)
 * are charged per client address, never to the workspace the request names: a stranger sending junk cannot
 * spend a workspace's budget. Over the rate, that address's refusals become 429; its accepted requests are
 * untouched, since a provider's shared egress address also carries other workspaces' good deliveries.
 */
export function createRefusalBudget(deps: { redis: RedisClient; config: ConfigSection<'intake' | 'redis'>; logger: Logger }) {
  const { config, logger } = deps;
  const budget = createBudget({
    redis: deps.redis,
    keyPrefix: `${config.REDIS_PREFIX}:throttle:intake-refusals`,
    points: config.INGEST_REFUSAL_RATE_POINTS,
    windowSeconds: config.INGEST_REFUSAL_RATE_WINDOW_SECONDS,
  });
  return {
    /** The error to answer with: the refusal itself, or 429 once the address is over its refusal rate. */
    async charge(address: string | undefined, err: unknown): Promise<unknown> {
      if (!isRefusal(err)) return err;
      const taken = await budget.take(address ?? 'unknown');
      if (taken.over === true) return throttled('This address sends too many refused requests; retry later.', taken.msLeft);
      // Redis unreachable: the refusal is still the right answer, so it goes out as it is.
      if (taken.over === null) logger.warn({ err_code: 'refusal_budget_unavailable', cause: (taken.err as Error)?.message }, 'refusal budget unavailable');
      return err;
    },
  };
}

export type RefusalBudget = ReturnType<typeof createRefusalBudget>;
