/**
 * Channel intake under load: the real API and worker processes, N distinct SMS messages from distinct
 * senders plus 10 % redeliveries, 64 concurrent connections (autocannon). Prints accepted msgs/s, p50/p99,
 * Redis commands per message (INFO commandstats delta ÷ messages) and tickets created versus expected; then
 * the same load against bench/inline-ingest-server.ts (same service function inline, no queue) and the ratio.
 * Each case is warmed up by BENCH_WARMUP_MESSAGES (3,000) requests before it is measured: V8 optimises the
 * request path only after enough calls, and a warm-up of 2 seconds measured part of the start-up (see
 * docs/decisions/data-and-scale.md, "Cost per message with more API processes").
 *   npm run bench:ingest            BENCH_SECONDS (10), BENCH_WARMUP_MESSAGES (3000), BENCH_CONNECTIONS (64), BENCH_CPU_PROF (a directory)
 */
import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import IORedis from 'ioredis';
import { loadConfig } from '../src/config';
import { smsWorkspace, benchEnv, cpuPer, cpuSample, freshDatabase, redisCalls, start, stop, type Env } from './processes';
import { createReport, runBench } from './report';

const DURATION = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const WARMUP = Number(process.env.BENCH_WARMUP_MESSAGES ?? 3000);
const report = createReport('ingest', {
  title: 'Channel intake: API → queue → worker against an inline baseline',
  settings: { connections: CONNECTIONS, seconds: DURATION, 'warm-up requests': WARMUP, messages: 'SMS from distinct senders + 10 % redeliveries' },
});
async function main() {
  const database = await freshDatabase('helpdesk_bench_ingest');
  const env: Env = benchEnv(database.url, 'ingest', {
    INGEST_RATE_POINTS: '10000000',
    PG_POOL_MAX: process.env.PG_POOL_MAX ?? '16',
    WORKER_CONCURRENCY: process.env.WORKER_CONCURRENCY ?? '8',
    INGEST_BATCH_WINDOW_MS: process.env.INGEST_BATCH_WINDOW_MS ?? '2',
    INGEST_BATCH_MAX: process.env.INGEST_BATCH_MAX ?? '64',
  });
  const config = loadConfig(env);
  const prefix = config.REDIS_PREFIX;
  const { handle, ws } = await smsWorkspace(config);
  const redis = new IORedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');

  // One run of the load: distinct messages from distinct senders, every 10th request a redelivery.
  const runLoad = async (port: number, tag: string, run: { duration: number } | { amount: number } = { duration: DURATION }) => {
    const sent: Record<string, unknown>[] = [];
    let distinct = 0;
    let n = 0;
    const body = () => {
      n += 1;
      if (n % 10 === 0 && sent.length > 0) return JSON.stringify({ tenant_id: ws.tenant_id, payload: sent[Math.floor(Math.random() * sent.length)] });
      distinct += 1;
      const payload = { MessageSid: `SM${tag}${randomBytes(14).toString('hex')}`, AccountSid: 'AC0', From: `+1555${tag}${String(distinct).padStart(8, '0')}`, To: '+15550000000', Body: `Hello ${distinct}`, NumMedia: '0' };
      sent.push(payload);
      return JSON.stringify({ tenant_id: ws.tenant_id, payload });
    };
    const before = await redisCalls(redis);
    const r = await autocannon({
      url: `http://127.0.0.1:${port}/v1/ingest/sms`,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      connections: CONNECTIONS,
      ...run,
      requests: [{ setupRequest: (req) => ({ ...req, body: body() }) }],
    });
    const calls = (await redisCalls(redis)) - before;
    return { r, distinct, calls };
  };

  const countTickets = async (prefixTag: string) =>
    Number(
      (
        await handle.db
          .selectFrom('ingest_deliveries')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('provider_message_id', 'like', `SM${prefixTag}%`)
          .executeTakeFirstOrThrow()
      ).n,
    );
  const ticketsFor = async (tag: string) =>
    Number(
      (
        await handle.db
          .selectFrom('tickets as t')
          .innerJoin('customers as c', 'c.id', 't.customer_id')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('c.display_name', 'like', `+1555${tag}%`)
          .executeTakeFirstOrThrow()
      ).n,
    );

  console.log(`node ${process.version}, ${CONNECTIONS} connections, ${DURATION}s per case, SMS messages from distinct senders + 10% redeliveries`);

  // Full path: API process + worker process.
  // The worker logs nothing per job, so it can stay at info; the API stays at warn (no line per request).
  const worker = await start('workers/index.ts', { ...env, LOG_LEVEL: 'info' }, /workers started/);
  const api = await start('src/server.ts', { ...env, PORT: '18081' }, null, 18081);
  await autocannon({ url: 'http://127.0.0.1:18081/healthz', connections: 8, duration: 1 });
  // Both cases get the same warm-up (JIT, connection pools, caches) before the measured run: cold-start
  // latency is a start-up cost, not the steady state this bench is about.
  await runLoad(18081, 'WA', { amount: WARMUP });
  // CPU per message of each component (issue 21, part 3), from /proc: from the start of the measured run to
  // the moment the worker has written every message of it.
  const cpu0 = cpuSample({ api, worker });
  const full = await runLoad(18081, 'A');
  // Everything acknowledged 202 is still processed exactly once: wait for the ledger to hold every message.
  for (let i = 0; i < 120 && (await countTickets('A')) < full.distinct; i++) await new Promise((r) => setTimeout(r, 500));
  const cpu = cpuPer(cpu0, cpuSample({ api, worker }), full.r['2xx']);
  const fullTickets = await ticketsFor('A');
  const jobs = Number((await redis.get(`${prefix}:ingest:id`)) ?? 0);
  await stop(api);
  await stop(worker);

  // Baseline: the same service function inline in a bare Express app.
  const inline = await start('bench/inline-ingest-server.ts', { ...env, PORT: '18082' }, /listening/, 18082);
  await runLoad(18082, 'WB', { amount: WARMUP });
  const base = await runLoad(18082, 'B');
  const baseTickets = await ticketsFor('B');
  await stop(inline);

  const msgs = (x: typeof full) => x.r.requests.total;
  const row = (title: string, x: typeof full, tickets: number) =>
    console.log(
      `${title.padEnd(36)} ${x.r.requests.average.toFixed(0).padStart(6)} msgs/s   p50 ${String(x.r.latency.p50).padStart(4)} ms   p99 ${String(x.r.latency.p99).padStart(4)} ms   ` +
        `non-2xx ${x.r.non2xx}   Redis cmds/msg ${(x.calls / Math.max(1, msgs(x))).toFixed(1)}   tickets ${tickets}/${x.distinct} expected`,
    );
  row('full path (API + queue + worker)', full, fullTickets);
  row('baseline (inline, no queue)', base, baseTickets);
  const ratio = full.r.requests.average / base.r.requests.average;
  console.log(`full path throughput: ${ratio.toFixed(2)}× the inline baseline; ${jobs} ingest jobs, ${(msgs(full) / Math.max(1, jobs)).toFixed(1)} messages per job on average`);
  const checks = [
    [ratio >= 0.6, `throughput ≥ 0.6× baseline (${ratio.toFixed(2)})`],
    [full.r.latency.p99 < 150, `p99 < 150 ms (${full.r.latency.p99})`],
    [full.calls / msgs(full) <= 25, `≤ 25 Redis commands per message (${(full.calls / msgs(full)).toFixed(1)})`],
    [fullTickets === full.distinct, `nothing lost or doubled (${fullTickets} tickets for ${full.distinct} distinct messages)`],
  ] as const;
  for (const [ok, what] of checks) console.log(`${ok ? 'PASS' : 'FAIL'}: ${what}`);
  const cmds = (x: typeof full) => x.calls / Math.max(1, msgs(x));
  report.settings({ PG_POOL_MAX: env.PG_POOL_MAX!, WORKER_CONCURRENCY: env.WORKER_CONCURRENCY!, INGEST_BATCH_WINDOW_MS: env.INGEST_BATCH_WINDOW_MS!, INGEST_BATCH_MAX: env.INGEST_BATCH_MAX! });
  report.note('Baseline: bench/inline-ingest-server.ts, the same ingest service function called inline (no queue), same load, same run.');
  report.figure({ name: 'full path: throughput', value: full.r.requests.average, unit: 'msgs/s', baseline: base.r.requests.average, target: '≥ 0.6× the inline baseline (issue 5)', met: checks[0][0] });
  report.figure({ name: 'full path: p50', value: full.r.latency.p50, unit: 'ms', baseline: base.r.latency.p50 });
  report.figure({ name: 'full path: p99', value: full.r.latency.p99, unit: 'ms', baseline: base.r.latency.p99, target: '< 150 ms (issue 5)', met: checks[1][0] });
  report.figure({ name: 'full path: Redis commands per message', value: cmds(full), unit: 'commands', target: '≤ 25 (issue 5)', met: checks[2][0] });
  report.figure({ name: 'full path: tickets created', value: fullTickets, unit: 'tickets', target: `= distinct messages sent (${full.distinct}): nothing lost or doubled (issue 5)`, met: checks[3][0] });
  report.figure({ name: 'full path: non-2xx', value: full.r.non2xx, unit: 'responses' });
  report.figure({ name: 'full path: messages per ingest job', value: msgs(full) / Math.max(1, jobs), unit: 'messages' });
  const total = cpu.api! + cpu.worker! + cpu.postgres! + cpu.redis!;
  report.figure({ name: 'full path: CPU-ms per message (API, worker, PostgreSQL, Redis)', value: total, unit: 'ms' });
  report.figure({ name: 'full path: CPU-ms per message by component', value: `api ${cpu.api!.toFixed(2)}, worker ${cpu.worker!.toFixed(2)}, postgres ${cpu.postgres!.toFixed(2)}, redis ${cpu.redis!.toFixed(2)}` });
  console.log(`CPU-ms per message: api ${cpu.api!.toFixed(2)}, worker ${cpu.worker!.toFixed(2)}, postgres ${cpu.postgres!.toFixed(2)}, redis ${cpu.redis!.toFixed(2)}, total ${total.toFixed(2)}`);
  report.figure({ name: `inline baseline: tickets created (of ${base.distinct} distinct sent; counted at once, not checked)`, value: baseTickets, unit: 'tickets' });
  report.figure({ name: 'inline baseline: non-2xx', value: base.r.non2xx, unit: 'responses' });

  await redis.quit();
  await handle.close();
  await database.drop();
}

runBench(main);
