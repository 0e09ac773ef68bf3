/**
 * One workspace's burst against four quiet ones (issue 21, part 1), with the real API and worker processes.
 * Workspaces B–E each send a steady BENCH_QUIET_RATE (20) SMS messages per second: first alone for
 * BENCH_QUIET_SECONDS (by default as long as they are measured under the flood: BENCH_SECONDS less 4), then
 * while workspace A floods channel intake and provider webhooks at BENCH_CONNECTIONS (128, half each) for
 * BENCH_SECONDS (20). Reports B–E's p50/p99 alone and under the flood,
 * their statuses (every one must be 200: no 429, no 202), A's accepted rate and 429s; then replays A's 429s
 * after their Retry-After, as a provider retries, and checks that every distinct message of every workspace
 * was written exactly once. Target: B–E's p99 under the flood ≤ 2× their p99 alone.
 *   npm run bench:fairness     BENCH_SECONDS, BENCH_QUIET_SECONDS, BENCH_QUIET_RATE, BENCH_CONNECTIONS
 */
import { randomBytes } from 'node:crypto';
import { Agent, request } from 'node:http';
import autocannon from 'autocannon';
import { loadConfig } from '../src/config';
import { createAuditService } from '../src/domains/audit/service';
import { createWebhookService } from '../src/domains/webhooks/service';
import { rawOf, signedHeaders, zendeskEvent } from '../test/helpers/webhooks';
import { benchEnv, freshDatabase, smsWorkspace, start, stop, type Env } from './processes';
import { createReport, quantile, runBench } from './report';

const FLOOD_SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
/** B–E are measured under the flood once it is in full swing (2 s in) until 2 s before it ends. */
const FLOODED_SECONDS = Math.max(1, FLOOD_SECONDS - 4);
// The same load alone: the same rate for as long, so both p99 are read from as many answers (it was 10 s,
// 800 answers against 1,280 under the flood).
const QUIET_SECONDS = Number(process.env.BENCH_QUIET_SECONDS ?? FLOODED_SECONDS);
const QUIET_RATE = Number(process.env.BENCH_QUIET_RATE ?? 20);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 128);
const QUIET_WORKSPACES = 4;
const PORT = 18121;
const report = createReport('fairness', {
  title: 'One workspace floods intake; four quiet workspaces keep their latency',
  settings: { 'flood seconds': FLOOD_SECONDS, 'quiet seconds': QUIET_SECONDS, 'quiet rate per workspace': `${QUIET_RATE}/s`, 'flood connections': `${CONNECTIONS} (half ingest, half webhooks)` },
});

/** One SMS for warming up (repeats of it are duplicates: answered, written once). */
const smsWarm = (tenantId: string) => JSON.stringify({ tenant_id: tenantId, payload: { MessageSid: 'SMwarm0000', AccountSid: 'AC0', From: '+15550009999', To: '+15550000000', Body: 'Warm-up', NumMedia: '0' } });

