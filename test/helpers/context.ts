import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server } from 'node:http';
import { Client } from 'pg';
import { exportSPKI, generateKeyPair, SignJWT, type JWTPayload } from 'jose';
import supertest from 'supertest';
import { answerClientErrors } from '../../src/http/client-errors';
import { createApp } from '../../src/app';
import { loadConfig, type Config } from '../../src/config';
import type { Db } from '../../src/db';
import { createLogger } from '../../src/lib/logger';
import { openRuntime, type Runtime } from '../../src/runtime';
import { isCluster } from '../../src/queue/connection';
import type { Redis } from 'ioredis';
import type { ApiServices } from '../../src/services/api';
import { createWorkerServices, type WorkerServices } from '../../src/services/worker';
import { startWorkers, type WorkerSet } from '../../workers/runtime';
import { runId, serverUrl } from './db-names';
import { recordingListener } from './answer-recorder';

type SigningKey = Parameters<SignJWT['sign']>[0];

export const TEST_ISSUER = 'https://realm.test/';
export const TEST_AUDIENCE = 'helpdesk-api';

/** Every line the service logged, as written (JSON text), so tests can search for leaked secrets. */
export class LogCapture {
  readonly lines: string[] = [];
  write(chunk: string): void {
    for (const line of chunk.split('\n')) if (line.trim()) this.lines.push(line);
  }
  get text(): string {
    return this.lines.join('\n');
  }
  parsed(): Record<string, unknown>[] {
    return this.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
  }
  clear(): void {
    this.lines.length = 0;
  }
}

export interface Realm {
  sign(claims: JWTPayload & { sub?: string; tenant_id?: string }, opts?: { issuer?: string; audience?: string; expiresIn?: string | number; privateKey?: SigningKey }): Promise<string>;
  publicKeyPem: string;
  privateKey: SigningKey;
}

export async function createRealm(): Promise<Realm> {
  const { privateKey, publicKey } = await generateKeyPair('ES256', { extractable: true });
  const publicKeyPem = await exportSPKI(publicKey);
  return {
    publicKeyPem,
    privateKey,
    async sign(claims, opts = {}) {
      const jwt = new SignJWT(claims)
        .setProtectedHeader({ alg: 'ES256' })
        .setIssuedAt()
        .setIssuer(opts.issuer ?? TEST_ISSUER)
        .setAudience(opts.audience ?? TEST_AUDIENCE)
        .setExpirationTime(opts.expiresIn ?? '10m');
      return jwt.sign(opts.privateKey ?? privateKey);
    },
  };
}

export interface TestContext {
  config: Config;
  server: Server;
  http: ReturnType<typeof supertest>;
  db: Db;
  runtime: Runtime;
  /** The API's container, as src/app.ts built it. */
  services: ApiServices;
  /**
   * The workers' container over the same runtime, as workers/index.ts builds it: `startWorkers` runs the job table
   * with it, and a test calling a job's code (or watching it) directly uses this one.
   */
  workerServices: WorkerServices;
  logs: LogCapture;
  realm: Realm;
  databaseName: string | null;
  startWorkers(): Promise<WorkerSet>;
  close(): Promise<void>;
}

export interface ContextOptions {
  env?: Record<string, string>;
  /** false: point DATABASE_URL at whatever env says without creating a database (used for outage tests). */
  database?: boolean;
}

