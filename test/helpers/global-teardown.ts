import { Client } from 'pg';
import { runId, serverUrl } from './db-names';

export default async function globalTeardown(): Promise<void> {
  const id = runId();
  const admin = new Client({ connectionString: serverUrl('postgres') });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ datname: string }>(
      `SELECT datname FROM pg_database WHERE datname LIKE $1 OR datname = $2`,
      [`hd_t_${id}_%`, `hd_tpl_${id}`],
    );
    for (const { datname } of rows) {
      await admin.query(`ALTER DATABASE "${datname}" WITH IS_TEMPLATE false`);
      await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
    }
  } finally {
    await admin.end();
  }
}
