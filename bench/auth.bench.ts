/**
 * Authenticated request throughput: GET /v1/members with an API key and with a realm access token, against
 * the same app's unauthenticated GET /healthz as the baseline measured in the same run.
 *   npm run bench            (PostgreSQL and Redis must answer; `npm run up` or `npm test` prepares them)
 */
import autocannon from 'autocannon';
import type { Server } from 'node:http';
import { exportSPKI, generateKeyPair, SignJWT } from 'jose';
import { Client } from 'pg';
import { createApp } from '../src/app';
import { loadConfig } from '../src/config';
import { migrateToLatest } from '../src/db';
import { ensureDatabase } from '../src/db/admin';
import { createLogger } from '../src/lib/logger';
import { openRuntime } from '../src/runtime';

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);

async function main() {
  const base = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/helpdesk');
  base.pathname = '/helpdesk_bench';
  await ensureDatabase(base.toString());
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const config = loadConfig({
    ...process.env,
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    DATABASE_URL: base.toString(),
    REDIS_PREFIX: 'hd_bench',
    REALM_PUBLIC_KEY: await exportSPKI(publicKey),
    REALM_ISSUER: 'urn:bench',
    REALM_ALGORITHMS: 'ES256',
    PG_POOL_MAX: '16',
  });
  const logger = createLogger(config);
  const runtime = openRuntime(config, logger, 'http');
  await migrateToLatest(runtime.db.db);
  const { app, services } = createApp({ config, logger, db: runtime.db.db, redis: runtime.redis, queues: runtime.queues, bus: runtime.bus });
  const ws = await services.workspaces.bootstrap({
    workspace: 'Bench',
    ownerEmail: `bench-${Date.now()}@bench.test`,
    ownerName: 'Bench',
    ownerRealmSubject: `bench-${Date.now()}`,
  });
  const subject = (await runtime.db.db.selectFrom('users').select('realm_subject').where('id', '=', ws.owner_user_id).executeTakeFirstOrThrow()).realm_subject!;
  const token = await new SignJWT({ tenant_id: ws.tenant_id }).setProtectedHeader({ alg: 'ES256' }).setSubject(subject).setIssuer('urn:bench').setExpirationTime('1h').sign(privateKey);

  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const port = (server.address() as { port: number }).port;

  const run = async (title: string, path: string, headers: Record<string, string> = {}) => {
    // The load generator runs in a worker thread so it does not share the event loop it is measuring.
    const r = await autocannon({ url: `http://127.0.0.1:${port}${path}`, connections: CONNECTIONS, duration: DURATION, headers, workers: 1 });
    const bad = r.non2xx + r.errors;
    console.log(
      `${title.padEnd(34)} ${r.requests.average.toFixed(0).padStart(7)} req/s   p50 ${String(r.latency.p50).padStart(4)} ms   p99 ${String(r.latency.p99).padStart(4)} ms   non-2xx ${bad}`,
    );
    return r.requests.average;
  };

  console.log(`node ${process.version}, ${CONNECTIONS} connections, ${DURATION}s each`);
  const baseline = await run('baseline GET /healthz (no auth)', '/healthz');
  const key = await run('GET /v1/members with API key', '/v1/members', { authorization: `Bearer ${ws.api_key.secret}` });
  const jwt = await run('GET /v1/members with access token', '/v1/members', { authorization: `Bearer ${token}` });
  console.log(`API key path: ${((key / baseline) * 100).toFixed(0)}% of baseline; access token path: ${((jwt / baseline) * 100).toFixed(0)}%`);

  server.close();
  await runtime.close();
  const admin = new Client({ connectionString: base.toString().replace('/helpdesk_bench', '/postgres') });
  await admin.connect();
  await admin.query('DROP DATABASE IF EXISTS helpdesk_bench WITH (FORCE)');
  await admin.end();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
