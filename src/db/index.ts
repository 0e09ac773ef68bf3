import { Kysely, Migrator, PostgresDialect, sql, type Transaction } from 'kysely';
import { Pool, types } from 'pg';
import type { Config } from '../config';
import type { Database } from './types';
import { migrationProvider } from './migrations';
import { namedStatementPool } from './named-statements';

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
  config: Pick<Config, 'DATABASE_URL' | 'PG_POOL_MAX' | 'PG_CONNECT_TIMEOUT_MS' | 'PG_STATEMENT_TIMEOUT_MS'> & Partial<Pick<Config, 'DATABASE_POOL_MODE'>>,
  onError: (err: Error) => void = () => {},
): DbHandle {
  const pool = new Pool({
    connectionString: config.DATABASE_URL,
    max: config.PG_POOL_MAX,
    // A down database must produce a fast 503, not a request that hangs until the client gives up.
    connectionTimeoutMillis: config.PG_CONNECT_TIMEOUT_MS,
    // A startup parameter, which PgBouncer refuses ("unsupported startup parameter"); behind a
    // transaction-mode pooler the timeout is the database's default instead (applyDatabaseDefaults).
    ...(config.DATABASE_POOL_MODE === 'transaction' ? {} : { statement_timeout: config.PG_STATEMENT_TIMEOUT_MS }),
    idleTimeoutMillis: 30000,
  });
  // A client losing its server must not crash the process. The pool's own listener covers idle clients
  // only; a checked-out client between two statements of a transaction (pg_terminate_backend, a failover)
  // emits 'error' on itself, so every client gets a listener. The next query on it fails and maps to 503,
  // and the pool discards it on release because it is no longer queryable.
  pool.on('error', onError);
  pool.on('connect', (client) => client.on('error', onError));
  // Hot queries of fixed shape go as named prepared statements, except behind a transaction-mode pooler, where
  // a statement prepared on one server connection is unknown on the next (src/db/named-statements.ts).
  const dialectPool = config.DATABASE_POOL_MODE === 'transaction' ? pool : namedStatementPool(pool);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: dialectPool }) });
  return {
    db,
    pool,
    close: async () => {
      await db.destroy();
    },
  };
}

/**
 * Server-side defaults of the service's database. Behind a transaction-mode pooler a connection carries no
 * startup parameter and no session state survives a transaction, so the statement timeout becomes the
 * database's own default (`ALTER DATABASE … SET`, for every new server session; sessions the pooler already
 * holds keep theirs until it reconnects them). Run by `npm run migrate` in that mode; needs the database's owner.
 */
export async function applyDatabaseDefaults(db: Kysely<Database>, config: Pick<Config, 'PG_STATEMENT_TIMEOUT_MS' | 'DATABASE_POOL_MODE'>): Promise<void> {
  if (config.DATABASE_POOL_MODE !== 'transaction') return;
  const timeout = `${config.PG_STATEMENT_TIMEOUT_MS}ms`;
  await sql`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET statement_timeout = %L', current_database(), ${sql.lit(timeout)}); END $$`.execute(db);
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


/**
 * This transaction's commit does not wait for its WAL flush (`SET LOCAL synchronous_commit = off`): for writes
 * whose loss in a database crash leaves a safe state behind (a send's settlement: the row stays `sending` and
 * the outbound sweep declares it `unknown`, never sending it again). Never for a write a caller was told is done.
 */
export async function commitWithoutFlush(tx: Tx): Promise<void> {
  await sql`SET LOCAL synchronous_commit = off`.execute(tx);
}