/** A real app on port 0 over its own cloned database and Redis prefix. */
export async function startTestApp(options: ContextOptions = {}): Promise<TestContext> {
  const suffix = randomBytes(4).toString('hex');
  const wantDb = options.database !== false;
  const databaseName = wantDb ? `hd_t_${runId()}_${suffix}` : null;
  if (databaseName) {
    const admin = new Client({ connectionString: serverUrl('postgres') });
    await admin.connect();
    await admin.query(`CREATE DATABASE "${databaseName}" TEMPLATE "hd_tpl_${runId()}"`);
    await admin.end();
  }
  const realm = await createRealm();
  // Each app's attachments in a directory of its own (issue 34), removed when it closes.
  const filesDir = join(tmpdir(), `hd-files-${runId()}-${suffix}`);
  const config = loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'info',
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    REDIS_PREFIX: `hdt_${runId()}_${suffix}`,
    API_KEY_PEPPER: 'test-pepper-test-pepper-test-pepper-0123',
    REALM_PUBLIC_KEY: realm.publicKeyPem,
    REALM_ISSUER: TEST_ISSUER,
    REALM_AUDIENCE: TEST_AUDIENCE,
    REALM_ALGORITHMS: 'ES256',
    JOB_WAIT_MS: '5000',
    // Every test app listens on 127.0.0.1 and many suites send bad credentials or junk payloads on purpose:
    // the per-address budgets are lifted here and lowered by the tests that exercise them.
    AUTH_FAILURE_RATE_POINTS: '1000000',
    INGEST_REFUSAL_RATE_POINTS: '1000000',
    ...(databaseName ? { DATABASE_URL: serverUrl(databaseName) } : {}),
    FILES_DIR: filesDir,
    // The Redis Cluster run of the intake, exactly-once, SIGKILL and dashboard suites (scripts/test.sh).
    ...(process.env.REDIS_CLUSTER_NODES ? { REDIS_CLUSTER_NODES: process.env.REDIS_CLUSTER_NODES } : {}),
    ...options.env,
  });
  const logs = new LogCapture();
  const logger = createLogger(config, logs);
  const runtime = openRuntime(config, logger, 'http');
  const { app, services } = createApp({ config, logger, db: runtime.db.db, readDb: runtime.readDb?.db ?? null, redis: runtime.redis, queues: runtime.queues, bus: runtime.bus });
  const workerServices = createWorkerServices({ db: runtime.db.db, config, queues: runtime.queues, logger, redis: runtime.redis });
  const server = await new Promise<Server>((resolve) => {
    // app.listen's own server, with the answers recorded when OPENAPI_DRIFT_RECORD is set (test/openapi-drift.test.ts).
    const s = createServer(recordingListener(app)).listen(0, '127.0.0.1', () => resolve(s));
    answerClientErrors(s);
  });
  const workerSets: WorkerSet[] = [];

  return {
    config,
    server,
    http: supertest(server),
    db: runtime.db.db,
    runtime,
    services,
    workerServices,
    logs,
    realm,
    databaseName,
    async startWorkers() {
      const set = await startWorkers({ config, logger, services: workerServices, queues: runtime.queues, redis: runtime.redis });
      workerSets.push(set);
      return set;
    },
    async close() {
      await Promise.all(workerSets.map((w) => w.close()));
      await new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await cleanRedis(runtime, config.REDIS_PREFIX);
      await runtime.close();
      rmSync(filesDir, { recursive: true, force: true });
      if (databaseName) {
        const admin = new Client({ connectionString: serverUrl('postgres') });
        await admin.connect();
        await admin.query(`DROP DATABASE IF EXISTS "${databaseName}" WITH (FORCE)`);
        await admin.end();
      }
    },
  };
}

async function cleanRedis(runtime: Runtime, prefix: string): Promise<void> {
  if (runtime.redis.status !== 'ready') return;
  // Keys start with the prefix, or with a hash tag holding it (job metrics; every queue on a cluster). A
  // cluster is scanned master by master, and keys are deleted one by one (one DEL may not cross slots).
  const nodes: Redis[] = isCluster(runtime.redis) ? runtime.redis.nodes('master') : [runtime.redis];
  for (const node of nodes) {
    for (const pattern of [`${prefix}:*`, `{${prefix}:*`]) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
        cursor = next;
        if (keys.length) await keys.reduce((p, key) => p.del(key), node.pipeline()).exec();
      } while (cursor !== '0');
    }
  }
}
