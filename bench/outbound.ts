/**
 * Replies on every channel under load (issue 33), with the real API and worker processes (port 18151) and the
 * provider doubles of the test suite (test/helpers/provider-doubles.ts) in a process of their own (port 18152),
 * behind a proxy that holds each provider's answer for BENCH_PROVIDER_MS (20–50 ms, uniform) after the double
 * has recorded the send, as a real provider takes that long to answer. The replies go to SMS (Twilio) and
 * Telegram tickets that channel intake created (BENCH_TICKETS of each), one owner API key standing in for the
 * agents.
 * 1. Capacity: BENCH_AGENTS (32) agents post replies back to back for BENCH_SECONDS (20), each on tickets of its
 *    own (no two wait on one ticket's lock). Reported: replies/s committed (201), replies/s reaching the double
 *    over the same window, how long the rest took to arrive, the reply POST's p50/p99, and the CPU-ms per reply
 *    of the API, the worker, PostgreSQL (this database's backends) and Redis (/proc, from the first reply to the
 *    last send settled), with the database's work per reply (pg_stat_*) and what its backends waited on
 *    (pg_stat_activity, sampled). Baseline: the same agents for half as long on tickets made through the API,
 *    whose replies are stored and not sent — what a reply cost before it was also sent.
 * 2. Latency: replies offered open-loop at BENCH_REPLY_RATE (100) a second for BENCH_SECONDS: p50/p99 from each
 *    reply's 201 to the double recording its send (matched by a tag in the body). Target (issue 33): p99 < 1 s.
 *    Where the time goes, per reply, from the outbox row (claimed_at, sent_at) and the proxy: 201 → claimed
 *    (queue wait), claimed → at the double (reply context, credentials, the request), at the double → answered
 *    (the provider latency the proxy adds), answered → settled (sent_at, the settle transaction's start).
 * 3. Intake while replies flow: channel intake the way bench/ingest.ts measures it (SMS from distinct senders
 *    + 10 % redeliveries, BENCH_CONNECTIONS (64) connections, autocannon), BENCH_INTAKE_SECONDS (8) a case,
 *    alone and while replies flow at BENCH_REPLY_RATE, as BENCH_ROUNDS (3) pairs taken alternately (alone,
 *    with), (with, alone), …; the figure is the median pair's ratio. Target (issue 33): ≥ 0.9× intake alone.
 *    Then once, as a diagnostic, intake while the same rate of replies goes to tickets made through the API
 *    (stored, not sent): what the reply itself costs intake, and so what the send adds. Each case also reports
 *    the cores each component used (/proc) and what the database's backends waited on.
 * Every reply answered 201 in any phase must reach the double exactly once (counted there) and end `sent`; the
 * bench exits 1 when one does not. BENCH_DEBUG=1 prints refused replies and the statements waiting on locks.
 *   npm run bench:outbound     BENCH_SECONDS (20), BENCH_AGENTS (32), BENCH_REPLY_RATE (100), BENCH_TICKETS (200),
 *                              BENCH_INTAKE_SECONDS (8), BENCH_ROUNDS (3), BENCH_CONNECTIONS (64),
 *                              BENCH_WARMUP_MESSAGES (3000), BENCH_PROVIDER_MS (20-50), BENCH_CPU_PROF (a directory)
 */
import { randomBytes } from 'node:crypto';
import http, { createServer, type Server } from 'node:http';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import autocannon from 'autocannon';
import { sql } from 'kysely';
import { loadConfig } from '../src/config';
import type { Db } from '../src/db';
import { startProviderDoubles } from '../test/helpers/provider-doubles';
import { benchEnv, cpuPer, cpuSample, freshDatabase, smsWorkspace, start, stop, type Env } from './processes';
import { createReport, quantile, runBench } from './report';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const AGENTS = Number(process.env.BENCH_AGENTS ?? 32);
const RATE = Number(process.env.BENCH_REPLY_RATE ?? 100);
const TICKETS = Number(process.env.BENCH_TICKETS ?? 200);
const INTAKE_SECONDS = Number(process.env.BENCH_INTAKE_SECONDS ?? 8);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const WARMUP = Number(process.env.BENCH_WARMUP_MESSAGES ?? 3000);
const [PROVIDER_MIN, PROVIDER_MAX] = (process.env.BENCH_PROVIDER_MS ?? '20-50').split('-').map(Number) as [number, number?];
const PORT = 18151;
const PROVIDERS_PORT = 18152;
const ROLE = process.env.BENCH_OUTBOUND_ROLE;
const report = createReport('outbound', {
  title: 'Replies on every channel: capacity, commit-to-provider latency, and intake while replies flow',
  settings: {
    seconds: SECONDS,
    agents: AGENTS,
    'offered replies per second': RATE,
    'tickets (SMS + Telegram)': `${TICKETS} + ${TICKETS}`,
    'intake seconds per case': INTAKE_SECONDS,
    rounds: ROUNDS,
    'intake connections': CONNECTIONS,
    'provider latency': `${PROVIDER_MIN}–${PROVIDER_MAX ?? PROVIDER_MIN} ms`,
  },
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => quantile(xs, 0.5);
const ms = (n: number) => (Number.isFinite(n) ? `${Math.round(n)} ms` : '—');

/** A reply's tag in its body: letters and digits only, so it reads the same form-encoded (Twilio) and in JSON. */
const tagOf = (n: number) => `obr${n}z`;
const TAG = /obr(\d+)z/;

/**
 * The providers, a process of their own (this file with BENCH_OUTBOUND_ROLE=providers), as a real provider is
 * another machine: the doubles of the test suite behind a proxy on PROVIDERS_PORT. Each request goes to the
 * double at once (its `at` is the arrival the bench reports), and the double's answer is held for the
 * provider's latency before it goes back. `/__bench/missing` (POST a list of reply tags) says how many have not
 * arrived; `/__bench/state` gives every recorded send (tag, arrival, status) and when each tag's answer left.
 */
async function providersProcess() {
  const doubles = await startProviderDoubles();
  doubles.addTwilioAccount(process.env.BENCH_TWILIO_SID!, process.env.BENCH_TWILIO_TOKEN!);
  doubles.addTelegramBot(process.env.BENCH_TELEGRAM_TOKEN!);
  const target = new URL(doubles.urls.twilio);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
  const arrived = new Set<number>();
  const answered = new Map<number, number>();
  const delay = () => PROVIDER_MIN + Math.random() * ((PROVIDER_MAX ?? PROVIDER_MIN) - PROVIDER_MIN);
  const json = (res: http.ServerResponse, value: unknown) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(value));
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      if (req.url === '/__bench/missing') return json(res, { missing: (JSON.parse(body.toString('utf8')) as number[]).filter((t) => !arrived.has(t)).length });
      if (req.url === '/__bench/state') {
        const sends = doubles.sends().map((x) => [Number(TAG.exec(String(x.body.Body ?? x.body.text ?? ''))?.[1] ?? -1), x.at, x.answeredStatus]);
        return json(res, { sends, answered: [...answered] });
      }
      const m = TAG.exec(body.toString('utf8'));
      const tag = m ? Number(m[1]) : undefined;
      if (tag !== undefined) arrived.add(tag);
      const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent }, (answer) => {
        const parts: Buffer[] = [];
        answer.on('data', (c: Buffer) => parts.push(c));
        answer.on('end', () =>
          setTimeout(() => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            res.end(Buffer.concat(parts));
            if (tag !== undefined) answered.set(tag, Date.now());
          }, delay()),
        );
      });
      up.on('error', () => res.destroy());
      up.end(body);
    });
  });
  await new Promise<void>((r) => server.listen(PROVIDERS_PORT, '127.0.0.1', () => r()));
  console.log('providers listening');
  process.on('SIGTERM', () => void Promise.all([new Promise((r) => server.close(r)), doubles.close()]).finally(() => process.exit(0)));
}

