/**
 * Synchronous writes and ticket reads against same-process baselines (issue 21, part 2). The app runs in this
 * process; next to it, on the same event loop and the same database pool, two baseline routes with no auth:
 *   - write baseline: a transaction that locks one row by primary key, updates it, inserts one row, answers;
 *   - read baseline: one row read by primary key.
 * Each case spreads BENCH_CONNECTIONS (16) callers over BENCH_TICKETS (1,000) tickets for BENCH_SECONDS (5):
 * PATCH /v1/tickets/{id}, POST …/replies, POST …/notes, GET /v1/tickets/{id} (50 events), GET /v1/tickets
 * (first page), POST /v1/teams/{id}/assign, and PATCH on one ticket with 5,000 events against PATCH on one new
 * ticket, and PATCH /v1/customers/{id} (issue 38: a name change, which also re-indexes the customer's 3 tickets)
 * against PATCH /v1/tickets/{id} in the same run. For each it prints the rate as a ratio to its baseline, and the database round trips and Redis
 * commands per request (every statement the pool sends, BEGIN and COMMIT included), and CPU-ms per request
 * by component: this process's main thread (the app and the baselines; the load generator runs in a thread
 * of its own and is not counted), PostgreSQL and Redis, from /proc.
 * Targets: every write ≥ 0.5× the write baseline; GET ticket ≥ 0.7× the read baseline; PATCH on the
 * 5,000-event ticket within 10 % of a new ticket; PATCH customer at least PATCH ticket's throughput (issue 38).
 *   npm run bench:writes     BENCH_SECONDS, BENCH_CONNECTIONS, BENCH_TICKETS, BENCH_CASES (a comma list of
 *                            words: only the cases whose name holds one, e.g. "GET,PATCH"; the baselines always run)
 */
import type { Server } from 'node:http';
import { Worker } from 'node:worker_threads';
import express from 'express';
import IORedis from 'ioredis';
import { sql } from 'kysely';
import { Client } from 'pg';
import { newId } from '../src/lib/ids';
import { openBenchApp } from './lib';
import { cpuPer, cpuSampleHere, redisCalls } from './processes';
import { createReport, quantile, runBench, type Load } from './report';

const DURATION = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const TICKETS = Number(process.env.BENCH_TICKETS ?? 1000);
const ONLY = process.env.BENCH_CASES ? process.env.BENCH_CASES.split(',').map((w) => w.trim()) : null;
const wanted = (name: string) => !ONLY || ONLY.some((w) => name.includes(w));
const report = createReport('writes', {
  title: 'Synchronous writes and ticket reads against same-process baselines',
  settings: { connections: CONNECTIONS, seconds: DURATION, tickets: TICKETS },
});

// Every statement any pg client in this process sends (the app's pool and the baselines'), BEGIN and COMMIT
// included: the round trips a request costs.
let statements = 0;
const query = Client.prototype.query;
Client.prototype.query = function counted(this: Client, ...args: unknown[]) {
  statements += 1;
  return (query as (...a: unknown[]) => unknown).apply(this, args);
} as typeof Client.prototype.query;

/** The load generator: one loop per caller in a worker thread (not on the event loop it measures). */
const LOADER = `
const { parentPort, workerData } = require('node:worker_threads');
const { base, key, method, path, body, ids, callers, durationMs } = workerData;
let next = 0;
const latencies = [];
const failures = {};
let ok = 0, failed = 0;
async function caller(deadline) {
  while (performance.now() < deadline) {
    const i = next++;
    const id = ids[i % ids.length];
    const pass = Math.floor(i / ids.length);
    const t0 = performance.now();
    let status = 0;
    try {
      const b = body === 'patch' ? { priority: pass % 2 ? 'high' : 'low' }
        : body === 'message' ? { body: 'Bench message ' + i }
        : body === 'assign' ? { ticket_id: id }
        : body === 'customer' ? { display_name: 'Bench Customer ' + (pass % 2 ? 'B' : 'A'), notes: 'Bench note ' + i }
        : undefined;
      const res = await fetch(base + path.replace('{id}', id), { method, headers: { authorization: 'Bearer ' + key, 'content-type': 'application/json' }, body: b === undefined ? undefined : JSON.stringify(b) });
      status = res.status;
      await res.arrayBuffer();
    } catch (err) {
      status = 'error:' + err.message;
    }
    latencies.push(performance.now() - t0);
    if (status >= 200 && status < 300) ok++;
    else { failed++; failures[status] = (failures[status] || 0) + 1; }
  }
}
(async () => {
  const start = performance.now();
  await Promise.all(Array.from({ length: callers }, () => caller(start + durationMs)));
  parentPort.postMessage({ latencies, ok, failed, failures, elapsedMs: performance.now() - start });
})();
`;

