import { sql } from 'kysely';
import type { Logger } from 'pino';
import type { Config } from '../config';
import type { RedisClient } from '../queue/connection';
import type { Db } from './index';

/**
 * The caller a read is routed for, as much of a principal (src/domains/identity/principal.ts) as routing needs:
 * declared here, structurally, because db sits below the domains and imports none of them
 * (test/layering.test.ts). Any principal is one.
 */
export interface ReadCaller {
  tenantId: string;
  apiKeyId: string | null;
  userId: string;
}

/** How often the replica's lag is read (one small statement on the replica). */
const LAG_SAMPLE_MS = 500;

/**
 * Where rollup and list reads go when a read replica is configured (DATABASE_READ_URL; issue 20). Everything
 * else, authentication and its `last_used_at` touch included, stays on the primary. A read goes to the primary
 * instead when:
 * - its caller wrote recently: every successful write by a caller (an API key, or a user in a workspace)
 *   leaves a mark in Redis for DATABASE_READ_MAX_LAG_MS plus two lag readings, so a caller reads its own
 *   writes on any API process;
 * - the replica is behind by more than DATABASE_READ_MAX_LAG_MS (it replays more slowly than the primary
 *   writes), or did not answer its last lag reading;
 * - Redis cannot say whether the caller wrote (an unknown answer must not hide a write).
 * Other callers may see data up to DATABASE_READ_MAX_LAG_MS old: the staleness a dashboard of rollups and
 * lists accepts, and what the replica buys.
 */
export function createReadRouting(deps: {
  primary: Db;
  replica: Db | null;
  redis: RedisClient;
  config: Pick<Config, 'REDIS_PREFIX' | 'DATABASE_READ_MAX_LAG_MS'>;
  logger: Logger;
}) {
  const { primary, replica, redis, config, logger } = deps;
  const markMs = config.DATABASE_READ_MAX_LAG_MS + 2 * LAG_SAMPLE_MS;
  const markKey = (p: ReadCaller) => `${config.REDIS_PREFIX}:wrote:${p.tenantId}:${p.apiKeyId ?? p.userId}`;
  let lagMs: number | null = null;
  // Unref'd: it never keeps a process alive, so it needs no stopping.
  let sampler: NodeJS.Timeout | null = null;

  async function sampleLag() {
    if (!replica) return;
    try {
      // Caught up when everything received is replayed; otherwise as old as the last transaction replayed.
      const { rows } = await sql<{ lag_ms: number | null }>`
        SELECT CASE WHEN pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() THEN 0
                    ELSE extract(epoch FROM now() - pg_last_xact_replay_timestamp()) * 1000 END AS lag_ms`.execute(replica);
      lagMs = rows[0]?.lag_ms === null || rows[0]?.lag_ms === undefined ? null : Number(rows[0].lag_ms);
    } catch (err) {
      if (lagMs !== null) logger.warn({ err: (err as Error).message }, 'read replica not answering; reads go to the primary');
      lagMs = null;
    }
  }

  const ensureSampling = () => {
    if (sampler || !replica) return;
    sampler = setInterval(() => void sampleLag(), LAG_SAMPLE_MS).unref();
    void sampleLag();
  };

  return {
    /** The database a rollup or list read of this caller uses. */
    async forReading(actor: ReadCaller): Promise<Db> {
      if (!replica) return primary;
      ensureSampling();
      if (lagMs === null || lagMs > config.DATABASE_READ_MAX_LAG_MS) return primary;
      try {
        return (await redis.exists(markKey(actor))) ? primary : replica;
      } catch {
        return primary;
      }
    },

    /** After a caller's successful write: its reads go to the primary until the replica has it. */
    async wrote(actor: ReadCaller): Promise<void> {
      if (!replica) return;
      await redis.set(markKey(actor), '1', 'PX', markMs).catch((err: Error) => logger.warn({ err: err.message }, 'write mark not kept; the caller may read from the replica before it has the write'));
    },
  };
}

export type ReadRouting = ReturnType<typeof createReadRouting>;
