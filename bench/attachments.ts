/**
 * Attachments end to end under load (issue 34), with the real API and worker processes (port 18161) and the
 * provider doubles of the test suite (test/helpers/provider-doubles.ts) in a process of their own behind a
 * streaming proxy on port 18162 (the doubles listen on a port of their own choosing; the proxy gives the API and
 * worker one fixed TWILIO_API_URL). Files go to FILES_DIR, a fresh directory removed at the end. Messages with a
 * file come half as Postmark emails carrying one 1 MiB base64 `Attachments` part (POST /v1/ingest/email; the API
 * stages the part, the worker stores it) and half as Twilio SMS naming a 1 MiB `MediaUrl0` the doubles serve
 * (the worker downloads it with the account's basic auth). BODY_LIMIT_BYTES stays at its default (1 MiB), so each
 * email (about 1.4 MB of JSON) is read as it arrives and its part spooled to the staging area (src/lib/spooled-json.ts).
 * 1. RSS (first, on an API that has served only a warm-up): BENCH_UPLOADS (1000) uploads of 1 MiB
 *    (`POST /v1/uploads`, multipart `file`) at BENCH_UPLOAD_CONNECTIONS (8); the API's RSS idle, peak (sampled
 *    every 20 ms) and after. Target (issue 34): within 64 MiB of idle.
 * 2. File intake capacity: BENCH_FILE_CONNECTIONS (16) senders post messages with a 1 MiB file back to back for
 *    BENCH_FILE_SECONDS (10); msgs/s and MB/s from the first post until every accepted message's file is
 *    settled (stored, or failed/skipped, reported), with the CPU each component used.
 * 3. Intake without files (SMS from distinct senders, BENCH_CONNECTIONS (64), autocannon, BENCH_INTAKE_SECONDS
 *    (6) a case) alone and while files flow at BENCH_FILE_RATE msgs/s (default: half the capacity of 2),
 *    as BENCH_ROUNDS (2) pairs taken alternately; the figure is the median pair. Target (issue 34): ≥ 0.9×.
 * 4. Four quiet workspaces each send BENCH_QUIET_RATE (20) SMS a second, alone for BENCH_QUIET_SECONDS (10),
 *    then while workspace A floods 1 MiB files at BENCH_FILE_CONNECTIONS; their intake p99 under the flood
 *    (from 2 s in, as long as alone) against alone. Target (issue 34): ≤ 2×.
 * Each phase reports the cores each component used (/proc). Every accepted message's file must settle; the
 * bench exits 1 when one stays pending.
 *   npm run bench:attachments   BENCH_UPLOADS, BENCH_UPLOAD_CONNECTIONS, BENCH_FILE_CONNECTIONS, BENCH_FILE_SECONDS,
 *                               BENCH_FILE_RATE, BENCH_CONNECTIONS, BENCH_INTAKE_SECONDS, BENCH_ROUNDS,
 *                               BENCH_QUIET_RATE, BENCH_QUIET_SECONDS, BENCH_FILE_MIB (1), BENCH_CPU_PROF,
 *                               BENCH_FILES_WORKER (1: files in a worker process of their own; 0: one worker process)
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http, { createServer, type Server } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import autocannon from 'autocannon';
import IORedis from 'ioredis';
import { sql } from 'kysely';
import { loadConfig } from '../src/config';
import type { Db } from '../src/db';
import { emailPayload } from '../test/helpers/payloads';
import { startProviderDoubles } from '../test/helpers/provider-doubles';
import { benchEnv, cpuSample, freshDatabase, smsWorkspace, start, stop, type Env } from './processes';
import { createReport, quantile, runBench } from './report';

const MiB = 1024 * 1024;
const FILE_BYTES = Math.round(Number(process.env.BENCH_FILE_MIB ?? 1) * MiB);
const UPLOADS = Number(process.env.BENCH_UPLOADS ?? 1000);
const UPLOAD_CONNECTIONS = Number(process.env.BENCH_UPLOAD_CONNECTIONS ?? 8);
const FILE_CONNECTIONS = Number(process.env.BENCH_FILE_CONNECTIONS ?? 16);
const FILE_SECONDS = Number(process.env.BENCH_FILE_SECONDS ?? 10);
const FILE_RATE_SET = process.env.BENCH_FILE_RATE ? Number(process.env.BENCH_FILE_RATE) : null;
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const INTAKE_SECONDS = Number(process.env.BENCH_INTAKE_SECONDS ?? 6);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const QUIET_RATE = Number(process.env.BENCH_QUIET_RATE ?? 20);
const QUIET_SECONDS = Number(process.env.BENCH_QUIET_SECONDS ?? 10);
const PORT = 18161;
const PROVIDERS_PORT = 18162;
const ROLE = process.env.BENCH_ATTACHMENTS_ROLE;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => quantile(xs, 0.5);

/**
 * The providers, a process of their own: the doubles behind a proxy on PROVIDERS_PORT that pipes every request
 * through, streaming. `GET /__bench/media?n=K` adds K Twilio media of FILE_BYTES (generated, streamed, never held)
 * and answers their MediaUrls on the proxy's origin.
 */
