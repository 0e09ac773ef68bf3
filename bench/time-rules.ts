/**
 * The time-rule sweep (issue 37) over 1,000,000 open tickets: every one pending for four days, one rule
 * "pending for 3 days → solved" qualifying them all, run by the sweep's own code (`timeRules.run`, what the
 * rules.run job calls) with no time budget until every ticket has fired. Figures:
 *   - rows/s: tickets fired per second of the run (each: its firing row, the status change through the macro
 *     apply path, its timeline events and outbound events, one transaction per batch);
 *   - the longest lock held: the longest batch transaction (a ticket is locked from its batch's SELECT … FOR UPDATE
 *     SKIP LOCKED to that batch's commit, so no lock outlives it), with the batches' p50 and p99;
 *   - what an agent's write feels meanwhile: a probe locking a random ticket of the set FOR UPDATE every 50 ms,
 *     its longest wait (it waits at most for the batch holding that ticket);
 * against a same-run baseline: a plain `UPDATE tickets SET status = 'solved'` of the same batch size over
 * BENCH_TIME_RULE_BASELINE tickets of a second workspace, batch after batch in keyset order, each one transaction
 * (what the sweep would cost if it were only the row write).
 *   npm run bench -- time-rules      (PostgreSQL and Redis must answer)
 * BENCH_TIME_RULE_TICKETS (default 1,000,000), BENCH_TIME_RULE_BASELINE (default 100,000 or the ticket count if
 * smaller), TIME_RULE_BATCH_SIZE (default 500), BENCH_TIME_RULE_SECONDS (unset: until every ticket has fired; set: the
 * sweep runs that long over the whole qualifying set and the figures are of what it fired meanwhile, with the
 * time the whole set would take at that rate).
 */
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { rebuildState } from '../src/domains/reports/store';
import { createLogger } from '../src/lib/logger';
import { createWorkerServices } from '../src/services/worker';
import { benchWorkspaces, openBenchApp } from './lib';
import { createReport, quantile, runBench } from './report';

const TICKETS = Number(process.env.BENCH_TIME_RULE_TICKETS ?? 1_000_000);
const BASELINE = Number(process.env.BENCH_TIME_RULE_BASELINE ?? Math.min(100_000, TICKETS));
const SEED_CHUNK = 25_000;
const CAP_SECONDS = process.env.BENCH_TIME_RULE_SECONDS ? Number(process.env.BENCH_TIME_RULE_SECONDS) : null;
const DB_NAME = 'helpdesk_bench_time_rules';

const report = createReport('time-rules', {
  title: `The time-rule sweep over ${TICKETS.toLocaleString('en-US')} open tickets`,
  settings: { tickets: TICKETS, 'baseline tickets': BASELINE, ...(CAP_SECONDS ? { 'sweep stopped after': `${CAP_SECONDS} s` } : {}) },
});

