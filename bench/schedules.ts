/**
 * Recomputing due times after a schedule change (issue 37): 100,000 open tickets under a business-time policy
 * (Berlin, 09:00–17:00 Monday to Friday), created over the last ten days, a fifth of them pending (their resolution
 * clock paused) and a tenth answered; then the schedule gains Saturday hours and a holiday, and the recompute runs
 * with the job's own code (`tickets.recomputeSchedule`, what `schedules.recompute` calls), batches of
 * SCHEDULE_RECOMPUTE_BATCH read by keyset and written with one `UPDATE … FROM (VALUES …)` each. Figures:
 *   - the whole recompute: seconds, and tickets per second;
 *   - the longest lock held: each batch's one statement holds its rows' locks for its duration only, so the longest
 *     statement is the longest any ticket is held (with the statements' p50 and p99);
 *   - correctness: a sample of 2,000 tickets checked against the business-time module;
 * against a same-run baseline: a plain `UPDATE tickets SET resolution_due = resolution_due + 1 minute` over the same
 * tickets, the same batch size by keyset, one statement per batch (what the recompute would cost if it were only the
 * row write).
 *   npm run bench -- schedules      (PostgreSQL and Redis must answer)
 * BENCH_SCHEDULE_TICKETS (default 100,000), SCHEDULE_RECOMPUTE_BATCH (default 1,000).
 */
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { compileSchedule, type MinuteInterval } from '../src/domains/schedules/business-time';
import { recomputedDues } from '../src/domains/tickets/sla';
import { benchWorkspaces, openBenchApp } from './lib';
import { createReport, quantile, runBench } from './report';

const TICKETS = Number(process.env.BENCH_SCHEDULE_TICKETS ?? 100_000);
const SEED_CHUNK = 20_000;
const DB_NAME = 'helpdesk_bench_schedules';
const OFFICE = { start: '09:00', end: '17:00' };

const report = createReport('schedules', {
  title: `Recomputing ${TICKETS.toLocaleString('en-US')} open tickets' due times after a schedule change`,
  settings: { tickets: TICKETS },
});

