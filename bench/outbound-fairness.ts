/**
 * Outbound webhooks fair across workspaces (issue 32, finding 3), with the real API and worker processes, the
 * delivery settings at their defaults (10 s time-out, OUTBOUND_WEBHOOK_WORKSPACE_CONCURRENCY 4, the circuit breaker).
 * Workspace B has one healthy endpoint and changes BENCH_B_RATE (10) tickets a second: first alone for
 * BENCH_SECONDS (45), then as long again while workspace A, with BENCH_HANGING (100) endpoints pointed at a
 * receiver that accepts connections and never answers, changes BENCH_A_RATE (10) tickets a second. Reported:
 * B's commit-to-delivery p50/p99 alone and beside A (from the event's occurred_at, taken in its transaction, to
 * its arrival), every B event delivered once, and how many requests A's receiver held open at most.
 * Target (issue 32): B's p99 beside A within 2× of alone. Before this issue B's deliveries went from ~17 ms
 * to a median of ~9.6 s with 40 hanging endpoints.
 *   npm run bench:outbound-fairness     BENCH_SECONDS, BENCH_HANGING, BENCH_A_RATE, BENCH_B_RATE
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../src/config';
import { benchEnv, freshDatabase, smsWorkspace, start, stop, type Env } from './processes';
import { createReport, quantile, runBench } from './report';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 45);
const HANGING = Number(process.env.BENCH_HANGING ?? 100);
const A_RATE = Number(process.env.BENCH_A_RATE ?? 10);
const B_RATE = Number(process.env.BENCH_B_RATE ?? 10);
const PORT = 18141;
const report = createReport('outbound-fairness', {
  title: 'Outbound webhooks: one workspace\'s hanging endpoints beside another\'s healthy one',
  settings: { seconds: SECONDS, 'A: hanging endpoints': HANGING, 'A: changes per second': A_RATE, 'B: changes per second': B_RATE, 'delivery settings': 'defaults (10 s time-out, 4 senders per workspace, breaker 5 failures / 30 s)' },
});

/** B's receiver: the arrival time of each event id, once. */
async function healthyReceiver() {
  const arrivals = new Map<string, { at: number; occurredAt: number }>();
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      const id = String(req.headers['webhook-id']);
      if (!arrivals.has(id)) arrivals.set(id, { at, occurredAt: Date.parse((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { occurred_at: string }).occurred_at) });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, arrivals, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** A's receiver: takes every request and never answers (until closed); counts what it holds open. */
async function hangingReceiver() {
  const held = new Set<ServerResponse>();
  let most = 0;
  let requests = 0;
  const server: Server = createServer((req, res) => {
    requests += 1;
    req.resume();
    held.add(res);
    most = Math.max(most, held.size);
    res.on('close', () => held.delete(res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    most: () => most,
    requests: () => requests,
    close: () =>
      new Promise<void>((r) => {
        for (const res of held) res.destroy();
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

async function main() {
  const database = await freshDatabase('helpdesk_bench_outbound_fairness');
  const env: Env = benchEnv(database.url, 'outbound_fairness', {
    OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true',
    // A holds as many endpoints as the finding had and more; every other delivery setting is the default.
    OUTBOUND_WEBHOOK_ENDPOINTS_PER_WORKSPACE: String(Math.max(20, HANGING)),
    PG_POOL_MAX: '16',
  });
  const config = loadConfig(env);
  const b = await smsWorkspace(config, 'B');
  const a = await smsWorkspace(config, 'A');
  const worker = await start('workers/index.ts', { ...env, LOG_LEVEL: 'info' }, /workers started/);
  const api = await start('src/server.ts', { ...env, PORT: String(PORT) }, null, PORT);
  const base = `http://127.0.0.1:${PORT}`;
  const call = async (key: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}) });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<{ id: string }>;
  };
  const bKey = b.ws.api_key.secret;
  const aKey = a.ws.api_key.secret;

  const healthy = await healthyReceiver();
  await call(bKey, 'POST', '/v1/webhook-endpoints', { url: healthy.url, event_types: ['ticket.updated'] });
  const ticketsOf = async (key: string, n: number, tag: string) => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push((await call(key, 'POST', '/v1/tickets', { subject: `${tag} ${i}`, description: 'bench', customer_email: `${tag}${i}@bench.test` })).id);
    return ids;
  };
  const bTickets = await ticketsOf(bKey, 50, 'b');
  const aTickets = await ticketsOf(aKey, 50, 'a');

  /** `rate` ticket changes a second for `seconds` (PATCH tags), spread over the tickets; resolves with how many were made. */
  // Tags are never repeated, so every change changes its ticket (and emits ticket.updated).
  let tag = 0;
  const changes = async (key: string, tickets: string[], rate: number, seconds: number, stopped: () => boolean = () => false) => {
    let made = 0;
    const began = performance.now();
    const inFlight: Promise<unknown>[] = [];
    for (let tick = 0; performance.now() - began < seconds * 1000 && !stopped(); tick++) {
      tag += 1;
      made += 1;
      inFlight.push(call(key, 'PATCH', `/v1/tickets/${tickets[tick % tickets.length]}`, { tags: [`c${tag}`] }).catch(() => undefined));
      await new Promise((r) => setTimeout(r, Math.max(0, began + (tick + 1) * (1000 / rate) - performance.now())));
    }
    await Promise.all(inFlight);
    return made;
  };
  /** B's changes in one phase and the latency of each to its arrival. */
  const phase = async (name: string) => {
    const before = new Set(healthy.arrivals.keys());
    const made = await changes(bKey, bTickets, B_RATE, SECONDS);
    const deadline = Date.now() + 60_000;
    const fresh = () => [...healthy.arrivals.entries()].filter(([id]) => !before.has(id)).map(([, v]) => v);
    while (fresh().length < made && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    const latencies = fresh().map((x) => x.at - x.occurredAt);
    if (process.env.BENCH_DEBUG) {
      const t0 = Math.min(...fresh().map((x) => x.occurredAt));
      console.log(fresh().filter((x) => x.at - x.occurredAt > 150).map((x) => `${((x.occurredAt - t0) / 1000).toFixed(1)}s:${x.at - x.occurredAt}ms`).join(' '));
    }
    const p50 = quantile(latencies, 0.5);
    const p99 = quantile(latencies, 0.99);
    console.log(`${name.padEnd(44)} ${fresh().length}/${made} delivered   commit to delivery p50 ${p50} ms   p99 ${p99} ms`);
    return { made, delivered: fresh().length, p50, p99 };
  };

  console.log(`node ${process.version}; B: ${B_RATE} changes/s for ${SECONDS} s per phase; A: ${HANGING} hanging endpoints, ${A_RATE} changes/s`);
  await changes(bKey, bTickets, B_RATE, 5); // warm-up
  const alone = await phase('B alone');

  const hanging = await hangingReceiver();
  for (let i = 0; i < HANGING; i++) await call(aKey, 'POST', '/v1/webhook-endpoints', { url: hanging.url, event_types: ['ticket.updated'] });
  let phaseOver = false;
  const aLoad = changes(aKey, aTickets, A_RATE, SECONDS + 30, () => phaseOver);
  // A's first changes reach its endpoints, whose first sends hang, before B is measured.
  await new Promise((r) => setTimeout(r, 2000));
  const beside = await phase(`B beside A (${HANGING} hanging endpoints)`);
  phaseOver = true;
  const aMade = await aLoad;
  console.log(`A: ${aMade} changes; its receiver got ${hanging.requests()} requests and held at most ${hanging.most()} open at once`);

  const ratio = beside.p99 / Math.max(1, alone.p99);
  const met = ratio <= 2 && beside.delivered === beside.made && alone.delivered === alone.made;
  console.log(`${met ? 'PASS' : 'MISS'}: B's p99 beside A within 2× of alone (${ratio.toFixed(2)}×), every B event delivered`);
  report.figure({ name: 'B commit to delivery p99 beside A', value: beside.p99, unit: 'ms', baseline: alone.p99, target: '≤ 2× B alone (issue 32)', met: ratio <= 2 });
  report.figure({ name: 'B commit to delivery p50 beside A', value: beside.p50, unit: 'ms', baseline: alone.p50 });
  report.figure({ name: 'B events delivered beside A', value: beside.delivered, unit: 'events', target: `every one (${beside.made})`, met: beside.delivered === beside.made });
  report.figure({ name: 'B events delivered alone', value: alone.delivered, unit: 'events', target: `every one (${alone.made})`, met: alone.delivered === alone.made });
  report.figure({ name: 'A: requests its hanging receiver held open at most', value: hanging.most(), unit: 'requests' });
  report.figure({ name: 'A: requests sent to its hanging receiver in all', value: hanging.requests(), unit: 'requests' });
  report.note(`A's ${HANGING} endpoints hang every request until the 10 s time-out; their circuit breakers open after 5 failed attempts and probe one event at a time after 30 s, doubling; at most 4 of A's endpoints send at once.`);

  await stop(api);
  await stop(worker);
  await hanging.close();
  await healthy.close();
  await a.handle.close();
  await b.handle.close();
  await database.drop();
}

runBench(main);
