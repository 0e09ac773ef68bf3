import { Kysely, Migrator, PostgresDialect, type Transaction } from 'kysely';
import { Pool, types } from 'pg';
import type { Config } from '../config';
import type { Database } from './types';
import { migrationProvider } from './migrations';

// int8 counts fit comfortably in a JS number for every count this service reports.
types.setTypeParser(types.builtins.INT8, (v) => Number(v));
// A date column is a calendar date (YYYY-MM-DD), not an instant: keep the text instead of a local-midnight Date.
types.setTypeParser(types.builtins.DATE, (v) => v);

export type Db = Kysely<Database>;
export type Tx = Transaction<Database>;
export type Executor = Db | Tx;

export interface DbHandle {
  db: Db;
  pool: Pool;
  close(): Promise<void>;
}

export function createDb(
  config: Pick<Config, 'DATABASE_URL' | 'PG_POOL_MAX' | 'PG_CONNECT_TIMEOUT_MS' | 'PG_STATEMENT_TIMEOUT_MS'>,
  onError: (err: Error) => void = () => {},
): DbHandle {
  const pool = new Pool({
    connectionString: config.DATABASE_URL,
    max: config.PG_POOL_MAX,
    // A down database must produce a fast 503, not a request that hangs until the client gives up.
    connectionTimeoutMillis: config.PG_CONNECT_TIMEOUT_MS,
    statement_timeout: config.PG_STATEMENT_TIMEOUT_MS,
    idleTimeoutMillis: 30000,
  });
  // A client losing its server must not crash the process. The pool's own listener covers idle clients
  // only; a checked-out client between two statements of a transaction (pg_terminate_backend, a failover)
  // emits 'error' on itself, so every client gets a listener. The next query on it fails and maps to 503,
  // and the pool discards it on release because it is no longer queryable.
  pool.on('error', onError);
  pool.on('connect', (client) => client.on('error', onError));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    pool,
    close: async () => {
      await db.destroy();
    },
  };
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the migrator works on any schema
export async function migrateToLatest(db: Kysely<any>): Promise<string[]> {
  const migrator = new Migrator({ db, provider: migrationProvider });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/**
 * PostgreSQL refused a value itself (class 22: a NUL character, an invalid escape, a number out of range):
 * the input's fault, so a batch retries item by item and the offending item is refused, never retried.
 */
export const isDataError = (err: unknown) => String((err as { code?: unknown })?.code ?? '').startsWith('22');