async function providersProcess() {
  const doubles = await startProviderDoubles();
  const sid = process.env.BENCH_TWILIO_SID!;
  doubles.addTwilioAccount(sid, process.env.BENCH_TWILIO_TOKEN!);
  const target = new URL(doubles.urls.twilio);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 512 });
  const server: Server = createServer((req, res) => {
    if (req.url?.startsWith('/__bench/media')) {
      const n = Number(new URL(req.url, 'http://x').searchParams.get('n') ?? 1);
      const urls = Array.from({ length: n }, () => doubles.addTwilioMedia(sid, { size: FILE_BYTES, mimeType: 'image/jpeg' }).replace(target.origin, `http://127.0.0.1:${PROVIDERS_PORT}`));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(urls));
      return;
    }
    const up = http.request({ host: target.hostname, port: target.port, method: req.method, path: req.url, headers: req.headers, agent }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(PROVIDERS_PORT, '127.0.0.1', () => r()));
  console.log('providers listening');
  process.on('SIGTERM', () => void Promise.all([new Promise((r) => server.close(r)), doubles.close()]).finally(() => process.exit(0)));
}

const report = createReport('attachments', {
  title: 'Attachments: inbound file intake, intake and fairness while files flow, API memory across uploads',
  settings: {
    'file size': `${(FILE_BYTES / MiB).toFixed(2)} MiB`,
    uploads: UPLOADS,
    'upload connections': UPLOAD_CONNECTIONS,
    'file senders (connections)': FILE_CONNECTIONS,
    'file capacity seconds': FILE_SECONDS,
    'intake connections': CONNECTIONS,
    'intake seconds per case': INTAKE_SECONDS,
    rounds: ROUNDS,
    'quiet rate per workspace': `${QUIET_RATE}/s`,
    'quiet seconds': QUIET_SECONDS,
  },
});

/** The process in `leader`'s group that runs the script (tsx's child), for its RSS. */
function scriptPid(leader: ChildProcess): number {
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(f[1]) === leader.pid) return Number(pid);
    } catch {
      /* gone */
    }
  }
  return leader.pid!;
}
const rssMiB = (pid: number) => {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
};

/** The disk under FILES_DIR and PostgreSQL: writes, their average latency, and the time it was busy (/proc/diskstats). */
function diskSample() {
  let writes = 0, sectors = 0, writeMs = 0, busyMs = 0;
  for (const line of readFileSync('/proc/diskstats', 'utf8').split('\n')) {
    const f = line.trim().split(/\s+/);
    // Whole disks only (vda, sda, nvme0n1), not their partitions.
    if (f.length < 14 || !/^(vd[a-z]|sd[a-z]|nvme\d+n\d+|xvd[a-z])$/.test(f[2]!)) continue;
    writes += Number(f[7]);
    sectors += Number(f[9]);
    writeMs += Number(f[10]);
    busyMs += Number(f[12]);
  }
  const pressure = (() => {
    try {
      const m = /some .*total=(\d+)\nfull .*total=(\d+)/.exec(readFileSync('/proc/pressure/io', 'utf8'));
      return m ? { some: Number(m[1]) / 1000, full: Number(m[2]) / 1000 } : null;
    } catch {
      return null;
    }
  })();
  return { at: performance.now(), writes, mb: (sectors * 512) / 1e6, writeMs, busyMs, pressure };
}
const diskLine = (a: ReturnType<typeof diskSample>, b: ReturnType<typeof diskSample>) => {
  const wall = b.at - a.at;
  const n = b.writes - a.writes;
  const io = a.pressure && b.pressure ? `, IO pressure some ${((100 * (b.pressure.some - a.pressure.some)) / wall).toFixed(0)} % full ${((100 * (b.pressure.full - a.pressure.full)) / wall).toFixed(0)} %` : '';
  return `disk writes ${((b.mb - a.mb) / (wall / 1000)).toFixed(1)} MB/s in ${(n / (wall / 1000)).toFixed(0)} writes/s, ${(n ? (b.writeMs - a.writeMs) / n : 0).toFixed(1)} ms avg, busy ${((100 * (b.busyMs - a.busyMs)) / wall).toFixed(0)} %${io}`;
};

/** What this database's backends wait on, sampled every 50 ms: the average backends in each wait ("running": none). */
function waitSampler(db: Db) {
  const counts = new Map<string, number>();
  let samples = 0;
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    sql<{ w: string; n: number }>`
      select coalesce(wait_event_type || ':' || wait_event, 'running') as w, count(*)::int as n from pg_stat_activity
      where datname = current_database() and state = 'active' and pid <> pg_backend_pid() group by 1`
      .execute(db)
      .then(({ rows }) => {
        samples += 1;
        for (const r of rows) counts.set(r.w, (counts.get(r.w) ?? 0) + r.n);
      })
      .catch(() => undefined)
      .finally(() => (busy = false));
  }, 50);
  return () => {
    clearInterval(timer);
    return [...counts].sort((a, b) => b[1] - a[1]).slice(0, 5).map(([w, n]) => `${w} ${(n / Math.max(1, samples)).toFixed(2)}`).join(', ') || 'none';
  };
}

/**
 * The ingest batches queued between two times (BullMQ keeps the last 500 completed): per class (live or bulk,
 * with or without a file-bearing message) the jobs, items per job, queue wait (queued → taken) and run time.
 */
