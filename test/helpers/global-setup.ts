import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { migratedDatabase, serverUrl } from './db-names';
import { startOwnRedisCluster } from './redis-server';

/**
 * One migrated template database per run; every test file clones it (CREATE DATABASE … TEMPLATE), so files
 * never see each other's rows and can run in parallel.
 */
export default async function globalSetup(): Promise<void> {
  const runId = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  process.env.HD_TEST_RUN = runId;
  const template = serverUrl(`hd_tpl_${runId}`);
  await migratedDatabase(template);
  // Template databases must have no open connections when cloned; mark it as one.
  const admin = new Client({ connectionString: serverUrl('postgres') });
  await admin.connect();
  await admin.query(`ALTER DATABASE "hd_tpl_${runId}" WITH IS_TEMPLATE true`);
  await admin.end();
  // HD_TEST_REDIS=cluster (scripts/test.sh's cluster run): a three-master Redis Cluster of the run's own, which
  // every test app and spawned process of the run uses instead of the single Redis (REDIS_CLUSTER_NODES).
  if (process.env.HD_TEST_REDIS === 'cluster') {
    const cluster = await startOwnRedisCluster();
    process.env.REDIS_CLUSTER_NODES = cluster.nodes;
    (globalThis as { hdRedisCluster?: { destroy(): Promise<void> } }).hdRedisCluster = cluster;
  }
}