/** CPU-ms used so far by each PostgreSQL backend serving this bench's database (other databases' work on a shared server is not counted). */
async function backendCpu(db: Db): Promise<Map<number, number>> {
  const { rows } = await sql<{ pid: number }>`select pid from pg_stat_activity where datname = current_database()`.execute(db);
  const out = new Map<number, number>();
  for (const { pid } of rows) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(pid, (Number(f[11]) + Number(f[12])) * 10);
    } catch {
      /* ended meanwhile */
    }
  }
  return out;
}
/** CPU-ms between two backendCpu samples: a backend that started in between counts whole; one that ended is missed. */
const backendDelta = (before: Map<number, number>, after: Map<number, number>) => [...after].reduce((n, [pid, v]) => n + v - (before.get(pid) ?? 0), 0);

/** This database's counters: transactions, rows read and written, and per table rows read by sequential and index scans. */
async function dbStats(db: Db) {
  const { rows: [d] } = await sql<{ xact: string; returned: string; fetched: string; written: string; blks: string }>`
    select xact_commit + xact_rollback as xact, tup_returned as returned, tup_fetched as fetched, tup_inserted + tup_updated + tup_deleted as written, blks_hit + blks_read as blks
    from pg_stat_database where datname = current_database()`.execute(db);
  const { rows: tables } = await sql<{ relname: string; seq_scan: string; seq_read: string; idx_scan: string; idx_fetch: string; ins: string }>`
    select relname, seq_scan, seq_tup_read as seq_read, coalesce(idx_scan, 0) as idx_scan, coalesce(idx_tup_fetch, 0) as idx_fetch, n_tup_ins as ins from pg_stat_user_tables`.execute(db);
  return { xact: Number(d!.xact), returned: Number(d!.returned), fetched: Number(d!.fetched), written: Number(d!.written), blks: Number(d!.blks), tables: new Map(tables.map((t) => [t.relname, { seqScan: Number(t.seq_scan), seqRead: Number(t.seq_read), idxScan: Number(t.idx_scan), idxFetch: Number(t.idx_fetch), ins: Number(t.ins) }])) };
}

/**
 * What this database's backends are doing, sampled every 50 ms while a phase runs: for each wait (Lock:advisory
 * is the per-workspace event-log lock taken at commit, IO:WALSync the commit's flush, "running" no wait), the
 * average number of backends in it (Little's law: how much of the phase's time went there, in backends).
 */
function activitySampler(db: Db) {
  let counts = new Map<string, number>();
  let blocked = new Map<string, number>();
  let samples = 0;
  let timer: NodeJS.Timeout | null = null;
  let busy = false;
  const sample = async () => {
    if (busy) return;
    busy = true;
    try {
      const { rows } = await sql<{ w: string; n: number }>`
        select coalesce(wait_event_type || ':' || wait_event, 'running') as w, count(*)::int as n
        from pg_stat_activity
        where datname = current_database() and state = 'active' and pid <> pg_backend_pid()
        group by 1`.execute(db);
      samples += 1;
      for (const r of rows) counts.set(r.w, (counts.get(r.w) ?? 0) + r.n);
      // The statements waiting on a lock, and what the holder is running: which rows the writers meet on.
      const { rows: waiting } = await sql<{ q: string; holder: string | null; n: number }>`
        select left(regexp_replace(a.query, '\\s+', ' ', 'g'), 90) as q, left(regexp_replace(h.query, '\\s+', ' ', 'g'), 60) as holder, count(*)::int as n
        from pg_stat_activity a left join pg_stat_activity h on h.pid = (pg_blocking_pids(a.pid))[1]
        where a.datname = current_database() and a.wait_event_type = 'Lock'
        group by 1, 2`.execute(db);
      for (const w of waiting) blocked.set(`${w.q} ⟵ ${w.holder ?? '?'}`, (blocked.get(`${w.q} ⟵ ${w.holder ?? '?'}`) ?? 0) + w.n);
    } finally {
      busy = false;
    }
  };
  return {
    start() {
      counts = new Map();
      blocked = new Map();
      samples = 0;
      timer = setInterval(() => void sample(), 50);
    },
    /** The average backends in each state over the phase, busiest first, as text. */
    stop(): string {
      if (timer) clearInterval(timer);
      timer = null;
      if (process.env.BENCH_DEBUG) for (const [q, n] of [...blocked].sort((a, b) => b[1] - a[1]).slice(0, 6)) console.log(`    waiting on a lock ${(n / Math.max(1, samples)).toFixed(2)}: ${q}`);
      return [...counts]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 6)
        .map(([w, n]) => `${w} ${(n / Math.max(1, samples)).toFixed(2)}`)
        .join(', ');
    },
  };
}