async function ingestJobs(redis: IORedis, prefix: string, from: number, to: number): Promise<string> {
  const groups = new Map<string, { items: number; wait: number[]; run: number[] }>();
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:ingest*:*`, 'COUNT', 1000);
    cursor = next;
    for (const key of keys) {
      if (!/:\d+$/.test(key)) continue;
      const [ts, taken, done, data] = await redis.hmget(key, 'timestamp', 'processedOn', 'finishedOn', 'data');
      if (!ts || !taken || !done || !data || Number(ts) < from || Number(ts) > to) continue;
      const d = JSON.parse(data) as { bulk?: boolean; items?: { message?: { files?: unknown[] } }[] };
      const items = d.items ?? [];
      const k = `${d.bulk ? 'bulk' : 'live'}${items.some((i) => i.message?.files?.length) ? ' with files' : ''}`;
      const g = groups.get(k) ?? { items: 0, wait: [], run: [] };
      g.items += items.length;
      g.wait.push(Number(taken) - Number(ts));
      g.run.push(Number(done) - Number(taken));
      groups.set(k, g);
    }
  } while (cursor !== '0');
  return (
    [...groups]
      .map(([k, g]) => `${k}: ${g.wait.length} jobs × ${(g.items / g.wait.length).toFixed(1)} items, wait p50/p99 ${quantile(g.wait, 0.5)}/${quantile(g.wait, 0.99)} ms, run p50/p99 ${quantile(g.run, 0.5)}/${quantile(g.run, 0.99)} ms`)
      .join('; ') || 'none kept'
  );
}

async function main() {
  const loadAtStart = os.loadavg()[0]!;
  const database = await freshDatabase('helpdesk_bench_attachments');
  const filesDir = mkdtempSync(path.join(os.tmpdir(), 'hd-bench-files-'));
  const accountSid = `AC${randomBytes(16).toString('hex')}`;
  const authToken = randomBytes(16).toString('hex');
  const providersBase = `http://127.0.0.1:${PROVIDERS_PORT}`;
  const providers = await start('bench/attachments.ts', { BENCH_ATTACHMENTS_ROLE: 'providers', BENCH_REPORT: '', BENCH_TWILIO_SID: accountSid, BENCH_TWILIO_TOKEN: authToken }, /providers listening/);
  const env: Env = benchEnv(database.url, 'attachments', {
    INGEST_RATE_POINTS: '10000000',
    PG_POOL_MAX: process.env.PG_POOL_MAX ?? '16',
    WORKER_CONCURRENCY: process.env.WORKER_CONCURRENCY ?? '8',
    INGEST_BATCH_WINDOW_MS: process.env.INGEST_BATCH_WINDOW_MS ?? '2',
    INGEST_BATCH_MAX: process.env.INGEST_BATCH_MAX ?? '64',
    FILES_DIR: filesDir,
    // To tell the fair-share policy's part from the CPU's: INTAKE_WORKSPACE_SHARED_QUEUED=32 (the whole share)
    // switches off the squeeze of a burst while another workspace sends on a saturated host.
    ...(process.env.INTAKE_WORKSPACE_SHARED_QUEUED ? { INTAKE_WORKSPACE_SHARED_QUEUED: process.env.INTAKE_WORKSPACE_SHARED_QUEUED } : {}),
    TWILIO_API_URL: `${providersBase}/twilio`,
    TELEGRAM_API_URL: `${providersBase}/telegram`,
    WHATSAPP_API_URL: `${providersBase}/whatsapp`,
    POSTMARK_API_URL: `${providersBase}/postmark`,
  });
  const config = loadConfig(env);
  const loud = await smsWorkspace(config, 'A');
  const quiet: Awaited<ReturnType<typeof smsWorkspace>>[] = [];
  for (const name of ['B', 'C', 'D', 'E']) quiet.push(await smsWorkspace(config, name));
  const db: Db = loud.handle.db;
  const redis = new IORedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  const prefix = config.REDIS_PREFIX;
  const tenantA = loud.ws.tenant_id;

  // Inbound files in a worker process of their own (WORKER_QUEUES, docs/channels-and-files.md's advice for a busy host), unless
  // BENCH_FILES_WORKER=0: in one process, hashing and writing files shares an event loop with intake's jobs.
  const ownFilesWorker = process.env.BENCH_FILES_WORKER !== '0';
  const worker = await start('workers/index.ts', { ...env, LOG_LEVEL: 'info', ...(ownFilesWorker ? { WORKER_QUEUES_EXCEPT: 'files' } : {}) }, /workers started/);
  const filesWorker = ownFilesWorker ? await start('workers/index.ts', { ...env, LOG_LEVEL: 'info', WORKER_QUEUES: 'files' }, /workers started/) : null;
  const api = await start('src/server.ts', { ...env, PORT: String(PORT) }, null, PORT);
  const apiPid = scriptPid(api);
  const base = `http://127.0.0.1:${PORT}`;
  const call = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(`${base}${p}`, { method, headers: { authorization: `Bearer ${loud.ws.api_key.secret}`, 'content-type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}) });
    if (res.status >= 300) throw new Error(`${method} ${p}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<Record<string, unknown>>;
  };
  await call('PUT', '/v1/channels/sms', { config: { account_sid: accountSid, auth_token: authToken, phone_number: '+15550000000' } });
  await call('PUT', '/v1/channels/email', { config: {} });
  const components: Record<string, ChildProcess> = { api, worker, ...(filesWorker ? { 'files worker': filesWorker } : {}), providers };
  // This process (the load generator) shares the CPUs too.
  const cpuNow = (c: typeof components) => ({ ...cpuSample(c), bench: (process.cpuUsage().user + process.cpuUsage().system) / 1000 });
  const cores = (before: Record<string, number>, after: Record<string, number>, wallMs: number) =>
    Object.keys(after)
      .map((k) => `${k} ${((after[k]! - (before[k] ?? 0)) / wallMs).toFixed(2)}`)
      .join(', ');

  const agent = new http.Agent({ keepAlive: true, maxSockets: 1024 });
  /** One POST of the given pieces; its status and how long the answer took. */
  const post = (p: string, pieces: (Buffer | string)[], headers: Record<string, string>) =>
    new Promise<{ status: number; ms: number; body: string }>((resolve) => {
      const started = performance.now();
      const length = pieces.reduce((n, x) => n + (typeof x === 'string' ? Buffer.byteLength(x) : x.length), 0);
      const req = http.request({ host: '127.0.0.1', port: PORT, path: p, method: 'POST', agent, headers: { ...headers, 'content-length': String(length) } }, (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - started, body: Buffer.concat(parts).toString('utf8') }));
      });
      req.on('error', (err) => resolve({ status: 0, ms: performance.now() - started, body: err.message }));
      for (const x of pieces) req.write(x);
      req.end();
    });

  // ─── 1. RSS across uploads ────────────────────────────────────────────────────────────────────────────────
  const fileBody = randomBytes(FILE_BYTES);
  const boundary = `----bench${randomBytes(8).toString('hex')}`;
  const upload = (i: number) =>
    post(
      '/v1/uploads',
      [`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="upload-${i}.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`, randomBytes(16), fileBody.subarray(16), `\r\n--${boundary}--\r\n`],
      { authorization: `Bearer ${loud.ws.api_key.secret}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
    );
  const uploads = async (count: number, connections: number) => {
    let next = 0;
    const statuses = new Map<number, number>();
    const ms: number[] = [];
    let firstProblem = '';
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (next < count) {
          const i = (next += 1);
          const r = await upload(i);
          statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
          ms.push(r.ms);
          if (r.status !== 201 && !firstProblem) firstProblem = `${r.status} ${r.body.slice(0, 200)}`;
        }
      }),
    );
    return { statuses, ms, firstProblem };
  };
  await uploads(40, UPLOAD_CONNECTIONS);
  await sleep(1500);
  const idleRss = rssMiB(apiPid);
  let peakRss = idleRss;
  const rssTimer = setInterval(() => (peakRss = Math.max(peakRss, rssMiB(apiPid))), 20);
  const upCpu0 = cpuNow(components);
  const upStarted = performance.now();
  const up = await uploads(UPLOADS, UPLOAD_CONNECTIONS);
  const upWall = performance.now() - upStarted;
  const upCores = cores(upCpu0, cpuNow(components), upWall);
  clearInterval(rssTimer);
  peakRss = Math.max(peakRss, rssMiB(apiPid));
  const endRss = rssMiB(apiPid);
  await sleep(2000);
  const afterRss = rssMiB(apiPid);
  const upOk = up.statuses.get(201) ?? 0;
  console.log(
    `uploads: ${upOk}/${UPLOADS} answered 201 in ${(upWall / 1000).toFixed(1)} s (${((upOk * FILE_BYTES) / MiB / (upWall / 1000)).toFixed(0)} MiB/s, p50 ${median(up.ms).toFixed(0)} ms, p99 ${quantile(up.ms, 0.99).toFixed(0)} ms)` +
      `   API RSS idle ${idleRss.toFixed(0)} MiB, peak ${peakRss.toFixed(0)}, at the end ${endRss.toFixed(0)}, 2 s later ${afterRss.toFixed(0)}   cores: ${upCores}`,
  );
  if (up.firstProblem) console.log(`  first refused upload: ${up.firstProblem}`);

  // ─── messages with files ──────────────────────────────────────────────────────────────────────────────────
  const TAIL = Buffer.from(fileBody.subarray(12).toString('base64'));
  let seq = 0;
  const emailWithFile = () => {
    seq += 1;
    const payload = emailPayload({ from: `sender${seq}-${randomBytes(3).toString('hex')}@customer.test`, text: `File ${seq}`, attachments: [{ Name: `file-${seq}.bin`, Content: '@@B64@@', ContentType: 'application/octet-stream', ContentLength: FILE_BYTES }] as never });
    const [pre, post_] = JSON.stringify({ tenant_id: tenantA, payload }).split('@@B64@@') as [string, string];
    // 12 bytes of its own (16 base64 characters, no padding) and the shared rest: every file is distinct.
    return post('/v1/ingest/email', [pre, randomBytes(12).toString('base64'), TAIL, post_], { 'content-type': 'application/json' });
  };
  let mediaUrls: string[] = [];
  const mediaUrl = async () => {
    if (mediaUrls.length === 0) mediaUrls = (await (await fetch(`${providersBase}/__bench/media?n=500`)).json()) as string[];
    return mediaUrls.pop()!;
  };
  const smsWithFile = async () => {
    seq += 1;
    const url = await mediaUrl();
    const body = JSON.stringify({
      tenant_id: tenantA,
      payload: { MessageSid: `MM${randomBytes(16).toString('hex')}`, AccountSid: accountSid, From: `+1777${String(seq).padStart(8, '0')}`, To: '+15550000000', Body: `Photo ${seq}`, NumMedia: '1', MediaUrl0: url, MediaContentType0: 'image/jpeg' },
    });
    return post('/v1/ingest/sms', [body], { 'content-type': 'application/json' });
  };
  let accepted = 0;
  let refused = 0;
  let refusal = '';
  const withFile = async (n: number) => {
    const r = await (n % 2 === 0 ? emailWithFile() : smsWithFile());
    if (r.status === 200 || r.status === 201 || r.status === 202) accepted += 1;
    else {
      refused += 1;
      if (!refusal) refusal = `${r.status} ${r.body.slice(0, 200)}`;
    }
    return r;
  };
  /** Closed loop: `connections` senders, each posting a message with a file as soon as the last was answered. */
  const flood = (connections: number, seconds: number) => {
    const until = performance.now() + seconds * 1000;
    let n = 0;
    return Promise.all(
      Array.from({ length: connections }, async () => {
        while (performance.now() < until) await withFile((n += 1));
      }),
    );
  };
  /** Open loop: `rate` messages with a file a second (at most 256 in flight). */
  const fileFlow = (rate: number, seconds: number) => {
    const inFlight = new Set<Promise<unknown>>();
    let stopped = false;
    const done = (async () => {
      const startedAt = performance.now();
      for (let tick = 0; !stopped && performance.now() - startedAt < seconds * 1000; tick++) {
        if (inFlight.size < 256) {
          const p = withFile(tick).finally(() => inFlight.delete(p));
          inFlight.add(p);
        }
        await sleep(Math.max(0, startedAt + ((tick + 1) * 1000) / rate - performance.now()));
      }
      await Promise.all(inFlight);
    })();
    return { done, stop: () => (stopped = true) };
  };
  const fileStates = async () => {
    const { rows } = await sql<{ state: string; n: number }>`select state, count(*)::int as n from attachments where tenant_id = ${tenantA} and event_id is not null group by state`.execute(db);
    return Object.fromEntries(rows.map((r) => [r.state, r.n])) as Record<string, number>;
  };
  /** Waits until `expected` inbound files of A are settled (not pending); when that happened, and the states. */
  const settle = async (expected: number, timeoutMs = 120_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const s = await fileStates();
      const settled = Object.entries(s).reduce((n, [k, v]) => n + (k === 'pending' ? 0 : v), 0);
      if (settled >= expected || Date.now() > deadline) return { at: performance.now(), states: s, settled };
      await sleep(50);
    }
  };
  const stateLine = (s: Record<string, number>) => Object.entries(s).map(([k, v]) => `${k} ${v}`).join(', ');

  // ─── 2. file intake capacity ──────────────────────────────────────────────────────────────────────────────
  await flood(4, 2); // warm-up
  await settle(accepted);
  const base0 = accepted;
  const capCpu0 = cpuNow(components);
  const capDisk0 = diskSample();
  const capWaits = waitSampler(db);
  const capStart = performance.now();
  await flood(FILE_CONNECTIONS, FILE_SECONDS);
  const capPosted = performance.now();
  const capAccepted = accepted - base0;
  const capSettled = await settle(accepted);
  const capCpu1 = cpuNow(components);
  const capDiag = `db waits: ${capWaits()}; ${diskLine(capDisk0, diskSample())}`;
  const capWall = capSettled.at - capStart;
  const capRate = capAccepted / (capWall / 1000);
  const capMBs = (capAccepted * FILE_BYTES) / 1e6 / (capWall / 1000);
  const acceptRate = capAccepted / ((capPosted - capStart) / 1000);
  const capCores = cores(capCpu0, capCpu1, capWall);
  const capCpuPer = Object.fromEntries(Object.keys(capCpu1).map((k) => [k, ((capCpu1 as Record<string, number>)[k]! - (capCpu0 as Record<string, number>)[k]!) / Math.max(1, capAccepted)]));
  const { rows: [lag] } = await sql<{ p50: number; p99: number }>`
    select percentile_cont(0.5) within group (order by ms) as p50, percentile_cont(0.99) within group (order by ms) as p99
    from (select extract(epoch from (a.stored_at - e.created_at)) * 1000 as ms from attachments a join ticket_events e on e.id = a.event_id
          where a.tenant_id = ${tenantA} and a.state = 'stored' and a.stored_at is not null) x`.execute(db);
  console.log(
    `file intake (${FILE_CONNECTIONS} senders, ${FILE_SECONDS} s): ${capAccepted} accepted (${acceptRate.toFixed(1)} msgs/s at the API); all settled after ${(capWall / 1000).toFixed(1)} s: ${capRate.toFixed(1)} msgs/s, ${capMBs.toFixed(1)} MB/s   [${stateLine(capSettled.states)}]` +
      `\n  event → file stored p50 ${Math.round(lag?.p50 ?? NaN)} ms, p99 ${Math.round(lag?.p99 ?? NaN)} ms   cores: ${capCores}   CPU-ms per message: ${Object.entries(capCpuPer).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')}\n  ${capDiag}`,
  );
  const FILE_RATE = FILE_RATE_SET ?? Math.max(1, Math.round(capRate / 2));

  // ─── 3. intake without files, alone and while files flow ──────────────────────────────────────────────────
  const B = quiet[0]!.ws.tenant_id;
  let smsSeq = 0;
  const smsBody = (tenantId: string, tag: string) => {
    smsSeq += 1;
    return JSON.stringify({ tenant_id: tenantId, payload: { MessageSid: `SM${tag}${randomBytes(14).toString('hex')}`, AccountSid: 'AC0', From: `+1555${String(smsSeq).padStart(8, '0')}`, To: '+15550000000', Body: `Hello ${smsSeq}`, NumMedia: '0' } });
  };
  const intake = async () => {
    const c0 = cpuNow(components);
    const d0 = diskSample();
    const waits = waitSampler(db);
    const t0 = performance.now();
    const w0 = Date.now();
    const r = await autocannon({
      url: `${base}/v1/ingest/sms`,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      connections: CONNECTIONS,
      duration: INTAKE_SECONDS,
      requests: [{ setupRequest: (req) => ({ ...req, body: smsBody(B, 'i') }) }],
    });
    return { rate: r.requests.average, p99: r.latency.p99, bad: r.non2xx + r.errors, cores: cores(c0, cpuNow(components), performance.now() - t0), waits: waits(), disk: diskLine(d0, diskSample()), jobs: await ingestJobs(redis, prefix, w0, Date.now()) };
  };
  await autocannon({ url: `${base}/v1/ingest/sms`, method: 'POST', headers: { 'content-type': 'application/json' }, connections: 16, duration: 2, requests: [{ setupRequest: (req) => ({ ...req, body: smsBody(B, 'w') }) }] });
  const pairs: { alone: Awaited<ReturnType<typeof intake>>; with: Awaited<ReturnType<typeof intake>>; fileRate: number }[] = [];
  const withFiles = async () => {
    const a0 = accepted;
    const flow = fileFlow(FILE_RATE, INTAKE_SECONDS + 2);
    await sleep(1000);
    const r = await intake();
    flow.stop();
    await flow.done;
    const s = await settle(accepted);
    return { r, fileRate: (accepted - a0) / (INTAKE_SECONDS + 1), settled: s };
  };
  for (let round = 0; round < ROUNDS; round++) {
    let alone: Awaited<ReturnType<typeof intake>>;
    let w: Awaited<ReturnType<typeof withFiles>>;
    if (round % 2 === 0) {
      alone = await intake();
      w = await withFiles();
    } else {
      w = await withFiles();
      alone = await intake();
    }
    pairs.push({ alone, with: w.r, fileRate: w.fileRate });
    console.log(
      `intake round ${round + 1}: alone ${alone.rate.toFixed(0)} msgs/s (p99 ${alone.p99} ms, non-2xx ${alone.bad}; cores ${alone.cores})\n                   db waits: ${alone.waits}; ${alone.disk}\n                   ingest jobs: ${alone.jobs}` +
        `\n                 with ${FILE_RATE} files/s offered (${w.fileRate.toFixed(1)} accepted): ${w.r.rate.toFixed(0)} msgs/s (p99 ${w.r.p99} ms, non-2xx ${w.r.bad}; cores ${w.r.cores}) → ${(w.r.rate / alone.rate).toFixed(2)}×\n                   db waits: ${w.r.waits}; ${w.r.disk}\n                   ingest jobs: ${w.r.jobs}`,
    );
  }
  const ratios = pairs.map((p) => p.with.rate / p.alone.rate);
  const mid = [...pairs].sort((a, b) => a.with.rate / a.alone.rate - b.with.rate / b.alone.rate)[Math.floor((pairs.length - 1) / 2)]!;
  const intakeRatio = mid.with.rate / mid.alone.rate;

  // ─── 4. quiet workspaces while one floods files ───────────────────────────────────────────────────────────
  const sendQuiet = (tenantId: string) => post('/v1/ingest/sms', [smsBody(tenantId, 'q')], { 'content-type': 'application/json' });
  /** The API's own responsiveness meanwhile: GET /healthz every 50 ms (no database, no Redis), its p99. */
  const healthProbe = () => {
    const ms: number[] = [];
    let stop = false;
    const done = (async () => {
      while (!stop) {
        const t = performance.now();
        await fetch(`${base}/healthz`).then((r) => r.arrayBuffer()).catch(() => undefined);
        ms.push(performance.now() - t);
        await sleep(50);
      }
    })();
    return async () => {
      stop = true;
      await done;
      return `API /healthz p50 ${median(ms).toFixed(1)} ms, p99 ${quantile(ms, 0.99).toFixed(1)} ms`;
    };
  };
  const quietLoad = async (seconds: number) => {
    const answers: Promise<{ status: number; ms: number }>[] = [];
    const probe = healthProbe();
    const startedAt = performance.now();
    for (let tick = 0; performance.now() - startedAt < seconds * 1000; tick++) {
      for (const q of quiet) answers.push(sendQuiet(q.ws.tenant_id));
      await sleep(Math.max(0, startedAt + ((tick + 1) * 1000) / QUIET_RATE - performance.now()));
    }
    const all = await Promise.all(answers);
    console.log(`  (${await probe()})`);
    return all;
  };
  const q0 = cpuNow(components);
  let d0 = diskSample();
  let waits = waitSampler(db);
  let t0 = performance.now();
  const aloneAnswers = await quietLoad(QUIET_SECONDS);
  const quietAloneCores = cores(q0, cpuNow(components), performance.now() - t0);
  const quietAloneDiag = `db waits: ${waits()}; ${diskLine(d0, diskSample())}; ingest jobs: ${await ingestJobs(redis, prefix, Date.now() - QUIET_SECONDS * 1000, Date.now())}`;
  const f0 = accepted;
  const floodDone = flood(FILE_CONNECTIONS, QUIET_SECONDS + 4);
  await sleep(2000);
  const q1 = cpuNow(components);
  d0 = diskSample();
  waits = waitSampler(db);
  t0 = performance.now();
  const floodedAnswers = await quietLoad(QUIET_SECONDS);
  const quietFloodCores = cores(q1, cpuNow(components), performance.now() - t0);
  const quietFloodDiag = `db waits: ${waits()}; ${diskLine(d0, diskSample())}; ingest jobs: ${await ingestJobs(redis, prefix, Date.now() - QUIET_SECONDS * 1000, Date.now())}`;
  await floodDone;
  const floodAccepted = accepted - f0;
  const floodSettled = await settle(accepted);
  const p99 = (xs: { ms: number }[]) => quantile(xs.map((x) => x.ms), 0.99);
  const p50 = (xs: { ms: number }[]) => quantile(xs.map((x) => x.ms), 0.5);
  const bad = (xs: { status: number }[]) => xs.filter((x) => x.status !== 200 && x.status !== 201).length;
  const quietRatio = p99(floodedAnswers) / p99(aloneAnswers);
  console.log(
    `quiet workspaces (4 × ${QUIET_RATE}/s): alone p50 ${p50(aloneAnswers).toFixed(0)} ms, p99 ${p99(aloneAnswers).toFixed(0)} ms (not 200: ${bad(aloneAnswers)}; cores ${quietAloneCores})\n    ${quietAloneDiag}` +
      `\n  while A floods files (${FILE_CONNECTIONS} senders, ${floodAccepted} accepted, ${(floodAccepted / (QUIET_SECONDS + 4)).toFixed(1)}/s): p50 ${p50(floodedAnswers).toFixed(0)} ms, p99 ${p99(floodedAnswers).toFixed(0)} ms (not 200: ${bad(floodedAnswers)}; cores ${quietFloodCores}) → ${quietRatio.toFixed(2)}×\n    ${quietFloodDiag}`,
  );

  // ─── outcome ──────────────────────────────────────────────────────────────────────────────────────────────
  const finalStates = await fileStates();
  const pending = finalStates.pending ?? 0;
  const notStored = Object.entries(finalStates).filter(([k]) => k !== 'stored').reduce((n, [, v]) => n + v, 0);
  const rssGrowth = peakRss - idleRss;
  const rssMet = rssGrowth <= 64 && upOk === UPLOADS;
  console.log(`${rssMet ? 'PASS' : 'MISS'}: API RSS across ${UPLOADS} uploads within 64 MiB of idle (peak +${rssGrowth.toFixed(0)} MiB)`);
  console.log(`${intakeRatio >= 0.9 ? 'PASS' : 'MISS'}: intake while files flow ≥ 0.9× intake alone (${intakeRatio.toFixed(2)})`);
  console.log(`${quietRatio <= 2 ? 'PASS' : 'MISS'}: quiet workspaces' p99 while one floods files ≤ 2× alone (${quietRatio.toFixed(2)})`);
  console.log(`inbound files of the run: ${stateLine(finalStates)}${refused ? `; ${refused} messages refused (first: ${refusal})` : ''}`);

  report.settings({ PG_POOL_MAX: env.PG_POOL_MAX!, WORKER_CONCURRENCY: env.WORKER_CONCURRENCY!, FILES_FETCH_CONCURRENCY: String(config.FILES_FETCH_CONCURRENCY), 'files offered while intake is measured': `${FILE_RATE}/s` });
  report.note(ownFilesWorker ? 'Two worker processes: one for every queue but files (WORKER_QUEUES_EXCEPT=files), one for inbound files alone (WORKER_QUEUES=files).' : 'One worker process for every queue (BENCH_FILES_WORKER=0).');
  report.note(`Messages with a file: half Postmark emails with one ${(FILE_BYTES / MiB).toFixed(2)} MiB base64 part (staged by the API, stored by the worker), half Twilio SMS whose MediaUrl0 the doubles serve (${(FILE_BYTES / MiB).toFixed(2)} MiB, streamed, fetched by the worker with basic auth). Local-disk store (FILES_DIR), no scanning.`);
  report.note(`Load average (1 min) when the bench started: ${loadAtStart.toFixed(2)} on ${os.cpus().length} CPUs; API, worker, doubles, PostgreSQL, Redis and this load generator share them.`);
  report.note(`Intake ratio: ${ROUNDS} pairs (alone, with files) taken alternately, the median pair (per pair: ${ratios.map((r) => r.toFixed(2)).join(', ')}).`);
  report.figure({ name: `uploads of ${(FILE_BYTES / MiB).toFixed(2)} MiB: API RSS idle`, value: idleRss, unit: 'MiB' });
  report.figure({ name: `uploads: API RSS peak across ${UPLOADS}`, value: peakRss, unit: 'MiB', baseline: idleRss, ratio: rssGrowth, ratioKind: 'value/baseline', target: 'within 64 MiB of idle (issue 34)', met: rssMet });
  report.figure({ name: 'uploads: API RSS at the end / 2 s later', value: `${endRss.toFixed(0)} / ${afterRss.toFixed(0)} MiB` });
  report.figure({ name: 'uploads: answered 201', value: upOk, unit: 'uploads' });
  report.figure({ name: 'uploads: throughput', value: (upOk * FILE_BYTES) / MiB / (upWall / 1000), unit: 'MiB/s' });
  report.figure({ name: 'uploads: p50 / p99', value: `${median(up.ms).toFixed(0)} / ${quantile(up.ms, 0.99).toFixed(0)} ms` });
  report.figure({ name: 'uploads: cores used', value: upCores });
  report.figure({ name: 'file intake: messages with a file until stored', value: capRate, unit: 'msgs/s' });
  report.figure({ name: 'file intake: bytes until stored', value: capMBs, unit: 'MB/s' });
  report.figure({ name: 'file intake: accepted at the API', value: acceptRate, unit: 'msgs/s' });
  report.figure({ name: 'file intake: event → file stored p50 / p99', value: `${Math.round(lag?.p50 ?? NaN)} / ${Math.round(lag?.p99 ?? NaN)} ms` });
  report.figure({ name: 'file intake: cores used', value: capCores });
  report.figure({ name: 'file intake: CPU-ms per message by component', value: Object.entries(capCpuPer).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ') });
  report.figure({ name: `intake while ${FILE_RATE} files/s flow (median pair)`, value: mid.with.rate, unit: 'msgs/s', baseline: mid.alone.rate, ratio: intakeRatio, target: '≥ 0.9× intake alone (issue 34)', met: intakeRatio >= 0.9 });
  report.figure({ name: 'intake p99 while files flow (median pair)', value: mid.with.p99, unit: 'ms', baseline: mid.alone.p99 });
  report.figure({ name: 'cores used, intake alone (median pair)', value: mid.alone.cores });
  report.figure({ name: 'cores used, intake with files (median pair)', value: mid.with.cores });
  report.figure({ name: 'database waits and disk, intake alone (median pair)', value: `${mid.alone.waits}; ${mid.alone.disk}; ingest jobs: ${mid.alone.jobs}` });
  report.figure({ name: 'database waits and disk, intake with files (median pair)', value: `${mid.with.waits}; ${mid.with.disk}; ingest jobs: ${mid.with.jobs}` });
  report.figure({ name: 'quiet workspaces p99 while one floods files', value: p99(floodedAnswers), unit: 'ms', baseline: p99(aloneAnswers), target: '≤ 2× alone (issue 34)', met: quietRatio <= 2 });
  report.figure({ name: 'quiet workspaces p50 while one floods files', value: p50(floodedAnswers), unit: 'ms', baseline: p50(aloneAnswers) });
  report.figure({ name: 'quiet workspaces answers not 200 (alone + flood)', value: bad(aloneAnswers) + bad(floodedAnswers), unit: 'answers' });
  report.figure({ name: 'flood: messages with a file accepted', value: floodAccepted / (QUIET_SECONDS + 4), unit: 'msgs/s' });
  report.figure({ name: 'cores used, quiet alone / under the flood', value: `${quietAloneCores} / ${quietFloodCores}` });
  report.figure({ name: 'database waits and disk, quiet alone', value: quietAloneDiag });
  report.figure({ name: 'database waits and disk, quiet under the flood', value: quietFloodDiag });
  report.figure({ name: 'database waits and disk, file intake capacity', value: capDiag });
  report.figure({ name: 'inbound files not stored (failed, skipped, pending)', value: notStored, unit: 'files' });
  report.figure({ name: 'messages with a file refused', value: refused, unit: 'messages' });
  if (refusal) report.note(`First refused message with a file: ${refusal}`);
  void floodSettled;

  await stop(api);
  await stop(worker);
  if (filesWorker) await stop(filesWorker);
  await stop(providers);
  await loud.handle.close();
  for (const q of quiet) await q.handle.close();
  // The bench's queues and results live under its prefix: remove them.
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length) await redis.del(...keys);
  } while (cursor !== '0');
  await redis.quit();
  await database.drop();
  rmSync(filesDir, { recursive: true, force: true });
  if (pending > 0) throw new Error(`${pending} inbound files still pending`);
}

if (ROLE === 'providers') void providersProcess();
else runBench(main);
