import { Client } from 'pg';

/**
 * Runs `body` while another session holds `table` in ACCESS EXCLUSIVE mode (its own connection to `url`), then
 * lets go: a statement that reads the table waits for the lock, which statement_timeout counts like any other
 * work, so a search can be made to run past SEARCH_TIMEOUT_MS on demand.
 */
export async function whileLocked<T>(url: string, table: string, body: () => Promise<T>): Promise<T> {
  const locker = new Client({ connectionString: url });
  await locker.connect();
  try {
    await locker.query('BEGIN');
    await locker.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
    return await body();
  } finally {
    await locker.query('ROLLBACK').catch(() => {});
    await locker.end();
  }
}