async function main() {
  // The seeding statements (each ticket also gets its search document) run longer than a request may.
  const bench = await openBenchApp({ database: DB_NAME, redisPrefix: 'hd_bench_schedules', env: { PG_STATEMENT_TIMEOUT_MS: '600000' } });
  const { db, config, services, port } = bench;
  const batch = config.SCHEDULE_RECOMPUTE_BATCH;
  report.settings({ 'batch size': batch });
  try {
    const ws = await benchWorkspaces(services)('Schedules');
    const key = ws.api_key.secret;
    const api = async (method: string, path: string, body: unknown) => {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
      return (await res.json()) as { id: string; version: string };
    };
    const schedule = await api('POST', '/v1/schedules', { name: 'Berlin', time_zone: 'Europe/Berlin', weekly_hours: { mon: [OFFICE], tue: [OFFICE], wed: [OFFICE], thu: [OFFICE], fri: [OFFICE] } });
    const t = { first_response_minutes: 120, resolution_minutes: 960, next_reply_minutes: 240 };
    const policy = await api('POST', '/v1/sla-policies', { name: 'Business', schedule_id: schedule.id, is_default: true, targets: { low: t, normal: t, high: t, urgent: t } });
    const seed = await api('POST', '/v1/tickets', { subject: 'Seed', description: 'seed', customer_email: 'seed@bench.test' });

    // The tickets, copied from the seed in chunks: open over the last ten days; every fifth pending with its clock
    // paused, every tenth answered (its first response met).
    const t0 = performance.now();
    for (let lo = 1; lo < TICKETS; lo += SEED_CHUNK) {
      const hi = Math.min(TICKETS - 1, lo + SEED_CHUNK - 1);
      await sql`
        INSERT INTO tickets (id, tenant_id, subject, description, status, priority, source, customer_id, sla_policy_id,
                             first_response_due, resolution_due, first_responded_at, resolution_paused_at, resolution_remaining_minutes,
                             status_entered_at, created_at, updated_at)
        SELECT gen_random_uuid(), s.tenant_id, 'Ticket ' || g, 'Bench ticket ' || g, CASE WHEN g % 5 = 0 THEN 'pending' ELSE 'open' END,
               (ARRAY['low','normal','high','urgent'])[1 + g % 4], 'api', s.customer_id, ${policy.id}::uuid,
               now() + interval '2 hours', now() + interval '2 days', CASE WHEN g % 10 = 1 THEN now() END,
               CASE WHEN g % 5 = 0 THEN now() - interval '1 hour' END, CASE WHEN g % 5 = 0 THEN 300 END,
               now(), now() - (g % 14400) * interval '1 minute', now()
        FROM tickets s, generate_series(${lo}::int, ${hi}::int) AS g
        WHERE s.tenant_id = ${ws.tenant_id}::uuid AND s.id = ${seed.id}::uuid`.execute(db);
      process.stdout.write(`\rseeded ${(hi + 1).toLocaleString('en-US')} of ${TICKETS.toLocaleString('en-US')} tickets`);
    }
    process.stdout.write(` in ${((performance.now() - t0) / 1000).toFixed(0)} s\n`);
    await sql`VACUUM ANALYZE tickets`.execute(db);

    // The change: Saturdays open 10:00–14:00, and a holiday in three days. Through the API (it queues the job; no
    // worker runs here), then the job's code, timed.
    const holiday = new Date(Date.now() + 3 * 86_400_000).toISOString().slice(0, 10);
    await api('PATCH', `/v1/schedules/${schedule.id}`, { weekly_hours: { mon: [OFFICE], tue: [OFFICE], wed: [OFFICE], thu: [OFFICE], fri: [OFFICE], sat: [{ start: '10:00', end: '14:00' }] }, holidays: [holiday] });
    const statements: { ms: number; rows: number }[] = [];
    const r0 = performance.now();
    const out = await services.tickets.recomputeSchedule(ws.tenant_id, schedule.id, { batch, onStatement: (s) => statements.push(s) });
    const seconds = (performance.now() - r0) / 1000;
    if (out.read !== TICKETS) throw new Error(`the recompute read ${out.read} of ${TICKETS} tickets`);

    // Correctness on a sample: every due time as the business-time module gives it on the new hours.
    const office: MinuteInterval[] = [[540, 1020]];
    const clock = compileSchedule({ timeZone: 'Europe/Berlin', weekly: [office, office, office, office, office, [[600, 840]], []], holidays: [holiday] });
    const sample = await sql<Parameters<typeof recomputedDues>[0] & { first_response_due: Date }>`
      SELECT id, priority, created_at, reopened_at, first_responded_at, first_response_breached_at, first_response_due, solved_at,
             resolution_breached_at, resolution_due, resolution_paused_at, resolution_resumed_at, resolution_elapsed_minutes,
             next_reply_from, next_reply_due, next_reply_breached_at
      FROM tickets WHERE tenant_id = ${ws.tenant_id} ORDER BY random() LIMIT 2000`.execute(db);
    const targets = { low: t, normal: t, high: t, urgent: t };
    const wrong = sample.rows.filter((row) => {
      const want = recomputedDues(row, targets, clock);
      return want.first_response_due.getTime() !== row.first_response_due.getTime() || want.resolution_due.getTime() !== row.resolution_due.getTime();
    }).length;

    // The baseline: the same rows written without computing anything, one statement per batch by keyset.
    const plain: number[] = [];
    const b0 = performance.now();
    let after = '00000000-0000-0000-0000-000000000000';
    for (;;) {
      const s = performance.now();
      const { rows } = await sql<{ id: string }>`
        UPDATE tickets SET resolution_due = resolution_due + interval '1 minute'
        WHERE tenant_id = ${ws.tenant_id} AND id IN (
          SELECT id FROM tickets WHERE tenant_id = ${ws.tenant_id} AND sla_policy_id = ${policy.id} AND status IN ('open', 'pending', 'on_hold') AND id > ${after}::uuid ORDER BY id LIMIT ${batch})
        RETURNING id`.execute(db);
      if (rows.length === 0) break;
      plain.push(performance.now() - s);
      after = rows.map((r) => r.id).sort().at(-1)!;
    }
    const plainSeconds = (performance.now() - b0) / 1000;

    const ms = statements.map((s) => s.ms);
    console.log(
      `recompute: ${out.read.toLocaleString('en-US')} read, ${out.rewritten.toLocaleString('en-US')} rewritten in ${out.statements} statements, ${seconds.toFixed(1)} s ` +
        `(${(out.read / seconds).toFixed(0)} tickets/s); statement p50 ${quantile(ms, 0.5).toFixed(0)} ms, p99 ${quantile(ms, 0.99).toFixed(0)} ms, longest ${Math.max(...ms).toFixed(0)} ms; ` +
        `sample wrong ${wrong} of ${sample.rows.length}`,
    );
    console.log(
      `baseline (plain UPDATE per batch): ${plain.length} statements, ${plainSeconds.toFixed(1)} s (${(TICKETS / plainSeconds).toFixed(0)} tickets/s); ` +
        `statement p50 ${quantile(plain, 0.5).toFixed(0)} ms, p99 ${quantile(plain, 0.99).toFixed(0)} ms, longest ${Math.max(...plain).toFixed(0)} ms`,
    );
    report.figure({ name: 'recompute: whole run', value: seconds, unit: 's', baseline: plainSeconds });
    report.figure({ name: 'recompute: tickets per second', value: out.read / seconds, unit: 'tickets/s', baseline: TICKETS / plainSeconds });
    report.figure({ name: 'recompute: tickets rewritten', value: out.rewritten, unit: 'tickets' });
    report.figure({ name: 'recompute: statements (one per batch written)', value: out.statements, unit: 'statements', target: `≤ ${Math.ceil(TICKETS / batch)} (one per batch; bench check)`, met: out.statements <= Math.ceil(TICKETS / batch) });
    report.figure({ name: 'longest lock held (the longest batch statement)', value: Math.max(...ms), unit: 'ms', baseline: Math.max(...plain) });
    report.figure({ name: 'batch statement p50', value: quantile(ms, 0.5), unit: 'ms', baseline: quantile(plain, 0.5) });
    report.figure({ name: 'batch statement p99', value: quantile(ms, 0.99), unit: 'ms', baseline: quantile(plain, 0.99) });
    report.figure({ name: 'sampled tickets with a wrong due time', value: wrong, unit: 'tickets', target: '0 of 2,000 (bench check)', met: wrong === 0 });
    if (wrong !== 0) throw new Error(`${wrong} sampled tickets have a due time the schedule does not give`);
  } finally {
    await bench.close();
  }
}

runBench(main);
