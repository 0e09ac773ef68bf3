import { createDb, migrateToLatest } from '../../src/db';
import { ensureDatabase } from '../../src/db/admin';

/** The PostgreSQL server the suite uses: DATABASE_URL's server, with a database name of our choosing. */
export function serverUrl(database: string): string {
  const url = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/helpdesk');
  url.pathname = `/${database}`;
  return url.toString();
}

export const runId = (): string => {
  const id = process.env.HD_TEST_RUN;
  if (!id) throw new Error('HD_TEST_RUN is not set: run the suite through jest (globalSetup)');
  return id;
};

/** Creates the database at `url` unless it is there, and migrates it to the latest schema. */
export async function migratedDatabase(url: string): Promise<void> {
  await ensureDatabase(url);
  const handle = createDb({ DATABASE_URL: url, PG_POOL_MAX: 2, PG_CONNECT_TIMEOUT_MS: 5000, PG_STATEMENT_TIMEOUT_MS: 60000 });
  try {
    await migrateToLatest(handle.db);
  } finally {
    await handle.close();
  }
}
