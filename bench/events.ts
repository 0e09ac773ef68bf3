/**
 * Outbound events under load (issue 19), with the real API and worker processes:
 * 1. channel intake (SMS, distinct senders) with no webhook endpoint, then the same load with three endpoints
 *    subscribed to every event type: one healthy, one slow (answers after 2 s), one failing half the time.
 *    Run as ROUNDS pairs, alternately (without, with) and (with, without), the endpoints deleted after each
 *    "with" case (their backlog with them), so every "without" case starts with no delivery work left over; the figure is the median pair's ratio, which
 *    a shared, noisy machine moves far less than one pair. Target: within 10 % of without. Sends make way for
 *    saturated intake (BACKGROUND_INTAKE_YIELD_MS), so the bench also reports how long after intake stopped the
 *    healthy endpoint had every event the case committed, and the CPU-ms per message of each component.
 * 2. CHANGES ticket changes (PATCH over 200 tickets) offered at a steady CHANGE_RATE per second with three
 *    fresh endpoints (the same three kinds): p50/p99 from the change (the event's occurred_at, taken in its
 *    transaction) to its arrival at the healthy endpoint. Latency is measured at an offered rate the machine
 *    sustains, not at saturation, where it would measure the request queue. Target: p99 < 1 s, every change
 *    delivered to the healthy endpoint exactly once.
 *   npm run bench:events     BENCH_SECONDS (8), BENCH_CONNECTIONS (64), BENCH_ROUNDS (5), BENCH_CHANGES (10000),
 *                            BENCH_CHANGE_RATE (100)
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import autocannon from 'autocannon';
import { loadConfig } from '../src/config';
import { smsWorkspace, benchEnv, cpuPer, cpuSample, freshDatabase, start, stop, type Env } from './processes';
import { createReport, quantile, runBench } from './report';

const DURATION = Number(process.env.BENCH_SECONDS ?? 8);
// Five pairs: single pairs on this shared machine ranged 0.64–1.31×, wider than the 10 % the target allows.
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CHANGE_RATE = Number(process.env.BENCH_CHANGE_RATE ?? 100);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const CHANGES = Number(process.env.BENCH_CHANGES ?? 10_000);
const TICKETS = 200;
const PORT = 18101;
const report = createReport('events', {
  title: 'Outbound events: intake with and without webhook endpoints, and commit-to-delivery latency',
  settings: { connections: CONNECTIONS, seconds: DURATION, rounds: ROUNDS, changes: CHANGES, change_rate: CHANGE_RATE, tickets: TICKETS, endpoints: 'healthy, slow (2 s), failing half the time' },
});

/** A receiver on loopback: `answer` decides each response; arrivals of each webhook-id are recorded once. */
async function receiver(answer: (n: number) => { status: number; delayMs?: number }) {
  const arrivals = new Map<string, { at: number; type: string; occurredAt: number }>();
  let n = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      n += 1;
      const { status, delayMs } = answer(n);
      const id = String(req.headers['webhook-id']);
      if (status < 300 && !arrivals.has(id)) {
        const event = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { type: string; occurred_at: string };
        arrivals.set(id, { at, type: event.type, occurredAt: Date.parse(event.occurred_at) });
      }
      setTimeout(() => res.writeHead(status).end(), delayMs ?? 0);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    arrivals,
    requests: () => n,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

async function main() {
  const database = await freshDatabase('helpdesk_bench_events');
  const env: Env = benchEnv(database.url, 'events', {
    INGEST_RATE_POINTS: '10000000',
    OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true',
    PG_POOL_MAX: process.env.PG_POOL_MAX ?? '16',
    WORKER_CONCURRENCY: process.env.WORKER_CONCURRENCY ?? '8',
  });
  const config = loadConfig(env);
  const { handle, ws } = await smsWorkspace(config);
  const key = ws.api_key.secret;

  const worker = await start('workers/index.ts', { ...env, LOG_LEVEL: 'info' }, /workers started/);
  const api = await start('src/server.ts', { ...env, PORT: String(PORT) }, null, PORT);
  const base = `http://127.0.0.1:${PORT}`;
  const call = (method: string, path: string, body?: unknown) =>
    fetch(`${base}${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}) });

  const allTypes = ['ticket.created', 'ticket.updated', 'ticket.status_changed', 'ticket.assigned', 'message.created', 'customer.created'];
  /** The workspace's last event position, and how many events of the subscribed types committed after one. */
  const logEnd = async () => Number((await handle.db.selectFrom('events').select((e) => e.fn.max('position').as('p')).where('tenant_id', '=', ws.tenant_id).executeTakeFirst())?.p ?? 0);
  const eventsAfter = async (position: number) =>
    Number((await handle.db.selectFrom('events').select((e) => e.fn.countAll().as('n')).where('tenant_id', '=', ws.tenant_id).where('position', '>', String(position)).where('type', 'in', allTypes).executeTakeFirst())?.n ?? 0);
  /** Resolves once the log has not grown for half a second (the last requests of a case have committed). */
  const logSettled = async () => {
    for (let end = -1; end !== (await logEnd()); await new Promise((r) => setTimeout(r, 500))) end = await logEnd();
  };
  let distinct = 0;
  const cpuNow = () => ({ ...cpuSample({ api, worker }), 'bench (load, receivers)': (process.cpuUsage().user + process.cpuUsage().system) / 1000 });
  const intake = async (tag: string, duration: number) => {
    const cpuBefore = cpuNow();
    const r = await autocannon({
      url: `${base}/v1/ingest/sms`,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      connections: CONNECTIONS,
      duration,
      requests: [
        {
          setupRequest: (req) => {
            distinct += 1;
            const payload = { MessageSid: `SM${tag}${randomBytes(14).toString('hex')}`, AccountSid: 'AC0', From: `+1555${tag}${String(distinct).padStart(8, '0')}`, To: '+15550000000', Body: `Hello ${distinct}`, NumMedia: '0' };
            return { ...req, body: JSON.stringify({ tenant_id: ws.tenant_id, payload }) };
          },
        },
      ],
    });
    const cpu = cpuPer(cpuBefore, cpuNow(), r['2xx']);
    console.log(`${`intake ${tag}`.padEnd(34)} ${r.requests.average.toFixed(0).padStart(6)} msgs/s   p50 ${String(r.latency.p50).padStart(4)} ms   p99 ${String(r.latency.p99).padStart(4)} ms   non-2xx ${r.non2xx}`);
    console.log(`${''.padEnd(34)} CPU-ms per message: ${Object.entries(cpu).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}`);
    return Object.assign(r, { cpu });
  };

  console.log(`node ${process.version}, ${CONNECTIONS} connections, ${ROUNDS} × (${DURATION}s without, ${DURATION}s with endpoints), ${CHANGES} ticket changes at ${CHANGE_RATE}/s`);
  await intake('warm', 2);

  const receivers: Awaited<ReturnType<typeof receiver>>[] = [];
  /** The three endpoints (healthy, slow, failing), each on a receiver of its own. */
  const addEndpoints = async () => {
    const healthy = await receiver(() => ({ status: 200 }));
    const slow = await receiver(() => ({ status: 200, delayMs: 2000 }));
    const failing = await receiver((n) => ({ status: n % 2 === 0 ? 500 : 200 }));
    const ids: string[] = [];
    for (const rx of [healthy, slow, failing]) {
      receivers.push(rx);
      const res = await call('POST', '/v1/webhook-endpoints', { url: rx.url, event_types: allTypes });
      if (res.status !== 201) throw new Error(`endpoint: ${res.status} ${await res.text()}`);
      ids.push(((await res.json()) as { id: string }).id);
    }
    return { healthy, slow, failing, ids };
  };

  const pairs: { without: number; with: number; withoutP99: number; withP99: number; delivered: number; catchUp: number; complete: boolean; cpuWithout: Record<string, number>; cpuWith: Record<string, number> }[] = [];
  /** One case with the three endpoints, then until the healthy one has every event it committed; endpoints deleted after. */
  const withCase = async (round: number) => {
    // Requests still in flight when the previous case ended commit after it: the log is still before the endpoints exist.
    await logSettled();
    const from = await logEnd();
    const eps = await addEndpoints();
    const r = await intake(`with 3 endpoints #${round}`, DURATION);
    const delivered = eps.healthy.arrivals.size;
    // Sends make way for saturated intake, so the healthy endpoint is behind when intake stops: how long until
    // it has every event the case committed (each exactly once: arrivals are keyed by webhook-id).
    const ended = Date.now();
    await logSettled();
    const owed = await eventsAfter(from);
    while (eps.healthy.arrivals.size < owed && Date.now() - ended < 120_000) await new Promise((res) => setTimeout(res, 100));
    const catchUp = (Date.now() - ended) / 1000;
    console.log(`  healthy endpoint: ${delivered} events during the case, all ${eps.healthy.arrivals.size}/${owed} ${catchUp.toFixed(1)} s after intake stopped`);
    // Deleting the endpoints deletes their pending deliveries: the next case starts with no backlog.
    for (const id of eps.ids) await call('DELETE', `/v1/webhook-endpoints/${id}`);
    return { r, delivered, catchUp, complete: eps.healthy.arrivals.size >= owed };
  };
  for (let round = 1; round <= ROUNDS; round++) {
    // The order alternates (without first, then with first), so what drifts over the run (tables growing, the
    // machine's other tenants) does not favour either case.
    let without: Awaited<ReturnType<typeof intake>>;
    let w: Awaited<ReturnType<typeof withCase>>;
    if (round % 2 === 1) {
      without = await intake(`without endpoints #${round}`, DURATION);
      w = await withCase(round);
    } else {
      w = await withCase(round);
      without = await intake(`without endpoints #${round}`, DURATION);
    }
    const withEndpoints = w.r;
    pairs.push({ without: without.requests.average, with: withEndpoints.requests.average, withoutP99: without.latency.p99, withP99: withEndpoints.latency.p99, delivered: w.delivered, catchUp: w.catchUp, complete: w.complete, cpuWithout: without.cpu, cpuWith: withEndpoints.cpu });
    console.log(`  pair #${round}: ${(withEndpoints.requests.average / without.requests.average).toFixed(2)}×`);
  }
  const byRatio = [...pairs].sort((x, y) => x.with / x.without - y.with / y.without);
  const median = byRatio[Math.floor(byRatio.length / 2)]!;
  const ratio = median.with / median.without;
  console.log(`intake with endpoints: ${ratio.toFixed(2)}× without, median of ${ROUNDS} pairs (${pairs.map((p) => (p.with / p.without).toFixed(2)).join(', ')}; target ≥ 0.90)`);

  const { healthy, slow, failing } = await addEndpoints();
  // Ticket changes: TICKETS tickets, then CHANGES PATCHes spread over them.
  const ids: string[] = [];
  for (let i = 0; i < TICKETS; i++) {
    const res = await call('POST', '/v1/tickets', { subject: `Bench ${i}`, description: 'bench', customer_email: `c${i}@bench.test` });
    ids.push(((await res.json()) as { id: string }).id);
  }
  let n = 0;
  const changed = await autocannon({
    url: base,
    connections: CONNECTIONS,
    overallRate: CHANGE_RATE,
    amount: CHANGES,
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    requests: [
      {
        method: 'PATCH',
        setupRequest: (req) => {
          n += 1;
          return { ...req, path: `/v1/tickets/${ids[n % TICKETS]}`, body: JSON.stringify({ tags: [`c${n}`] }) };
        },
      },
    ],
  });
  console.log(`${`ticket changes (PATCH, ${CHANGE_RATE}/s offered)`.padEnd(34)} ${changed.requests.average.toFixed(0).padStart(6)} req/s   p99 ${changed.latency.p99} ms   non-2xx ${changed.non2xx}`);
  const updates = () => [...healthy.arrivals.values()].filter((a) => a.type === 'ticket.updated');
  const deadline = Date.now() + 120_000;
  while (updates().length < CHANGES - changed.non2xx && Date.now() < deadline) await new Promise((r) => setTimeout(r, 250));
  const latencies = updates().map((a) => a.at - a.occurredAt);
  const p50 = quantile(latencies, 0.5);
  const p99 = quantile(latencies, 0.99);
  const delivered = updates().length;
  console.log(`healthy endpoint: ${delivered}/${CHANGES - changed.non2xx} changes delivered; commit to delivery p50 ${p50} ms, p99 ${p99} ms (target < 1000 ms)`);
  console.log(`slow endpoint: ${slow.arrivals.size} events so far; failing endpoint: ${failing.arrivals.size} events accepted of ${failing.requests()} requests`);

  const intakeMet = ratio >= 0.9;
  const latencyMet = p99 < 1000 && delivered === CHANGES - changed.non2xx;
  console.log(`${intakeMet ? 'PASS' : 'MISS'}: intake with endpoints within 10 % of without (${ratio.toFixed(2)}×)`);
  console.log(`${latencyMet ? 'PASS' : 'MISS'}: healthy endpoint p99 < 1 s with every change delivered (${p99} ms, ${delivered})`);
  report.figure({ name: 'intake with three endpoints: throughput (median pair)', value: median.with, unit: 'msgs/s', baseline: median.without, target: 'within 10 % of intake without endpoints (issue 19)', met: intakeMet });
  report.figure({ name: 'intake with three endpoints: every pair', value: pairs.map((p) => `${(p.with / p.without).toFixed(2)}×`).join(', ') });
  report.figure({ name: 'intake with three endpoints: p99 (median pair)', value: median.withP99, unit: 'ms', baseline: median.withoutP99 });
  const cpuLine = (c: Record<string, number>) => Object.entries(c).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ');
  report.figure({ name: 'intake CPU-ms per message with three endpoints (median pair)', value: cpuLine(median.cpuWith) });
  report.figure({ name: 'intake CPU-ms per message without endpoints (median pair)', value: cpuLine(median.cpuWithout) });
  report.figure({ name: 'healthy endpoint: events delivered while intake ran (median pair)', value: median.delivered, unit: 'events' });
  report.figure({ name: 'healthy endpoint: caught up after intake stopped (every pair)', value: pairs.map((p) => `${p.catchUp.toFixed(1)} s${p.complete ? '' : ' (incomplete)'}`).join(', '), target: 'every event delivered', met: pairs.every((p) => p.complete) });
  report.figure({ name: 'ticket changes: throughput', value: changed.requests.average, unit: 'req/s' });
  report.figure({ name: 'healthy endpoint: commit to delivery p50', value: p50, unit: 'ms' });
  report.figure({ name: 'healthy endpoint: commit to delivery p99', value: p99, unit: 'ms', target: '< 1 s (issue 19)', met: latencyMet });
  report.figure({ name: 'healthy endpoint: changes delivered', value: delivered, unit: 'events', target: `every change once (${CHANGES - changed.non2xx})`, met: delivered === CHANGES - changed.non2xx });

  await stop(api);
  await stop(worker);
  for (const rx of receivers) await rx.close();
  await handle.close();
  await database.drop();
}

runBench(main);
