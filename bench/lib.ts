/**
 * What every in-process benchmark needs: a database of its own (dropped before and after, so a leftover from
 * an interrupted run cannot skew counts), a Redis prefix of its own, the real app on port 0, and a close that
 * removes all of it.
 */
import type { Server } from 'node:http';
import autocannon from 'autocannon';
import { Client } from 'pg';
import { createApp } from '../src/app';
import { loadConfig, type Config } from '../src/config';
import { migrateToLatest, type Db } from '../src/db';
import { ensureDatabase } from '../src/db/admin';
import { createLogger } from '../src/lib/logger';
import { openRuntime, type Runtime } from '../src/runtime';
import type { ApiServices } from '../src/services/api';
import { autocannonLoad, type Load } from './report';

export interface BenchApp {
  config: Config;
  runtime: Runtime;
  db: Db;
  services: ApiServices;
  url: string;
  port: number;
  close(): Promise<void>;
}

export function benchDatabaseUrl(database: string): URL {
  const url = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/helpdesk');
  url.pathname = `/${database}`;
  return url;
}

export async function dropBenchDatabase(url: URL): Promise<void> {
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await client.query(`DROP DATABASE IF EXISTS "${url.pathname.slice(1)}" WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/** `keep`: the database is another stage's of the same bench, with its data: neither dropped first nor after. */
export async function openBenchApp(opts: { database: string; redisPrefix: string; env?: Record<string, string>; keep?: boolean }): Promise<BenchApp> {
  const url = benchDatabaseUrl(opts.database);
  if (!opts.keep) await dropBenchDatabase(url);
  await ensureDatabase(url.toString());
  const config = loadConfig({
    PG_POOL_MAX: '16',
    // A bench drives one key far past the default per-minute budgets (issue 18): it measures the operation,
    // not the 429 (the budget's own cost stays in, since the limiter still runs on every request).
    API_RATE_POINTS: '10000000',
    WORKSPACE_RATE_POINTS: '100000000',
    ...process.env,
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    DATABASE_URL: url.toString(),
    REDIS_PREFIX: opts.redisPrefix,
    ...opts.env,
  });
  const logger = createLogger(config);
  const runtime = openRuntime(config, logger, 'http');
  await migrateToLatest(runtime.db.db);
  const { app, services } = createApp({ config, logger, db: runtime.db.db, redis: runtime.redis, queues: runtime.queues, bus: runtime.bus });
  // As src/server.ts does: macro changes are listened for, so ticket writes ask nothing about triggers.
  const macroChanges = services.macroTriggers.listenForChanges(config.DATABASE_URL);
  await macroChanges.ready;
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const port = (server.address() as { port: number }).port;
  return {
    config,
    runtime,
    db: runtime.db.db,
    services,
    url: `http://127.0.0.1:${port}`,
    port,
    async close() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await services.later.settle();
      await macroChanges.close();
      // Jobs a benchmark scheduled (SLA timers, triggers) live under its prefix: remove them.
      if (runtime.redis.status === 'ready') {
        let cursor = '0';
        do {
          const [next, keys] = await runtime.redis.scan(cursor, 'MATCH', `${opts.redisPrefix}:*`, 'COUNT', 500);
          cursor = next;
          if (keys.length) await runtime.redis.del(...keys);
        } while (cursor !== '0');
      }
      await runtime.close();
      if (!opts.keep) await dropBenchDatabase(url);
    },
  };
}

/** A workspace of its own for a bench case, through the real bootstrap (owner and API key), named uniquely per run. */
export function benchWorkspaces(services: ApiServices) {
  const stamp = Date.now();
  return (name: string) =>
    services.workspaces.bootstrap({
      workspace: name,
      ownerEmail: `${name.toLowerCase()}-${stamp}@bench.test`,
      ownerName: name,
      ownerRealmSubject: `${name.toLowerCase()}-${stamp}`,
    });
}

/**
 * GET load on the in-process app with one API key: `load` for an unreported warm-up, `run` for a measured
 * case, printed as one line and returned as a Load. The load generator runs in a worker thread so it does not
 * share the event loop it is measuring.
 */
export function getLoad(port: number, connections: number, opts: { titleWidth: number }) {
  const load = (path: string, key: string, duration: number) =>
    autocannon({ url: `http://127.0.0.1:${port}${path}`, connections, duration, headers: { authorization: `Bearer ${key}` }, workers: 1 });
  const run = async (title: string, path: string, key: string, duration: number): Promise<Load & { non2xx: number }> => {
    const r = await load(path, key, duration);
    const bad = r.non2xx + r.errors;
    console.log(
      `${title.padEnd(opts.titleWidth)} ${r.requests.average.toFixed(0).padStart(7)} req/s   p50 ${String(r.latency.p50).padStart(4)} ms   p99 ${String(r.latency.p99).padStart(4)} ms   non-2xx ${bad}`,
    );
    return { ...autocannonLoad(r), non2xx: bad };
  };
  return { load, run };
}