interface Reply {
  tag: number;
  ticket: string;
  /** Whether the ticket came in on a channel with a sender (an API ticket's reply is stored, not sent). */
  sends: boolean;
  posted: number;
  /** When the 201 arrived; undefined when the reply was refused or failed. */
  committed?: number;
  eventId?: string;
  status?: number;
  /** Why it was not committed: the status and the start of the answer, or the request's error. */
  problem?: string;
}

async function main() {
  const loadAtStart = os.loadavg()[0]!;
  const database = await freshDatabase('helpdesk_bench_outbound');
  // The channels' credentials, as an operator sets them; the doubles know the same ones.
  const accountSid = `AC${randomBytes(16).toString('hex')}`;
  const authToken = randomBytes(16).toString('hex');
  const botToken = `7${String(Date.now()).slice(-8)}:AA${randomBytes(16).toString('base64url')}`;
  const providersBase = `http://127.0.0.1:${PROVIDERS_PORT}`;
  // Not this bench's report: the providers' process writes none.
  const providers = await start('bench/outbound.ts', { BENCH_OUTBOUND_ROLE: 'providers', BENCH_REPORT: '', BENCH_TWILIO_SID: accountSid, BENCH_TWILIO_TOKEN: authToken, BENCH_TELEGRAM_TOKEN: botToken }, /providers listening/);
  const env: Env = benchEnv(database.url, 'outbound', {
    INGEST_RATE_POINTS: '10000000',
    // The same intake settings as bench/ingest.ts, so "intake alone" is today's intake.
    PG_POOL_MAX: process.env.PG_POOL_MAX ?? '16',
    WORKER_CONCURRENCY: process.env.WORKER_CONCURRENCY ?? '8',
    INGEST_BATCH_WINDOW_MS: process.env.INGEST_BATCH_WINDOW_MS ?? '2',
    INGEST_BATCH_MAX: process.env.INGEST_BATCH_MAX ?? '64',
    TWILIO_API_URL: `${providersBase}/twilio`,
    TELEGRAM_API_URL: `${providersBase}/telegram`,
    WHATSAPP_API_URL: `${providersBase}/whatsapp`,
    POSTMARK_API_URL: `${providersBase}/postmark`,
  });
  const config = loadConfig(env);
  const { handle, ws } = await smsWorkspace(config);
  const db = handle.db;
  const key = ws.api_key.secret;
  const tenantId = ws.tenant_id;
  const activity = activitySampler(db);

  const worker = await start('workers/index.ts', { ...env, LOG_LEVEL: 'info' }, /workers started/);
  const api = await start('src/server.ts', { ...env, PORT: String(PORT) }, null, PORT);
  const base = `http://127.0.0.1:${PORT}`;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}) });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<Record<string, unknown>>;
  };

  await call('PUT', '/v1/channels/sms', { config: { account_sid: accountSid, auth_token: authToken, phone_number: '+15550000000' } });
  await call('PUT', '/v1/channels/telegram', { config: { bot_token: botToken } });

  // The tickets replied to: one per SMS sender and one per Telegram chat, created by channel intake.
  const ingest = (channel: string, payload: unknown) =>
    fetch(`${base}/v1/ingest/${channel}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tenant_id: tenantId, payload }) }).then((r) => {
      if (r.status !== 202 && r.status !== 200) throw new Error(`ingest ${channel}: ${r.status}`);
    });
  for (let i = 0; i < TICKETS; i++) {
    await Promise.all([
      ingest('sms', { MessageSid: `SMobr${randomBytes(14).toString('hex')}`, AccountSid: accountSid, From: `+1666${String(i).padStart(7, '0')}`, To: '+15550000000', Body: `Where is my order ${i}?`, NumMedia: '0' }),
      ingest('telegram', { update_id: 1000 + i, message: { message_id: 10 + i, from: { id: 5_000_000 + i, is_bot: false, first_name: `Customer ${i}` }, chat: { id: 5_000_000 + i, type: 'private' }, date: Math.floor(Date.now() / 1000), text: `Hello, question ${i}` } }),
    ]);
  }
  const ticketRows = async () =>
    db.selectFrom('tickets').select(['id', 'source']).where('tenant_id', '=', tenantId).where('source', 'in', ['sms', 'telegram']).orderBy('created_at').execute();
  for (let i = 0; i < 120 && (await ticketRows()).length < 2 * TICKETS; i++) await sleep(250);
  const tickets = (await ticketRows()).map((t) => t.id);

  if (tickets.length < 2 * TICKETS) throw new Error(`intake created ${tickets.length} of ${2 * TICKETS} tickets`);

  // ─── replies ─────────────────────────────────────────────────────────────────────────────────────────────
  const replies: Reply[] = [];
  let nextTag = 0;
  const reply = async (ticket: string, sends = true): Promise<Reply> => {
    const tag = (nextTag += 1);
    const r: Reply = { tag, ticket, sends, posted: Date.now() };
    replies.push(r);
    try {
      const res = await fetch(`${base}/v1/tickets/${ticket}/replies`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ body: `Thanks for writing: your order ships tomorrow (ref ${tagOf(tag)}).` }),
      });
      r.status = res.status;
      const text = await res.text();
      if (res.status === 201) {
        r.committed = Date.now();
        r.eventId = (JSON.parse(text) as { new_events: { id: string; kind: string }[] }).new_events.find((e) => e.kind === 'reply')?.id;
      } else r.problem = `${res.status} ${text.slice(0, 160)}`;
    } catch (err) {
      r.problem = `${(err as Error).message}${(err as { cause?: Error }).cause ? `: ${(err as { cause: Error }).cause.message}` : ''}`;
    }
    if (r.problem && process.env.BENCH_DEBUG) console.log(`reply ${tag}: ${r.problem}`);
    return r;
  };
  /** Replies offered open-loop at `rate` a second, round the tickets, until `seconds` pass or `stopped()`. */
  let rr = 0;
  const paced = async (rate: number, seconds: number, stopped: () => boolean = () => false, on = tickets, sends = true) => {
    const mine: Promise<Reply>[] = [];
    const began = performance.now();
    for (let i = 0; performance.now() - began < seconds * 1000 && !stopped(); i++) {
      mine.push(reply(on[rr++ % on.length]!, sends));
      await sleep(Math.max(0, began + (i + 1) * (1000 / rate) - performance.now()));
    }
    return Promise.all(mine);
  };
  /** Resolves once every committed reply of `batch` has reached the double, or after `limitMs`. */
  const arrivedAll = async (batch: Reply[], limitMs = 60_000) => {
    const deadline = Date.now() + limitMs;
    const tags = JSON.stringify(committed(batch).map((r) => r.tag));
    const missing = async () => ((await (await fetch(`${providersBase}/__bench/missing`, { method: 'POST', body: tags })).json()) as { missing: number }).missing;
    while ((await missing()) > 0 && Date.now() < deadline) await sleep(100);
    return Date.now();
  };
  /** What the doubles recorded: each tag's arrivals (2xx or not) and successful sends, and when its answer left the proxy. */
  const arrived = new Map<number, number[]>();
  const accepted = new Map<number, number>();
  const answered = new Map<number, number>();
  let untagged = 0;
  const providerState = async () => {
    const state = (await (await fetch(`${providersBase}/__bench/state`)).json()) as { sends: [number, number, number | null][]; answered: [number, number][] };
    arrived.clear();
    accepted.clear();
    untagged = 0;
    for (const [tag, at, status] of state.sends) {
      if (tag < 0) untagged += 1;
      arrived.set(tag, [...(arrived.get(tag) ?? []), at]);
      if (status !== null && status < 300) accepted.set(tag, (accepted.get(tag) ?? 0) + 1);
    }
    for (const [tag, at] of state.answered) answered.set(tag, at);
  };
  /** Resolves once no send is queued or in flight (every claim settled), or after `limitMs`. */
  const outboxSettled = async (limitMs = 60_000) => {
    const deadline = Date.now() + limitMs;
    const open = async () =>
      Number((await db.selectFrom('outbound_messages').select((e) => e.fn.countAll<string>().as('n')).where('state', 'in', ['queued', 'sending']).executeTakeFirstOrThrow()).n);
    while ((await open()) > 0 && Date.now() < deadline) await sleep(100);
    return Date.now();
  };
  const committed = (batch: Reply[]) => batch.filter((r) => r.committed !== undefined);
  /** Commit-to-provider latency of each committed reply of a batch that reached the double (its first arrival). */
  const latencies = (batch: Reply[]) => committed(batch).flatMap((r) => (arrived.has(r.tag) ? [arrived.get(r.tag)![0]! - r.committed!] : []));

  // ─── intake ──────────────────────────────────────────────────────────────────────────────────────────────
  let distinct = 0;
  const intake = async (tag: string, run: { duration: number } | { amount: number }) => {
    const sent: Record<string, unknown>[] = [];
    let n = 0;
    const body = () => {
      n += 1;
      if (n % 10 === 0 && sent.length > 0) return JSON.stringify({ tenant_id: tenantId, payload: sent[Math.floor(Math.random() * sent.length)] });
      distinct += 1;
      const payload = { MessageSid: `SM${tag}${randomBytes(14).toString('hex')}`, AccountSid: 'AC0', From: `+1555${tag}${String(distinct).padStart(8, '0')}`, To: '+15550000000', Body: `Hello ${distinct}`, NumMedia: '0' };
      sent.push(payload);
      return JSON.stringify({ tenant_id: tenantId, payload });
    };
    return autocannon({
      url: `${base}/v1/ingest/sms`,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      connections: CONNECTIONS,
      ...run,
      requests: [{ setupRequest: (req) => ({ ...req, body: body() }) }],
    });
  };
  const deliveries = async () => Number((await db.selectFrom('ingest_deliveries').select((e) => e.fn.countAll<string>().as('n')).executeTakeFirstOrThrow()).n);
  /** Resolves once intake's ledger has not grown for a second (the worker wrote what the last case queued). */
  const intakeSettled = async () => {
    for (let before = -1, now = await deliveries(), i = 0; now !== before && i < 120; i++, await sleep(1000), before = now, now = await deliveries());
  };

  console.log(
    `node ${process.version}; ${TICKETS} SMS + ${TICKETS} Telegram tickets; provider latency ${PROVIDER_MIN}–${PROVIDER_MAX ?? PROVIDER_MIN} ms; ` +
      `capacity: ${AGENTS} agents for ${SECONDS} s; latency: ${RATE} replies/s for ${SECONDS} s; intake: ${ROUNDS} × (${INTAKE_SECONDS} s alone, ${INTAKE_SECONDS} s with ${RATE} replies/s), ${CONNECTIONS} connections`,
  );

  // Warm-up: JIT, pools and caches of both paths, as bench/ingest.ts warms intake up.
  await intake('WA', { amount: WARMUP });
  await paced(RATE, 5);
  await intakeSettled();
  await outboxSettled();

  // ─── 1. capacity ─────────────────────────────────────────────────────────────────────────────────────────
  /**
   * AGENTS agents replying back to back for `seconds`, each on tickets of its own; then until every send
   * arrived and settled. CPU and database work per committed reply, from the first reply to the last settle.
   */
  const closedLoop = async (title: string, on: string[], seconds: number, sends: boolean) => {
    const cpu0 = cpuSample({ api, worker });
    const pg0 = await backendCpu(db);
    const stats0 = await dbStats(db);
    const load0 = os.loadavg()[0]!;
    activity.start();
    const began = Date.now();
    const batch: Reply[] = [];
    await Promise.all(
      Array.from({ length: AGENTS }, async (_, agent) => {
        const own = on.filter((_, i) => i % AGENTS === agent);
        for (let i = 0; Date.now() - began < seconds * 1000; i++) batch.push(await reply(own[i % own.length]!, sends));
      }),
    );
    const ended = Date.now();
    const waits = activity.stop();
    const allArrived = sends ? await arrivedAll(batch, 120_000) : ended;
    const settled = await outboxSettled(120_000);
    if (sends) await providerState();
    const n = committed(batch).length;
    const cpu = cpuPer(cpu0, cpuSample({ api, worker }), n);
    cpu.postgres = backendDelta(pg0, await backendCpu(db)) / n;
    // Statistics reach pg_stat_* when a backend is idle or at most every second: wait for the last ones.
    await sleep(1500);
    const stats1 = await dbStats(db);
    const window = (ended - began) / 1000;
    const inWindow = committed(batch).filter((r) => (arrived.get(r.tag)?.[0] ?? Infinity) <= ended).length;
    const post = committed(batch).map((r) => r.committed! - r.posted);
    const lat = latencies(batch);
    const total = cpu.api! + cpu.worker! + cpu.postgres! + cpu.redis!;
    const per = (x: number) => x / Math.max(1, n);
    const tableWork = [...stats1.tables]
      .map(([name, t]) => {
        const b = stats0.tables.get(name) ?? { seqScan: 0, seqRead: 0, idxScan: 0, idxFetch: 0, ins: 0 };
        return { name, seqScan: per(t.seqScan - b.seqScan), seqRead: per(t.seqRead - b.seqRead), idxScan: per(t.idxScan - b.idxScan), idxFetch: per(t.idxFetch - b.idxFetch), ins: per(t.ins - b.ins) };
      })
      .filter((t) => t.seqRead + t.idxFetch + t.idxScan + t.ins > 0.05)
      .sort((x, y) => y.seqRead + y.idxFetch - (x.seqRead + x.idxFetch));
    const inserted = tableWork.filter((t) => t.ins > 0.05).sort((x, y) => y.ins - x.ins).map((t) => `${t.name} ${t.ins.toFixed(1)}`).join(', ');
    const dbLine = `transactions ${per(stats1.xact - stats0.xact).toFixed(1)}, rows returned ${per(stats1.returned - stats0.returned).toFixed(0)}, fetched ${per(stats1.fetched - stats0.fetched).toFixed(0)}, written ${per(stats1.written - stats0.written).toFixed(1)}, buffer reads ${per(stats1.blks - stats0.blks).toFixed(0)}`;
    const tableLine = tableWork.slice(0, 8).map((t) => `${t.name} ${t.seqScan.toFixed(2)} seq scans/${t.seqRead.toFixed(0)} rows, ${t.idxScan.toFixed(1)} idx scans/${t.idxFetch.toFixed(0)} rows`).join('; ');
    const byComponent = `api ${cpu.api!.toFixed(2)}, worker ${cpu.worker!.toFixed(2)}, postgres ${cpu.postgres!.toFixed(2)}, redis ${cpu.redis!.toFixed(2)}`;
    console.log(
      `${title.padEnd(30)} ${(n / window).toFixed(0).padStart(5)} replies/s committed   ` +
        (sends ? `${(inWindow / window).toFixed(0).padStart(5)} replies/s reached the provider in the window, the rest ${((allArrived - ended) / 1000).toFixed(1)} s after (settled ${((settled - ended) / 1000).toFixed(1)} s after)   ` : '') +
        `POST p50 ${ms(median(post))} p99 ${ms(quantile(post, 0.99))}   non-201 ${batch.length - n}`,
    );
    if (sends) console.log(`${''.padEnd(30)} commit to provider at saturation p50 ${ms(median(lat))} p99 ${ms(quantile(lat, 0.99))}`);
    if (sends && process.env.BENCH_DEBUG) {
      // Per second of the window: replies committed, sends arrived, and the commit-to-provider p50 of that second's replies.
      for (let t = 0; t < Math.ceil(window); t++) {
        const inSecond = committed(batch).filter((r) => Math.floor((r.committed! - began) / 1000) === t);
        const arrivedThen = [...arrived.values()].filter((a) => Math.floor((a[0]! - began) / 1000) === t).length;
        console.log(`    second ${t}: ${inSecond.length} committed, ${arrivedThen} arrived, p50 ${ms(median(latencies(inSecond)))}`);
      }
    }
    console.log(`${''.padEnd(30)} CPU-ms per reply: ${byComponent}, total ${total.toFixed(2)}   (load average ${load0.toFixed(1)} before, ${os.loadavg()[0]!.toFixed(1)} after, ${os.cpus().length} CPUs)`);
    console.log(`${''.padEnd(30)} database work per reply: ${dbLine}`);
    console.log(`${''.padEnd(30)} rows read per reply by table: ${tableLine}`);
    console.log(`${''.padEnd(30)} rows inserted per reply by table: ${inserted}`);
    console.log(`${''.padEnd(30)} database backends by wait: ${waits}`);
    return { inserted, waits, n, rate: n / window, delivered: inWindow / window, drainSeconds: (allArrived - ended) / 1000, post, lat, cpu, total, byComponent, dbLine, tableLine };
  };

  // The same replies on tickets made through the API: no channel, so no outbox row and no send (the baseline).
  const apiTickets: string[] = [];
  for (let i = 0; i < 2 * TICKETS; i += 16) {
    const made = await Promise.all(
      Array.from({ length: Math.min(16, 2 * TICKETS - i) }, (_, j) => call('POST', '/v1/tickets', { subject: `Order question ${i + j}`, description: 'Where is my order?', customer_email: `c${i + j}@bench.test` })),
    );
    apiTickets.push(...made.map((t) => String(t.id)));
  }
  const noSend = await closedLoop(`capacity, API tickets (no send)`, apiTickets, Math.max(5, SECONDS / 2), false);
  const cap = await closedLoop(`capacity, SMS + Telegram`, tickets, SECONDS, true);

  // ─── 2. latency at the offered rate ──────────────────────────────────────────────────────────────────────
  const latStart = Date.now();
  activity.start();
  const steady = await paced(RATE, SECONDS);
  const steadyActivity = activity.stop();
  const latEnd = Date.now();
  await arrivedAll(steady);
  await outboxSettled();
  await providerState();
  const lat = latencies(steady);
  const p50 = median(lat);
  const p99 = quantile(lat, 0.99);
  const achieved = committed(steady).length / ((latEnd - latStart) / 1000);
  const steadyPost = committed(steady).map((r) => r.committed! - r.posted);
  console.log(
    `${`${RATE} replies/s offered`.padEnd(30)} ${achieved.toFixed(0).padStart(5)} replies/s committed   commit to provider p50 ${ms(p50)}   p99 ${ms(p99)}   max ${ms(Math.max(...lat))}   ` +
      `reached ${lat.length}/${committed(steady).length}   POST p50 ${ms(median(steadyPost))} p99 ${ms(quantile(steadyPost, 0.99))}   load ${os.loadavg()[0]!.toFixed(1)}`,
  );

  // Where the time goes, per reply: from the outbox row (claim and settle times) and the proxy (answer time).
  const rows = await db
    .selectFrom('outbound_messages')
    .select(['event_id', 'claimed_at', 'sent_at', 'attempts', 'state'])
    .where('tenant_id', '=', tenantId)
    .where('event_id', 'in', committed(steady).map((r) => r.eventId!).filter(Boolean))
    .execute();
  const byEvent = new Map(rows.map((r) => [r.event_id, r]));
  const stages = committed(steady).flatMap((r) => {
    const row = byEvent.get(r.eventId!);
    const at = arrived.get(r.tag)?.[0];
    const answeredAt = answered.get(r.tag);
    if (!row?.claimed_at || !row.sent_at || at === undefined || answeredAt === undefined) return [];
    return [
      {
        total: at - r.committed!,
        post: r.committed! - r.posted,
        queue: row.claimed_at.getTime() - r.committed!,
        toProvider: at - row.claimed_at.getTime(),
        provider: answeredAt - at,
        settle: row.sent_at.getTime() - answeredAt,
      },
    ];
  });
  const STAGES = [
    ['post', 'reply POST (request to 201)'],
    ['queue', '201 → claimed (queue wait)'],
    ['toProvider', 'claimed → at the double'],
    ['provider', 'at the double → answered (provider latency)'],
    ['settle', 'answered → settled (sent_at)'],
  ] as const;
  const slowest = [...stages].sort((a, b) => b.total - a.total).slice(0, Math.max(1, Math.ceil(stages.length / 100)));
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  console.log(`${''.padEnd(30)} where the time goes (p50 / p99 / mean over the slowest 1 %):`);
  for (const [k, label] of STAGES) {
    const xs = stages.map((s) => s[k]);
    console.log(`${''.padEnd(32)}${label.padEnd(46)} ${ms(median(xs)).padStart(8)} ${ms(quantile(xs, 0.99)).padStart(8)} ${ms(mean(slowest.map((s) => s[k]))).padStart(8)}`);
  }
  console.log(`${''.padEnd(30)} database backends by wait (average over the phase): ${steadyActivity}`);

  // ─── 3. intake alone and while replies flow ──────────────────────────────────────────────────────────────
  await intake('WB', { amount: WARMUP });
  await intakeSettled();
  const pairs: { alone: number; with: number; aloneP99: number; withP99: number; repliesPerSecond: number; replyP99: number; aloneWaits: string; withWaits: string; aloneCores: string; withCores: string }[] = [];
  /** The CPU each component used over a case, in cores (CPU-ms per ms): where the host's CPUs went. */
  const coresFrom = async () => {
    const at = Date.now();
    const cpu0 = { ...cpuSample({ api, worker, providers }), bench: (process.cpuUsage().user + process.cpuUsage().system) / 1000 };
    const pg0 = await backendCpu(db);
    return async () => {
      const cpu1 = { ...cpuSample({ api, worker, providers }), bench: (process.cpuUsage().user + process.cpuUsage().system) / 1000 };
      const wall = Date.now() - at;
      const cores: Record<string, number> = { api: 0, worker: 0, postgres: 0, redis: 0, providers: 0, bench: 0 };
      for (const k of Object.keys(cores)) cores[k] = (cpu1[k as keyof typeof cpu1]! - cpu0[k as keyof typeof cpu0]!) / wall;
      cores.postgres = backendDelta(pg0, await backendCpu(db)) / wall;
      const total = Object.values(cores).reduce((a, b) => a + b, 0);
      return `${Object.entries(cores).map(([k, v]) => `${k} ${v.toFixed(2)}`).join(', ')}; total ${total.toFixed(2)} of ${os.cpus().length}`;
    };
  };
  const alone = async (round: number) => {
    await intakeSettled();
    await outboxSettled();
    activity.start();
    const cores = await coresFrom();
    const r = await intake(`A${round}x`, { duration: INTAKE_SECONDS });
    const used = await cores();
    const waits = activity.stop();
    console.log(`${`intake alone #${round}`.padEnd(30)} ${r.requests.average.toFixed(0).padStart(5)} msgs/s   p50 ${String(r.latency.p50).padStart(4)} ms   p99 ${String(r.latency.p99).padStart(4)} ms   non-2xx ${r.non2xx + r.errors}   load ${os.loadavg()[0]!.toFixed(1)}`);
    console.log(`${''.padEnd(30)} cores used: ${used}`);
    console.log(`${''.padEnd(30)} database backends by wait: ${waits}`);
    return Object.assign(r, { waits, used });
  };
  /** Intake while replies flow: on the channel tickets, or on API tickets (stored, not sent). */
  const withReplies = async (round: number, where: 'here' | 'unsent' = 'here') => {
    await intakeSettled();
    await outboxSettled();
    let over = false;
    const until = () => over;
    const flowing =
      where === 'unsent' ? paced(RATE, INTAKE_SECONDS + 60, until, apiTickets, false) : paced(RATE, INTAKE_SECONDS + 60, until);
    // Replies are flowing (their sends reach the provider) before intake starts.
    await sleep(2000);
    const fromTag = nextTag;
    const began = Date.now();
    activity.start();
    const cores = await coresFrom();
    const r = await intake(`W${round}x`, { duration: INTAKE_SECONDS });
    const used = await cores();
    const waits = activity.stop();
    const ended = Date.now();
    over = true;
    const batch = (await flowing).filter((x) => x.tag > fromTag);
    if (where !== 'unsent') await arrivedAll(batch);
    await providerState();
    const inCase = committed(batch).filter((x) => x.committed! <= ended);
    const l = latencies(inCase);
    const rate = inCase.length / ((ended - began) / 1000);
    console.log(
      `${(where === 'unsent' ? 'intake, replies not sent' : `intake with replies #${round}`).padEnd(30)} ${r.requests.average.toFixed(0).padStart(5)} msgs/s   p50 ${String(r.latency.p50).padStart(4)} ms   p99 ${String(r.latency.p99).padStart(4)} ms   non-2xx ${r.non2xx + r.errors}   ` +
        `replies ${rate.toFixed(0)}/s committed${where === 'unsent' ? '' : `, commit to provider p50 ${ms(median(l))} p99 ${ms(quantile(l, 0.99))}`}   load ${os.loadavg()[0]!.toFixed(1)}`,
    );
    console.log(`${''.padEnd(30)} cores used: ${used}`);
    console.log(`${''.padEnd(30)} database backends by wait: ${waits}`);
    return { r, rate, replyP99: quantile(l, 0.99), waits, used };
  };
  for (let round = 1; round <= ROUNDS; round++) {
    let a: Awaited<ReturnType<typeof alone>>;
    let w: Awaited<ReturnType<typeof withReplies>>;
    if (round % 2 === 1) {
      a = await alone(round);
      w = await withReplies(round);
    } else {
      w = await withReplies(round);
      a = await alone(round);
    }
    pairs.push({ alone: a.requests.average, with: w.r.requests.average, aloneP99: a.latency.p99, withP99: w.r.latency.p99, repliesPerSecond: w.rate, replyP99: w.replyP99, aloneWaits: a.waits, withWaits: w.waits, aloneCores: a.used, withCores: w.used });
  }
  // Diagnostic, once: the same rate of replies on API tickets, stored and not sent (what the reply itself costs intake).
  const stored = await withReplies(0, 'unsent');
  await intakeSettled();
  await outboxSettled();
  const ratios = pairs.map((p) => p.with / p.alone);
  const mid = [...pairs].sort((x, y) => x.with / x.alone - y.with / y.alone)[Math.floor(pairs.length / 2)]!;
  const intakeRatio = mid.with / mid.alone;
  console.log(`intake with replies ÷ alone, per pair: ${ratios.map((r) => r.toFixed(2)).join(', ')}; median ${intakeRatio.toFixed(2)}; with replies not sent ${(stored.r.requests.average / mid.alone).toFixed(2)}`);

  // ─── exactly once ────────────────────────────────────────────────────────────────────────────────────────
  await providerState();
  const perTag = accepted;
  const ok = committed(replies).filter((r) => r.sends);
  const refused = replies.filter((r) => r.committed === undefined).length;
  const once = ok.filter((r) => perTag.get(r.tag) === 1).length;
  const missing = ok.filter((r) => !perTag.has(r.tag)).length;
  const twice = ok.filter((r) => (perTag.get(r.tag) ?? 0) > 1).length;
  const strays = [...perTag.keys()].filter((t) => replies[t - 1]?.committed === undefined).length;
  const states = await db
    .selectFrom('outbound_messages')
    .select(['state', (e) => e.fn.countAll<string>().as('n')])
    .groupBy('state')
    .execute();
  const notSent = states.filter((s) => s.state !== 'sent').reduce((n, s) => n + Number(s.n), 0);
  const retried = Number(
    (await db.selectFrom('outbound_messages').select((e) => e.fn.countAll<string>().as('n')).where('attempts', '>', 1).executeTakeFirstOrThrow()).n,
  );
  const unsent = await db
    .selectFrom('outbound_messages')
    .select(['state', 'last_error', (e) => e.fn.countAll<string>().as('n')])
    .where('state', '!=', 'sent')
    .groupBy(['state', 'last_error'])
    .execute();
  const problems = new Map<string, number>();
  for (const r of replies) if (r.problem) problems.set(r.problem.replace(/[0-9a-f-]{36}/g, '…'), (problems.get(r.problem.replace(/[0-9a-f-]{36}/g, '…')) ?? 0) + 1);
  for (const [what, n] of problems) console.log(`  reply not committed: ${n} × ${what}`);
  for (const u of unsent) console.log(`  not sent: ${u.n} × ${u.state}: ${u.last_error}`);
  const exactlyOnce = once === ok.length && strays === 0 && untagged === 0;
  console.log(
    `${exactlyOnce ? 'PASS' : 'FAIL'}: every reply sent exactly once: ${ok.length} channel replies committed (${refused} replies refused or failed), ${once} sent once, ${missing} never, ${twice} more than once, ` +
      `${strays} sends of replies not committed, ${untagged} untagged sends; outbox: ${states.map((s) => `${s.state} ${s.n}`).join(', ')}; ${retried} needed more than one attempt`,
  );
  const latencyMet = p99 < 1000 && lat.length === committed(steady).length;
  console.log(`${latencyMet ? 'PASS' : 'MISS'}: commit to provider p99 < 1 s at ${RATE} replies/s (${ms(p99)})`);
  console.log(`${intakeRatio >= 0.9 ? 'PASS' : 'MISS'}: intake while replies flow ≥ 0.9× intake alone (${intakeRatio.toFixed(2)})`);

  // ─── figures ─────────────────────────────────────────────────────────────────────────────────────────────
  report.settings({ PG_POOL_MAX: env.PG_POOL_MAX!, WORKER_CONCURRENCY: env.WORKER_CONCURRENCY!, OUTBOUND_CONCURRENCY: String(config.OUTBOUND_CONCURRENCY), INGEST_BATCH_WINDOW_MS: env.INGEST_BATCH_WINDOW_MS!, INGEST_BATCH_MAX: env.INGEST_BATCH_MAX! });
  report.note(`Baseline of the capacity figures: the same agents replying on tickets made through the API (source api: no outbox row, no send), ${Math.max(5, SECONDS / 2)} s.`);
  report.note(
    `Replies go to SMS (Twilio) and Telegram tickets created by intake, through the provider doubles of the test suite behind a proxy that holds each answer ${PROVIDER_MIN}–${PROVIDER_MAX ?? PROVIDER_MIN} ms after the double recorded the send. "Reached the provider" is the double's arrival time; commit is the reply's 201 at the client.`,
  );
  report.note(`Load average (1 min) when the bench started: ${loadAtStart.toFixed(2)} on ${os.cpus().length} CPUs; API, worker, PostgreSQL, Redis and this load generator share them.`);
  report.note('PostgreSQL CPU is that of the backends serving this bench\'s database (pg_stat_activity, /proc), not every postgres process on the host; Redis CPU is the whole server\'s, shared with whatever else uses it.');
  report.note(`Intake: SMS from distinct senders + 10 % redeliveries as bench/ingest.ts sends them, ${CONNECTIONS} connections, ${INTAKE_SECONDS} s a case, ${ROUNDS} pairs (alone, with ${RATE} replies/s) taken alternately; the figure is the median pair (per pair: ${ratios.map((r) => r.toFixed(2)).join(', ')}).`);
  report.figure({ name: `capacity (${AGENTS} agents): replies committed`, value: cap.rate, unit: 'replies/s', baseline: noSend.rate });
  report.figure({ name: `capacity (${AGENTS} agents): replies reaching the provider in the same window`, value: cap.delivered, unit: 'replies/s' });
  report.figure({ name: 'capacity: seconds after the window until every send arrived', value: cap.drainSeconds, unit: 's' });
  report.figure({ name: 'capacity: reply POST p50', value: median(cap.post), unit: 'ms', baseline: median(noSend.post) });
  report.figure({ name: 'capacity: reply POST p99', value: quantile(cap.post, 0.99), unit: 'ms', baseline: quantile(noSend.post, 0.99) });
  report.figure({ name: 'capacity: commit to provider p99 (saturated)', value: quantile(cap.lat, 0.99), unit: 'ms' });
  report.figure({ name: 'capacity: CPU-ms per reply (API, worker, PostgreSQL, Redis)', value: cap.total, unit: 'ms', baseline: noSend.total });
  report.figure({ name: 'capacity: CPU-ms per reply by component', value: cap.byComponent });
  report.figure({ name: 'baseline (API tickets, no send): CPU-ms per reply by component', value: noSend.byComponent });
  report.figure({ name: 'capacity: database work per reply (incl. its send)', value: cap.dbLine });
  report.figure({ name: 'baseline (API tickets, no send): database work per reply', value: noSend.dbLine });
  report.figure({ name: 'capacity: rows read per reply, busiest tables', value: cap.tableLine });
  report.figure({ name: 'capacity: rows inserted per reply by table', value: cap.inserted });
  report.figure({ name: 'capacity: database backends by wait', value: cap.waits });
  report.figure({ name: 'baseline (API tickets, no send): database backends by wait', value: noSend.waits });
  report.figure({ name: `${RATE} replies/s offered: replies committed`, value: achieved, unit: 'replies/s' });
  report.figure({ name: `${RATE} replies/s: commit to provider p99`, value: p99, unit: 'ms', target: '< 1 s, every reply reaching the provider (issue 33)', met: latencyMet });
  report.figure({ name: `${RATE} replies/s: commit to provider p50`, value: p50, unit: 'ms' });
  report.figure({ name: `${RATE} replies/s: database backends by wait`, value: steadyActivity });
  for (const [k, label] of STAGES) {
    const xs = stages.map((s) => s[k]);
    report.figure({ name: `${RATE} replies/s: ${label}, p50 / p99 / mean of the slowest 1 %`, value: `${ms(median(xs))} / ${ms(quantile(xs, 0.99))} / ${ms(mean(slowest.map((s) => s[k])))}` });
  }
  report.figure({ name: `intake while ${RATE} replies/s flow (median pair)`, value: mid.with, unit: 'msgs/s', baseline: mid.alone, ratio: intakeRatio, target: '≥ 0.9× intake alone (issue 33)', met: intakeRatio >= 0.9 });
  report.figure({ name: 'intake p99 while replies flow (median pair)', value: mid.withP99, unit: 'ms', baseline: mid.aloneP99 });
  report.figure({ name: 'replies committed while intake ran (median pair)', value: mid.repliesPerSecond, unit: 'replies/s' });
  report.figure({ name: 'commit to provider p99 while intake ran (median pair)', value: mid.replyP99, unit: 'ms' });
  report.figure({ name: `intake while ${RATE} replies/s are stored on API tickets, not sent (once; diagnostic)`, value: stored.r.requests.average, unit: 'msgs/s', baseline: mid.alone });
  report.figure({ name: 'cores used, intake alone (median pair)', value: mid.aloneCores });
  report.figure({ name: 'cores used, intake with replies (median pair)', value: mid.withCores });
  report.figure({ name: 'cores used, intake with replies not sent', value: stored.used });
  report.figure({ name: 'database backends by wait, intake alone (median pair)', value: mid.aloneWaits });
  report.figure({ name: 'database backends by wait, intake with replies (median pair)', value: mid.withWaits });
  report.figure({ name: 'replies sent exactly once (all phases)', value: once, unit: 'replies', target: `every committed reply (${ok.length}), none twice, none uncommitted (issue 33)`, met: exactlyOnce });
  report.figure({ name: 'replies not ending sent in the outbox', value: notSent, unit: 'replies' });
  for (const [what, n] of problems) report.note(`Reply not committed: ${n} × ${what}`);
  for (const u of unsent) report.note(`Not sent: ${u.n} × ${u.state}: ${u.last_error}`);
  report.figure({ name: 'replies refused or failed at the API', value: refused, unit: 'requests' });

  await stop(api);
  await stop(worker);
  await stop(providers);
  await handle.close();
  await database.drop();
  if (!exactlyOnce) throw new Error('a reply was not sent exactly once');
}

if (ROLE === 'providers') void providersProcess();
else runBench(main);
