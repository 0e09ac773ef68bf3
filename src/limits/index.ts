import type { Logger } from 'pino';
import type { RedisClient } from '../queue/connection';
import type { ConfigSection } from '../config';
import { createApiBudgets } from './api';
import { createAuthFailureBudget } from './auth-failures';
import { createPublicReadBudget } from './public-reads';
import { createRefusalBudget } from './refusals';

/**
 * The limits room (issue 35): every budget of the service is built here, on one technique (budget.ts), and
 * answers past it the same way (`429 throttled`, integer `Retry-After`).
 *
 * - api.ts: the authenticated API's caller and workspace budgets, with their `RateLimit-*` headers;
 * - auth-failures.ts: failed authentication per client address;
 * - refusals.ts: the public intake routes' refusals per client address;
 * - public-reads.ts: the public reads (a help centre's search) per client address;
 * - intake.ts: intake points (channel ingest, provider webhooks) and the one refund rule they follow.
 *
 * The first four are what the router's stages use (`services.limits`); the intake budgets are made by each
 * intake's edge (src/intake/edge.ts). The intake lanes' 429 (src/intake/priority/lanes.ts) is a bound on queued
 * work in memory, not a budget over time, and stays with the intake-priority policy.
 */
export function createLimits(deps: {
  redis: RedisClient;
  config: ConfigSection<'http' | 'identity' | 'intake' | 'redis' | 'search'>;
  logger: Logger;
  knownToken?: (authorization: string) => boolean;
}) {
  const { redis, config, logger } = deps;
  return {
    api: createApiBudgets({ redis, config, logger }),
    authFailures: createAuthFailureBudget({ redis, config, logger, ...(deps.knownToken ? { knownToken: deps.knownToken } : {}) }),
    refusals: createRefusalBudget({ redis, config, logger }),
    publicReads: createPublicReadBudget({ redis, config, logger }),
  };
}

export type Limits = ReturnType<typeof createLimits>;
export type { ApiBudgets } from './api';
export type { AuthFailureBudget } from './auth-failures';
export type { RefusalBudget } from './refusals';
export type { PublicReadBudget } from './public-reads';
export type { IntakeBudget, IntakeCharge } from './intake';
export { authFailuresThrottled } from './auth-failures';
export { retryAfterSeconds } from './budget';