async function main() {
  // Seeding writes each chunk's search documents in its INSERT (the search triggers): past the default statement timeout.
  const bench = await openBenchApp({ database: DB_NAME, redisPrefix: 'hd_bench_time_rules', env: { PG_STATEMENT_TIMEOUT_MS: '600000' } });
  const { db, config, runtime, services, port } = bench;
  const batchSize = config.TIME_RULE_BATCH_SIZE;
  report.settings({ 'batch size (most)': batchSize, 'batch target': `${config.TIME_RULE_BATCH_MS} ms` });
  // The workers' container in this process: the sweep runs here exactly as in a worker.
  const workers = createWorkerServices({ db, config, queues: runtime.queues, logger: createLogger(config), redis: runtime.redis });
  try {
    const bootstrap = benchWorkspaces(services);
    const api = (path: string, key: string, body: unknown) =>
      fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });

    /** A workspace with `n` pending tickets, four days in their status: one through the API, the rest copied from it in chunks. */
    const seed = async (name: string, n: number) => {
      const ws = await bootstrap(name);
      const res = await api('/v1/tickets', ws.api_key.secret, { subject: 'Seed', description: 'seed', customer_email: 'seed@bench.test' });
      if (res.status !== 201) throw new Error(`seed ticket: ${res.status} ${await res.text()}`);
      const seedId = ((await res.json()) as { id: string }).id;
      await sql`UPDATE tickets SET status = 'pending', status_entered_at = now() - interval '4 days' WHERE id = ${seedId}`.execute(db);
      const t0 = performance.now();
      for (let lo = 1; lo < n; lo += SEED_CHUNK) {
        const hi = Math.min(n - 1, lo + SEED_CHUNK - 1);
        await sql`
          INSERT INTO tickets (id, tenant_id, subject, description, status, priority, source, customer_id, sla_policy_id,
                               first_response_due, resolution_due, tags, status_entered_at, created_at, updated_at)
          SELECT gen_random_uuid(), t.tenant_id, 'Waiting on the customer ' || g, 'Bench ticket ' || g, 'pending',
                 (ARRAY['low','normal','high','urgent'])[1 + g % 4], (ARRAY['email','sms','web_chat','api'])[1 + g % 4],
                 t.customer_id, t.sla_policy_id, now() + interval '4 hours', now() + interval '1 day', ARRAY['bench'],
                 now() - interval '4 days' - (g % 86400) * interval '1 second', now() - interval '5 days', now() - interval '4 days'
          FROM tickets t, generate_series(${lo}::int, ${hi}::int) AS g
          WHERE t.tenant_id = ${ws.tenant_id}::uuid AND t.id = ${seedId}::uuid`.execute(db);
        process.stdout.write(`\r${name}: ${(hi + 1).toLocaleString('en-US')} of ${n.toLocaleString('en-US')} tickets`);
      }
      process.stdout.write(` in ${((performance.now() - t0) / 1000).toFixed(0)} s\n`);
      return ws;
    };
    const big = await seed('Rules', TICKETS);
    const plain = await seed('Baseline', BASELINE);
    // Tickets written by the API are tracked by the reports from their first event; the copies above are not, and
    // an untracked ticket's first report write counts its whole history (a heavier statement than a status change's
    // own). Their report state rows are built here from the raw rows, as the migration built them for old tickets.
    await db.transaction().execute((tx) => rebuildState(tx, big.tenant_id));
    await sql`VACUUM ANALYZE tickets`.execute(db);

    const created = await api('/v1/macros', big.api_key.secret, {
      name: 'Solve stale pending',
      actions: [{ type: 'set_status', status: 'solved' }],
      trigger: { event: 'time', time: { hours_since: 'status_entered', hours: 72 }, conditions: { status: 'pending' } },
    });
    if (created.status !== 201) throw new Error(`rule: ${created.status} ${await created.text()}`);
    const ruleId = ((await created.json()) as { id: string }).id;

    // The probe: an agent's write on a random ticket of the set, every 50 ms, for as long as the sweep runs.
    const ids = (await sql<{ id: string }>`SELECT id FROM tickets WHERE tenant_id = ${big.tenant_id} ORDER BY random() LIMIT 2000`.execute(db)).rows.map((r) => r.id);
    const waits: number[] = [];
    let sweeping = true;
    const probe = (async () => {
      while (sweeping) {
        const id = ids[Math.floor(Math.random() * ids.length)]!;
        const t0 = performance.now();
        await db.transaction().execute((tx) => sql`SELECT id FROM tickets WHERE tenant_id = ${big.tenant_id} AND id = ${id} FOR UPDATE`.execute(tx));
        waits.push(performance.now() - t0);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    const batches: number[] = [];
    const sizes: number[] = [];
    const t0 = performance.now();
    let lastPrint = 0;
    const out = await workers.timeRules
      .run(big.tenant_id, ruleId, {
        budgetMs: CAP_SECONDS ? CAP_SECONDS * 1000 : Number.POSITIVE_INFINITY,
        onBatch: (b) => {
          batches.push(b.ms);
          sizes.push(b.seen);
          if (performance.now() - lastPrint > 2000) {
            lastPrint = performance.now();
            const fired = sizes.reduce((n, x) => n + x, 0);
            process.stdout.write(`\rsweep: ~${Math.min(fired, TICKETS).toLocaleString('en-US')} fired, ${(fired / ((lastPrint - t0) / 1000)).toFixed(0)} rows/s`);
          }
        },
      })
      .finally(() => {
        sweeping = false;
      });
    const seconds = (performance.now() - t0) / 1000;
    await probe;
    process.stdout.write('\n');
    if (CAP_SECONDS === null && out.fired !== TICKETS) throw new Error(`the sweep fired ${out.fired} of ${TICKETS} tickets`);
    const left = (await sql<{ n: number }>`SELECT count(*)::int AS n FROM tickets WHERE tenant_id = ${big.tenant_id} AND status <> 'solved'`.execute(db)).rows[0]!.n;
    // Every ticket the sweep says it fired is solved, and no other: the capped run's figures are of real firings.
    if (left !== TICKETS - out.fired) throw new Error(`${TICKETS - left} tickets solved, ${out.fired} fired`);

    // The baseline: the same rows written without the rule: a plain UPDATE per batch, keyset by id, one transaction each.
    const plainBatches: number[] = [];
    const b0 = performance.now();
    let after = '00000000-0000-0000-0000-000000000000';
    for (;;) {
      const s = performance.now();
      const rows = await db.transaction().execute(async (tx) => {
        const { rows } = await sql<{ id: string }>`
          UPDATE tickets SET status = 'solved', status_entered_at = now(), updated_at = now()
          WHERE tenant_id = ${plain.tenant_id} AND id IN (
            SELECT id FROM tickets WHERE tenant_id = ${plain.tenant_id} AND id > ${after}::uuid AND status = 'pending' ORDER BY id LIMIT ${batchSize} FOR UPDATE SKIP LOCKED)
          RETURNING id`.execute(tx);
        return rows;
      });
      plainBatches.push(performance.now() - s);
      if (rows.length === 0) break;
      after = rows.map((r) => r.id).sort().at(-1)!;
    }
    const plainSeconds = (performance.now() - b0) / 1000;

    const rate = out.fired / seconds;
    const plainRate = BASELINE / plainSeconds;
    console.log(
      `sweep: ${out.fired} of ${TICKETS} tickets in ${seconds.toFixed(1)} s, ${rate.toFixed(0)} rows/s, ${out.batches} batches; longest batch ${out.longestBatchMs.toFixed(0)} ms, ` +
        `p50 ${quantile(batches, 0.5).toFixed(0)} ms, p99 ${quantile(batches, 0.99).toFixed(0)} ms, median ${quantile(sizes, 0.5)} tickets a batch; probe: ${waits.length} writes, longest wait ${Math.max(...waits).toFixed(0)} ms`,
    );
    console.log(`baseline: ${BASELINE} plain UPDATEs in ${plainSeconds.toFixed(1)} s, ${plainRate.toFixed(0)} rows/s; longest batch ${Math.max(...plainBatches).toFixed(0)} ms`);

    report.figure({ name: 'sweep: tickets fired per second', value: rate, unit: 'rows/s', baseline: plainRate });
    report.figure({ name: 'sweep: whole run', value: seconds, unit: 's' });
    report.figure({ name: 'tickets fired (of the qualifying set)', value: out.fired, baseline: TICKETS });
    if (out.fired < TICKETS) report.figure({ name: 'the whole set at this rate', value: TICKETS / rate / 60, unit: 'min' });
    report.figure({ name: 'longest lock held (longest batch transaction)', value: out.longestBatchMs, unit: 'ms', baseline: Math.max(...plainBatches) });
    report.figure({ name: 'batch transaction p50', value: quantile(batches, 0.5), unit: 'ms', baseline: quantile(plainBatches, 0.5) });
    report.figure({ name: 'batch transaction p99', value: quantile(batches, 0.99), unit: 'ms', baseline: quantile(plainBatches, 0.99) });
    report.figure({ name: 'batches (transactions)', value: out.batches });
    report.figure({ name: 'tickets per batch, median (sized to TIME_RULE_BATCH_MS)', value: quantile(sizes, 0.5), baseline: batchSize });
    report.figure({ name: 'an agent\'s write meanwhile: longest wait for its ticket', value: Math.max(...waits), unit: 'ms', target: '≤ the longest batch (bench check)', met: Math.max(...waits) <= out.longestBatchMs + 50 });
    report.note(
      `Each batch is one transaction of at most ${batchSize} tickets: lock (FOR UPDATE SKIP LOCKED), firing rows, the rule's actions through the macro apply path with its timeline and outbound events, commit. ` +
        'The baseline is a plain UPDATE of the same batch size on a second workspace\'s tickets, keyset by id: the row write alone, without firings, events or the apply path.',
    );
  } finally {
    await bench.close();
  }
}

runBench(main);
