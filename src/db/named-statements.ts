import { createHash } from 'node:crypto';
import type { PostgresPool, PostgresPoolClient } from 'kysely';
import type { Pool, PoolClient, QueryConfig } from 'pg';
import { isStalePreparedStatement } from '../lib/errors';

/**
 * Server-side prepared statements for the queries of fixed shape that every request runs (src/db/prepared.ts).
 *
 * Sent unnamed, PostgreSQL parses, analyses and plans a statement on every execution. For the hot reads that
 * is most of their cost: the credential read plans in 0.12 ms and runs in 0.02 ms, a ticket's detail read plans
 * in 0.32 ms and runs in 0.19 ms (EXPLAIN ANALYZE, warm). Sent under a name, each pooled connection parses it
 * once and PostgreSQL keeps its plan (generic after five executions when that is no worse).
 *
 * Only in session pooling (the default, `DATABASE_POOL_MODE=session`): behind a transaction-mode pooler a
 * statement prepared on one server connection is unknown on the next (PgBouncer before 1.21 has no support for
 * them at all), so `createDb` does not use this there.
 */

/** SQL text → statement name. Filled once per query shape, when it is first compiled. */
const names = new Map<string, string>();
/**
 * At most this many shapes are named: each pooled connection may hold every one of them prepared (a few
 * kilobytes of server memory each), and a shape that varies more than expected must not grow that unbounded.
 * Past it, new shapes go unnamed, as before.
 */
const MAX_NAMED = 256;

/** Marks a compiled SQL text to be sent as a named, server-side prepared statement. */
export function nameStatement(text: string): void {
  if (!names.has(text) && names.size < MAX_NAMED) names.set(text, `hd_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`);
}

interface ClientState {
  /** Bumped when a statement went stale on this connection: the next use prepares it afresh under a new name. */
  generation: number;
  /** Inside BEGIN … COMMIT a failed statement aborts the transaction, so it cannot be retried in place. */
  inTransaction: boolean;
}
const states = new WeakMap<PoolClient, ClientState>();

const TX_START = /^\s*(begin|start transaction)\b/i;
const TX_END = /^\s*(commit|rollback|end|abort)\b/i;

/** The pool as Kysely's dialect sees it, sending each named SQL text as a prepared statement. */
export function namedStatementPool(pool: Pool): PostgresPool {
  return {
    async connect(): Promise<PostgresPoolClient> {
      const client = await pool.connect();
      let state = states.get(client);
      if (!state) states.set(client, (state = { generation: 0, inTransaction: false }));
      const s = state;
      const run = (text: string, values: unknown[]) => {
        const name = names.get(text);
        if (!name) return client.query(text, values);
        const q: QueryConfig = { name: s.generation ? `${name}_${s.generation}` : name, text, values };
        return client.query(q);
      };
      return {
        query: ((text: unknown, parameters?: readonly unknown[]) => {
          // A cursor (an object) goes through as it is.
          if (typeof text !== 'string') return client.query(text as never);
          // The transaction state is tracked from the statements themselves (kysely sends BEGIN and COMMIT as text;
          // only the short ones can be those, so long statements skip the test).
          if (text.length < 40) {
            if (TX_START.test(text)) s.inTransaction = true;
            else if (TX_END.test(text)) s.inTransaction = false;
          }
          const values = [...(parameters ?? [])];
          return run(text, values).catch((err: unknown) => {
            if (!names.has(text) || !isStalePreparedStatement(err)) throw err;
            s.generation += 1;
            // Outside a transaction the statement is simply prepared again; inside one the transaction is lost
            // and the caller sees a retryable 503 (src/lib/errors.ts).
            if (s.inTransaction) throw err;
            return run(text, values);
          });
        }) as unknown as PostgresPoolClient['query'],
        release: () => client.release(),
      };
    },
    end: () => pool.end(),
  };
}
