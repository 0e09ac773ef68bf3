import { sql } from 'kysely';
import { isQueryCanceled, refuse } from '../lib/errors';
import type { Db, Tx } from './index';

/** How long one search may run, and what its 422 tells the caller to do instead (the end of the detail). */
export interface SearchBound {
  timeoutMs: number;
  advice: string;
}

/**
 * One search's statements (tickets, customers, articles; issue 36), in a short read-only transaction of their own
 * under `SET LOCAL statement_timeout`: a query that matches most of a workspace is stopped at `timeoutMs` instead
 * of holding a connection and the database for as long as it takes, and answers 422 query_too_expensive naming
 * `q`. Local to the transaction, so the pooled connection goes back with its usual timeout; `set_config` because
 * SET takes no bind parameters. Read-only, so it runs as well on the replica `db` may be (src/db/reads.ts).
 */
export async function withSearchTimeout<T>(db: Db, bound: SearchBound, run: (tx: Tx) => Promise<T>): Promise<T> {
  try {
    return await db
      .transaction()
      .setAccessMode('read only')
      .execute(async (tx) => {
        await sql`SELECT set_config('statement_timeout', ${String(Math.trunc(bound.timeoutMs))}, true)`.execute(tx);
        return run(tx);
      });
  } catch (err) {
    if (isQueryCanceled(err)) {
      throw refuse('query_too_expensive', `This search ran longer than ${bound.timeoutMs} ms (SEARCH_TIMEOUT_MS) and was stopped; ${bound.advice}`, [
        { path: 'q', message: 'matches too much to answer in time' },
      ]);
    }
    throw err;
  }
}
