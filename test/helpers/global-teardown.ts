import { Client } from 'pg';
import { runId, serverUrl } from './db-names';

export default async function globalTeardown(): Promise<void> {
  await (globalThis as { hdRedisCluster?: { destroy(): Promise<void> } }).hdRedisCluster?.destroy();
  const id = runId();
  const admin = new Client({ connectionString: serverUrl('postgres') });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname ~ '^hd_(t|tpl)_'`);
    // This run's databases, plus any a killed run left behind more than an hour ago (run ids start with a
    // base-36 timestamp), so an interrupted suite never accumulates databases.
    const stale = (name: string) => {
      const run = /^hd_(?:t|tpl)_([0-9a-z]+?)[0-9a-f]{4}(?:_|$)/.exec(name)?.[1];
      return run !== undefined && Date.now() - parseInt(run, 36) > 3600_000;
    };
    for (const { datname } of rows.filter((r) => r.datname.startsWith(`hd_t_${id}_`) || r.datname === `hd_tpl_${id}` || stale(r.datname))) {
      await admin.query(`ALTER DATABASE "${datname}" WITH IS_TEMPLATE false`);
      await admin.query(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
    }
  } finally {
    await admin.end();
  }
}