async function main() {
  const database = await freshDatabase('helpdesk_bench_fairness');
  const env: Env = benchEnv(database.url, 'fairness', { INGEST_RATE_POINTS: '10000000', INBOUND_WEBHOOK_RATE_POINTS: '10000000', PG_POOL_MAX: '16', WORKER_CONCURRENCY: '8' });
  const config = loadConfig(env);
  const loud = await smsWorkspace(config, 'A');
  const quiet: Awaited<ReturnType<typeof smsWorkspace>>[] = [];
  for (let i = 0; i < QUIET_WORKSPACES; i++) quiet.push(await smsWorkspace(config, 'BCDE'[i]!));
  const db = loud.handle.db;
  const audit = createAuditService({ db });
  const webhooks = createWebhookService({ db, config, audit });
  const owner = { kind: 'user', tenantId: loud.ws.tenant_id, userId: loud.ws.owner_user_id, role: 'owner', apiKeyId: null, scopes: null, agentIds: [] } as never;
  const secret = randomBytes(24).toString('base64url');
  const integration = await webhooks.createIntegration(owner, { provider: 'zendesk', name: 'migration', signing_secret: secret });

  const worker = await start('workers/index.ts', { ...env, LOG_LEVEL: 'info' }, /workers started/);
  const api = await start('src/server.ts', { ...env, PORT: String(PORT) }, null, PORT);
  await autocannon({ url: `http://127.0.0.1:${PORT}/healthz`, connections: 8, duration: 1 });

  // The quiet workspaces: a steady rate each, every answer timed, over keep-alive connections.
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  let quietSeq = 0;
  const sendQuiet = (tenantId: string) =>
    new Promise<{ status: number; ms: number }>((resolve) => {
      quietSeq += 1;
      const body = JSON.stringify({ tenant_id: tenantId, payload: { MessageSid: `SMq${randomBytes(14).toString('hex')}`, AccountSid: 'AC0', From: `+1444${String(quietSeq).padStart(9, '0')}`, To: '+15550000000', Body: `Quiet ${quietSeq}`, NumMedia: '0' } });
      const started = performance.now();
      const req = request({ host: '127.0.0.1', port: PORT, path: '/v1/ingest/sms', method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started }));
      });
      req.on('error', () => resolve({ status: 0, ms: performance.now() - started }));
      req.end(body);
    });
  const quietLoad = async (seconds: number) => {
    const answers: Promise<{ status: number; ms: number }>[] = [];
    const every = 1000 / QUIET_RATE;
    const startedAt = performance.now();
    for (let tick = 0; performance.now() - startedAt < seconds * 1000; tick++) {
      for (const q of quiet) answers.push(sendQuiet(q.ws.tenant_id));
      const nextAt = startedAt + (tick + 1) * every;
      await new Promise((r) => setTimeout(r, Math.max(0, nextAt - performance.now())));
    }
    const done = await Promise.all(answers);
    const ms = done.map((d) => d.ms);
    const statuses = new Map<number, number>();
    for (const d of done) statuses.set(d.status, (statuses.get(d.status) ?? 0) + 1);
    return { sent: done.length, p50: quantile(ms, 0.5), p99: quantile(ms, 0.99), statuses };
  };
  const statusLine = (s: Map<number, number>) => [...s].map(([k, v]) => `${k}: ${v}`).join(', ');

  console.log(`node ${process.version}; B–E ${QUIET_RATE}/s each; A floods at ${CONNECTIONS} connections for ${FLOOD_SECONDS} s`);
  // Warm-up, not measured: both processes' JIT, pools and the fresh database's statistics settle first (the
  // first seconds of a fresh run answered several times slower).
  const warm = await quietLoad(3);
  await autocannon({ url: `http://127.0.0.1:${PORT}/v1/ingest/sms`, method: 'POST', headers: { 'content-type': 'application/json' }, connections: 16, duration: 3, body: smsWarm(loud.ws.tenant_id) });
  await new Promise((r) => setTimeout(r, 2000));
  const alone = await quietLoad(QUIET_SECONDS);
  console.log(`B–E alone:        ${alone.sent} messages  p50 ${alone.p50.toFixed(0)} ms  p99 ${alone.p99.toFixed(0)} ms  (${statusLine(alone.statuses)})`);

  // A's flood: SMS from distinct senders and signed Zendesk events, each 429 kept to replay after Retry-After.
  let loudSeq = 0;
  const loudSms: string[] = [];
  const loudEvents: string[] = [];
  const refusedSms: string[] = [];
  const refusedEvents: string[] = [];
  const half = Math.max(1, Math.floor(CONNECTIONS / 2));
  const smsBody = (id: string) => JSON.stringify({ tenant_id: loud.ws.tenant_id, payload: { MessageSid: id, AccountSid: 'AC0', From: `+1333${id.slice(3, 15).slice(-9)}`, To: '+15550000000', Body: `Flood ${id}`, NumMedia: '0' } });
  const floodIngest = autocannon({
    url: `http://127.0.0.1:${PORT}/v1/ingest/sms`,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    connections: half,
    duration: FLOOD_SECONDS,
    requests: [
      {
        setupRequest: (req, context) => {
          loudSeq += 1;
          const id = `SMl${String(loudSeq).padStart(12, '0')}${randomBytes(8).toString('hex')}`;
          loudSms.push(id);
          (context as { id?: string }).id = id;
          return { ...req, body: smsBody(id) };
        },
        onResponse: (status, _body, context) => {
          if (status === 429) refusedSms.push((context as { id: string }).id);
        },
      },
    ],
  });
  const eventRequest = (raw: string) => ({ method: 'POST' as const, path: `/v1/webhooks/zendesk/${integration.id}`, headers: signedHeaders('zendesk', secret, raw), body: raw });
  const floodWebhooks = autocannon({
    url: `http://127.0.0.1:${PORT}`,
    connections: half,
    duration: FLOOD_SECONDS,
    requests: [
      {
        setupRequest: (req, context) => {
          const raw = rawOf(zendeskEvent({ ticketId: 1000 + (loudEvents.length % 500), eventId: `zen-${randomBytes(8).toString('hex')}` }));
          loudEvents.push(raw);
          (context as { raw?: string }).raw = raw;
          return { ...req, ...eventRequest(raw) };
        },
        onResponse: (status, _body, context) => {
          if (status === 429) refusedEvents.push((context as { raw: string }).raw);
        },
      },
    ],
  });
  // The quiet load starts once the flood is in full swing, and ends before it does.
  await new Promise((r) => setTimeout(r, 2000));
  const flooded = await quietLoad(FLOODED_SECONDS);
  const [ingestRun, webhookRun] = await Promise.all([floodIngest, floodWebhooks]);
  console.log(`B–E under flood:  ${flooded.sent} messages  p50 ${flooded.p50.toFixed(0)} ms  p99 ${flooded.p99.toFixed(0)} ms  (${statusLine(flooded.statuses)})`);
  const loudAccepted = ingestRun['2xx'] + webhookRun['2xx'];
  const loudRefused = refusedSms.length + refusedEvents.length;
  console.log(`A: ${(loudAccepted / FLOOD_SECONDS).toFixed(0)} accepted/s (ingest ${ingestRun['2xx']}, webhooks ${webhookRun['2xx']}), 429 ${loudRefused}, other non-2xx ${ingestRun.non2xx + webhookRun.non2xx - loudRefused}`);

  // A's refused messages again after their Retry-After (1 s), until each is accepted.
  let pendingSms = refusedSms;
  let pendingEvents = refusedEvents;
  for (let round = 0; round < 20 && pendingSms.length + pendingEvents.length > 0; round++) {
    await new Promise((r) => setTimeout(r, 1000));
    const stillSms: string[] = [];
    const stillEvents: string[] = [];
    for (let i = 0; i < pendingSms.length; i += 32) {
      await Promise.all(pendingSms.slice(i, i + 32).map(async (id) => {
        const res = await fetch(`http://127.0.0.1:${PORT}/v1/ingest/sms`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: smsBody(id) });
        if (res.status !== 200 && res.status !== 202) stillSms.push(id);
      }));
    }
    for (let i = 0; i < pendingEvents.length; i += 32) {
      await Promise.all(pendingEvents.slice(i, i + 32).map(async (raw) => {
        const q = eventRequest(raw);
        const res = await fetch(`http://127.0.0.1:${PORT}${q.path}`, { method: 'POST', headers: q.headers, body: q.body });
        if (res.status !== 200 && res.status !== 202) stillEvents.push(raw);
      }));
    }
    pendingSms = stillSms;
    pendingEvents = stillEvents;
  }

  // Everything written once: let the worker drain, then count per workspace.
  const count = async (table: 'ingest_deliveries' | 'transcript_events', tenantId: string) =>
    Number((await db.selectFrom(table).select((e) => e.fn.countAll<string>().as('n')).where('tenant_id', '=', tenantId).executeTakeFirstOrThrow()).n);
  // The warm-up's quiet messages count too, and its one repeated SMS is one more of A's.
  const quietSent = warm.sent + alone.sent + flooded.sent;
  loudSms.push('SMwarm0000');
  const expectAll = async () => {
    let quietWritten = 0;
    for (const q of quiet) quietWritten += await count('ingest_deliveries', q.ws.tenant_id);
    return { quietWritten, loudSms: await count('ingest_deliveries', loud.ws.tenant_id), loudEvents: await count('transcript_events', loud.ws.tenant_id) };
  };
  let written = await expectAll();
  for (let i = 0; i < 120 && (written.loudSms < loudSms.length || written.loudEvents < loudEvents.length || written.quietWritten < quietSent); i++) {
    await new Promise((r) => setTimeout(r, 500));
    written = await expectAll();
  }
  const exact = written.quietWritten === quietSent && written.loudSms === loudSms.length && written.loudEvents === loudEvents.length && pendingSms.length + pendingEvents.length === 0;
  console.log(`written: B–E ${written.quietWritten}/${quietSent}, A messages ${written.loudSms}/${loudSms.length}, A events ${written.loudEvents}/${loudEvents.length}, still refused ${pendingSms.length + pendingEvents.length}`);

  const quietOk = (s: Map<number, number>) => [...s].every(([k]) => k === 200);
  const ratio = flooded.p99 / alone.p99;
  const met = ratio <= 2;
  console.log(`${met ? 'PASS' : 'MISS'}: B–E p99 under the flood ${ratio.toFixed(2)}× alone (target ≤ 2×)`);
  console.log(`${quietOk(flooded.statuses) && quietOk(alone.statuses) ? 'PASS' : 'FAIL'}: every B–E answer 200 (no 429, no 202)`);
  console.log(`${exact ? 'PASS' : 'FAIL'}: nothing lost or doubled for anyone`);
  report.figure({ name: 'B–E alone: p50', value: alone.p50, unit: 'ms' });
  report.figure({ name: 'B–E alone: p99', value: alone.p99, unit: 'ms' });
  report.figure({ name: 'B–E under the flood: p50', value: flooded.p50, unit: 'ms', baseline: alone.p50 });
  report.figure({ name: 'B–E under the flood: p99', value: flooded.p99, unit: 'ms', baseline: alone.p99, target: '≤ 2× B–E alone (issue 21)', met });
  report.figure({ name: 'B–E answers other than 200 (429, 202, errors)', value: [...alone.statuses, ...flooded.statuses].filter(([k]) => k !== 200).reduce((n, [, v]) => n + v, 0), unit: 'responses', target: '0 (issue 21)', met: quietOk(flooded.statuses) && quietOk(alone.statuses) });
  report.figure({ name: 'A: accepted', value: loudAccepted / FLOOD_SECONDS, unit: 'msgs/s' });
  report.figure({ name: 'A: 429 (replayed after Retry-After)', value: loudRefused, unit: 'responses' });
  report.figure({ name: 'every distinct message of every workspace written once', value: `B–E ${written.quietWritten}/${quietSent}, A ${written.loudSms + written.loudEvents}/${loudSms.length + loudEvents.length}`, target: 'all, once (issue 21)', met: exact });

  agent.destroy();
  await stop(api);
  await stop(worker);
  await loud.handle.close();
  for (const q of quiet) await q.handle.close();
  await database.drop();
}

runBench(main);
