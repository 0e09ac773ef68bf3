import type { Db } from '../../db';
import * as store from './store';

/**
 * The workers' part of idempotency: the hourly `idempotency.prune` job drops expired keys of every workspace.
 * Nothing else of the service (fingerprints, claims, sealed answers) runs in a worker, so a worker builds this,
 * not the service with its sealer (src/services/worker.ts).
 */
export function createIdempotencyPrune(deps: { db: Db }) {
  return { pruneExpired: () => store.crossTenantPruneExpiredKeys(deps.db) };
}

export type IdempotencyPrune = ReturnType<typeof createIdempotencyPrune>;