/** CPU-ms per request: this process's main thread, PostgreSQL, Redis. */
type Cpu = { api: number; postgres: number; redis: number };
type Case = Load & { trips: number; cmds: number; cpu: Cpu };
const cpuTotal = (c: Cpu) => c.api + c.postgres + c.redis;
const cpuText = (c: Cpu) => `api ${c.api.toFixed(2)} pg ${c.postgres.toFixed(2)} redis ${c.redis.toFixed(2)} = ${cpuTotal(c).toFixed(2)}`;

interface Plan {
  method: 'GET' | 'POST' | 'PATCH';
  path: string;
  body?: 'patch' | 'message' | 'assign' | 'customer';
  ids: string[];
}
interface LoadResult {
  latencies: number[];
  ok: number;
  failed: number;
  failures: Record<string, number>;
  elapsedMs: number;
}

async function main() {
  const bench = await openBenchApp({ database: 'helpdesk_bench_writes', redisPrefix: 'hd_bench_writes' });
  const { db, services, url } = bench;
  const redis = new IORedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  let baselineServer: Server | undefined;
  try {
    const stamp = Date.now();
    const ws = await services.workspaces.bootstrap({ workspace: 'Bench', ownerEmail: `writes-${stamp}@bench.test`, ownerName: 'Bench Owner' });
    const key = ws.api_key.secret;
    const api = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${url}${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await res.text();
      if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
      return text ? (JSON.parse(text) as Record<string, unknown>) : {};
    };

    // The baselines: a table of their own in the bench database, on the app's own pool.
    await sql`CREATE TABLE bench_rows (id int PRIMARY KEY, n int NOT NULL DEFAULT 0)`.execute(db);
    await sql`CREATE TABLE bench_log (id bigserial PRIMARY KEY, row_id int NOT NULL, at timestamptz NOT NULL DEFAULT now())`.execute(db);
    await sql`INSERT INTO bench_rows (id) SELECT g FROM generate_series(1, ${TICKETS}::int) g`.execute(db);
    const baseline = express();
    baseline.use(express.json());
    baseline.post('/baseline/write/:id', async (req, res) => {
      const id = Number(req.params.id);
      const n = await db.transaction().execute(async (tx) => {
        await sql`SELECT id FROM bench_rows WHERE id = ${id} FOR UPDATE`.execute(tx);
        const r = await sql<{ n: number }>`UPDATE bench_rows SET n = n + 1 WHERE id = ${id} RETURNING n`.execute(tx);
        await sql`INSERT INTO bench_log (row_id) VALUES (${id})`.execute(tx);
        return r.rows[0]!.n;
      });
      res.status(200).json({ id, n });
    });
    baseline.get('/baseline/read/:id', async (req, res) => {
      const r = await sql<{ id: number; n: number }>`SELECT id, n FROM bench_rows WHERE id = ${Number(req.params.id)}`.execute(db);
      res.status(200).json(r.rows[0]);
    });
    baselineServer = await new Promise<Server>((resolve) => {
      const s = baseline.listen(0, '127.0.0.1', () => resolve(s));
    });
    const baseUrl = `http://127.0.0.1:${(baselineServer.address() as { port: number }).port}`;
    const rowIds = Array.from({ length: TICKETS }, (_, i) => String(i + 1));

    // The tickets, in one INSERT … SELECT (open, unassigned, the default SLA policy), and a team of 8 online
    // members for the assign case.
    const customerId = newId();
    await sql`INSERT INTO customers (id, tenant_id, display_name, email) VALUES (${customerId}::uuid, ${ws.tenant_id}::uuid, 'Bench Customer', 'customer@bench.test')`.execute(db);
    const seed = async (n: number) =>
      (
        await sql<{ id: string }>`
          INSERT INTO tickets (id, tenant_id, subject, description, status, priority, source, customer_id, sla_policy_id, first_response_due, resolution_due)
          SELECT gen_random_uuid(), ${ws.tenant_id}::uuid, 'Bench ticket ' || g, 'Seeded for the writes bench.', 'open', 'normal', 'api',
                 ${customerId}::uuid, p.id, now() + interval '4 hours', now() + interval '1 day'
          FROM generate_series(1, ${n}::int) AS g, sla_policies p
          WHERE p.tenant_id = ${ws.tenant_id}::uuid AND p.is_default
          RETURNING id`.execute(db)
      ).rows.map((r) => r.id);
    const ticketIds = await seed(TICKETS);
    const [withFifty, withHistory, fresh] = await seed(3);
    // Customers for PATCH /v1/customers/{id} (issue 38), each with a handle and three tickets (a name change
    // re-indexes them), in three statements.
    const customerIds = (
      await sql<{ id: string }>`
        INSERT INTO customers (id, tenant_id, display_name, email)
        SELECT gen_random_uuid(), ${ws.tenant_id}::uuid, 'Bench Customer ' || g, 'person' || g || '@bench.test' FROM generate_series(1, ${TICKETS}::int) g
        RETURNING id`.execute(db)
    ).rows.map((r) => r.id);
    await sql`INSERT INTO customer_handles (tenant_id, kind, handle, customer_id)
      SELECT ${ws.tenant_id}::uuid, 'whatsapp_id', '4915' || lpad(row_number() OVER ()::text, 9, '0'), c FROM unnest(${customerIds}::uuid[]) AS c`.execute(db);
    await sql`INSERT INTO tickets (id, tenant_id, subject, description, status, priority, source, customer_id, sla_policy_id, first_response_due, resolution_due)
      SELECT gen_random_uuid(), ${ws.tenant_id}::uuid, 'Customer bench ticket', 'Seeded.', 'open', 'normal', 'api', c, p.id, now() + interval '4 hours', now() + interval '1 day'
      FROM unnest(${customerIds}::uuid[]) AS c, generate_series(1, 3), sla_policies p
      WHERE p.tenant_id = ${ws.tenant_id}::uuid AND p.is_default`.execute(db);
    /** `n` internal notes on a ticket, in one statement (a history, not something the bench measures). */
    const history = (ticketId: string, n: number) =>
      sql`INSERT INTO ticket_events (id, tenant_id, ticket_id, kind, body, meta, actor_type, actor_name, created_at)
          SELECT gen_random_uuid(), ${ws.tenant_id}::uuid, ${ticketId}::uuid, 'internal_note', 'History ' || g, '{}'::jsonb, 'user', 'Bench', now() - (g || ' seconds')::interval
          FROM generate_series(1, ${n}::int) g`.execute(db);
    await history(withFifty!, 50);
    await history(withHistory!, 5000);
    const team = await api('POST', '/v1/teams', { name: 'Bench team' });
    const memberIds: string[] = [];
    for (let i = 0; i < 8; i += 1) {
      const m = await api('POST', '/v1/members', { email: `agent${i}-${stamp}@bench.test`, name: `Agent ${i}`, role: 'editor', realm_subject: `agent${i}-${stamp}` });
      memberIds.push(m.user_id as string);
      await api('POST', `/v1/teams/${team.id as string}/members`, { user_id: m.user_id });
    }
    await sql`UPDATE memberships SET presence = 'online', presence_at = now() WHERE tenant_id = ${ws.tenant_id}::uuid AND user_id = ANY(${memberIds}::uuid[])`.execute(db);
    await sql`VACUUM ANALYZE`.execute(db);

    const run = async (title: string, plan: Plan, base = url, durationMs = DURATION * 1000) => {
      const [s0, r0, c0] = [statements, await redisCalls(redis), cpuSampleHere()];
      const r = await new Promise<LoadResult>((resolve, reject) => {
        const w = new Worker(LOADER, { eval: true, workerData: { base, key, method: plan.method, path: plan.path, body: plan.body, ids: plan.ids, callers: CONNECTIONS, durationMs } });
        w.once('message', (m: LoadResult) => {
          resolve(m);
          void w.terminate();
        });
        w.once('error', reject);
      });
      const c1 = cpuSampleHere();
      const requests = r.ok + r.failed;
      const trips = (statements - s0) / requests;
      const cmds = ((await redisCalls(redis)) - r0 - 1) / requests;
      const cpu = cpuPer(c0, c1, requests) as Cpu;
      const load: Case = { rate: r.ok / (r.elapsedMs / 1000), p50: quantile(r.latencies, 0.5), p99: quantile(r.latencies, 0.99), errors: r.failed, trips, cmds, cpu };
      const fails = r.failed ? `   failures ${JSON.stringify(r.failures)}` : '';
      console.log(`${title.padEnd(44)} ${load.rate.toFixed(0).padStart(6)} /s   p50 ${load.p50.toFixed(1).padStart(6)} ms   p99 ${load.p99.toFixed(1).padStart(6)} ms   ${trips.toFixed(1).padStart(5)} db trips   ${cmds.toFixed(1).padStart(5)} Redis cmds   CPU-ms/req ${cpuText(cpu)}${fails}`);
      return load;
    };

    console.log(`node ${process.version}, ${CONNECTIONS} connections, ${DURATION}s each, ${TICKETS} tickets`);
    // Unreported warm-up of every path (JIT, pool growth, caches).
    const short = 1000;
    await run('warm-up', { method: 'POST', path: '/baseline/write/{id}', ids: rowIds }, baseUrl, short);
    await run('warm-up', { method: 'PATCH', path: '/v1/tickets/{id}', body: 'patch', ids: ticketIds }, url, short);
    await run('warm-up', { method: 'GET', path: '/v1/tickets/{id}', ids: [withFifty!] }, url, short);

    const writeBase = await run('baseline: lock, update, insert (no auth)', { method: 'POST', path: '/baseline/write/{id}', ids: rowIds }, baseUrl);
    const readBase = await run('baseline: read one row (no auth)', { method: 'GET', path: '/baseline/read/{id}', ids: rowIds }, baseUrl);
    const plans: { name: string; plan: Plan; against: 'write' | 'read' | null; target?: number }[] = [
      { name: 'PATCH /v1/tickets/{id}', plan: { method: 'PATCH', path: '/v1/tickets/{id}', body: 'patch', ids: ticketIds }, against: 'write', target: 0.5 },
      { name: 'POST /v1/tickets/{id}/replies', plan: { method: 'POST', path: '/v1/tickets/{id}/replies', body: 'message', ids: ticketIds }, against: 'write', target: 0.5 },
      { name: 'POST /v1/tickets/{id}/notes', plan: { method: 'POST', path: '/v1/tickets/{id}/notes', body: 'message', ids: ticketIds }, against: 'write', target: 0.5 },
      { name: 'POST /v1/teams/{id}/assign', plan: { method: 'POST', path: `/v1/teams/${team.id as string}/assign`, body: 'assign', ids: ticketIds }, against: 'write', target: 0.5 },
      { name: 'GET /v1/tickets/{id} (50 events)', plan: { method: 'GET', path: '/v1/tickets/{id}', ids: [withFifty!] }, against: 'read', target: 0.7 },
      { name: 'GET /v1/tickets (first page)', plan: { method: 'GET', path: '/v1/tickets', ids: ['-'] }, against: 'read' },
    ];
    const cases: { name: string; load: Case; against: 'write' | 'read' | null; target?: number }[] = [];
    for (const c of plans.filter((p) => wanted(p.name))) cases.push({ ...c, load: await run(c.name, c.plan) });
    // Issue 38: a customer's write against a ticket's, back to back in this run (the ticket's measured again here,
    // next to it, so both see the same machine).
    const people = wanted('customers')
      ? {
          ticket: await run('PATCH /v1/tickets/{id} (beside customers)', { method: 'PATCH', path: '/v1/tickets/{id}', body: 'patch', ids: ticketIds }),
          customer: await run('PATCH /v1/customers/{id}', { method: 'PATCH', path: '/v1/customers/{id}', body: 'customer', ids: customerIds }),
        }
      : null;
    const longTicket = wanted('5,000') ? { fresh: await run('PATCH one new ticket', { method: 'PATCH', path: '/v1/tickets/{id}', body: 'patch', ids: [fresh!] }), long: await run('PATCH one ticket with 5,000 events', { method: 'PATCH', path: '/v1/tickets/{id}', body: 'patch', ids: [withHistory!] }) } : null;

    report.figure({ name: 'baseline: lock, update, insert (no auth)', value: writeBase.rate, unit: 'req/s' });
    report.figure({ name: 'baseline: lock, update, insert: db round trips per request', value: writeBase.trips, unit: 'round trips' });
    report.figure({ name: 'baseline: lock, update, insert: CPU-ms per request', value: cpuText(writeBase.cpu) });
    report.figure({ name: 'baseline: read one row (no auth)', value: readBase.rate, unit: 'req/s' });
    report.figure({ name: 'baseline: read one row: CPU-ms per request', value: cpuText(readBase.cpu) });
    for (const c of cases) {
      const base = c.against === 'write' ? writeBase : readBase;
      const ratio = c.load.rate / base.rate;
      report.figure({
        name: `${c.name}: throughput`,
        value: c.load.rate,
        unit: 'req/s',
        baseline: base.rate,
        ...(c.target ? { target: `≥ ${c.target}× the ${c.against} baseline (issue 21)`, met: ratio >= c.target } : {}),
      });
      report.figure({ name: `${c.name}: p99`, value: c.load.p99, unit: 'ms', baseline: base.p99 });
      report.figure({ name: `${c.name}: db round trips and Redis commands per request`, value: `${c.load.trips.toFixed(1)} round trips, ${c.load.cmds.toFixed(1)} Redis commands` });
      // Cost per request, less noisy than a rate on a shared machine: the baseline's CPU-ms over this case's.
      report.figure({ name: `${c.name}: CPU-ms per request (${cpuText(c.load.cpu)})`, value: cpuTotal(c.load.cpu), unit: 'ms', baseline: cpuTotal(base.cpu), ratio: cpuTotal(base.cpu) / cpuTotal(c.load.cpu), ratioKind: 'baseline/value' });
      if (c.target) console.log(`${ratio >= c.target ? 'PASS' : 'MISS'}: ${c.name} ${ratio.toFixed(2)}× the ${c.against} baseline (target ≥ ${c.target}×)`);
    }
    if (longTicket) {
      const historyRatio = longTicket.long.rate / longTicket.fresh.rate;
      report.figure({ name: 'PATCH one ticket with 5,000 events: throughput', value: longTicket.long.rate, unit: 'req/s', baseline: longTicket.fresh.rate, target: 'within 10 % of a new ticket (issue 21)', met: historyRatio >= 0.9 });
      console.log(`${historyRatio >= 0.9 ? 'PASS' : 'MISS'}: PATCH on a ticket with 5,000 events ${historyRatio.toFixed(2)}× a new ticket (target ≥ 0.90×)`);
    }
    if (people) {
      const ratio = people.customer.rate / people.ticket.rate;
      report.figure({ name: 'PATCH /v1/customers/{id}: throughput', value: people.customer.rate, unit: 'req/s', baseline: people.ticket.rate, target: '≥ PATCH /v1/tickets/{id} in the same run (issue 38)', met: ratio >= 1 });
      report.figure({ name: 'PATCH /v1/customers/{id}: p99', value: people.customer.p99, unit: 'ms', baseline: people.ticket.p99 });
      report.figure({ name: 'PATCH /v1/customers/{id}: db round trips and Redis commands per request', value: `${people.customer.trips.toFixed(1)} round trips (ticket ${people.ticket.trips.toFixed(1)}), ${people.customer.cmds.toFixed(1)} Redis commands` });
      report.figure({
        name: `PATCH /v1/customers/{id}: CPU-ms per request (${cpuText(people.customer.cpu)})`,
        value: cpuTotal(people.customer.cpu),
        unit: 'ms',
        baseline: cpuTotal(people.ticket.cpu),
        ratio: cpuTotal(people.ticket.cpu) / cpuTotal(people.customer.cpu),
        ratioKind: 'baseline/value',
      });
      console.log(`${ratio >= 1 ? 'PASS' : 'MISS'}: PATCH customer ${ratio.toFixed(2)}× PATCH ticket (target ≥ 1×)`);
    }
  } finally {
    if (baselineServer) await new Promise<void>((r) => baselineServer!.close(() => r()));
    redis.disconnect();
    await bench.close();
  }
}

runBench(main);
