import { sql } from 'kysely';
import { refuse } from '../lib/errors';
import type { Db, Tx } from './index';

/** PostgreSQL's SQLSTATE for a statement cancelled by statement_timeout (or a cancel request). */
const QUERY_CANCELED = '57014';

/**
 * One search's statements, in a short read-only transaction of their own under `SET LOCAL statement_timeout`
 * (issue 36): a fragment or query that matches most of a workspace is stopped at `timeoutMs` instead of holding a
 * connection and the database for as long as it takes, and answers 422 query_too_expensive. Local to the
 * transaction, so the pooled connection goes back with its usual timeout; `set_config` because SET takes no bind
 * parameters.
 */
export async function withSearchTimeout<T>(db: Db, timeoutMs: number, run: (tx: Tx) => Promise<T>): Promise<T> {
  try {
    return await db
      .transaction()
      .setAccessMode('read only')
      .execute(async (tx) => {
        await sql`SELECT set_config('statement_timeout', ${String(timeoutMs)}, true)`.execute(tx);
        return run(tx);
      });
  } catch (err) {
    if ((err as { code?: unknown })?.code === QUERY_CANCELED) {
      throw refuse('query_too_expensive', `This search ran longer than ${timeoutMs} ms (SEARCH_TIMEOUT_MS) and was stopped; use a longer or more distinctive fragment.`, [
        { path: 'q', message: 'matches too much to answer in time' },
      ]);
    }
    throw err;
  }
}
