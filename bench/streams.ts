/**
 * Live event streams against readers that never read (issue 32, finding 1), with the real API process. The
 * attack: a viewer writes ~220 replies of 65,000 × '€' (each message.created event ~390 KB as JSON), then
 * opens event streams and never reads them; each stream buffered ~52 MiB and the process died at 60 streams.
 *
 Two API processes: the measured one serves the streams and /healthz; the writes go through the other (as
 * they would through any process behind a load balancer), so what is measured is what the streams cost.
 * 1. The attacker's history: BENCH_LARGE (220) notes of 65,000 × '€' (~390 KB events) and BENCH_MEDIUM/2
 *    notes of 30 KB. Then, idle: the measured API's RSS (every process of its group), /healthz p50/p99
 *    (BENCH_HEALTH_RATE requests a second for BENCH_HEALTH_SECONDS) and its CPU-ms per second.
 * 2. BENCH_READERS (200) streams opened by one key from the start of the log and paused (the client never
 *    reads). The large events reach them as references, the medium ones whole (~3 MB per stream, about what
 *    the kernel buffers for a paused reader, so the server's own backpressure is what holds).
 * 3. While they stay paused, another BENCH_MEDIUM/2 notes of 30 KB are written, with /healthz measured
 *    throughout and the measured API's RSS sampled every 100 ms, until EVENT_STREAM_STALL_SECONDS cut the
 *    readers off. Then its CPU-ms per second with the readers open and nothing written (the 2,000-stream
 *    finding: 62 % of a core idle).
 * Targets (issue 32): peak RSS within 64 MiB of idle; /healthz p99 holds (≤ 2× idle, and never above 50 ms).
 *   npm run bench:streams     BENCH_READERS, BENCH_LARGE, BENCH_MEDIUM, BENCH_HEALTH_RATE, BENCH_HEALTH_SECONDS
 */
import { spawn, type ChildProcess } from 'node:child_process';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { readdirSync, readFileSync } from 'node:fs';
import { Agent, request, type ClientRequest } from 'node:http';
import { loadConfig } from '../src/config';
import { openBenchApp } from './lib';
import { benchEnv, cpuSample, freshDatabase, smsWorkspace, start, stop, type Env } from './processes';
import { createReport, quantile, runBench } from './report';

const READERS = Number(process.env.BENCH_READERS ?? 200);
const LARGE = Number(process.env.BENCH_LARGE ?? 220);
const MEDIUM = Number(process.env.BENCH_MEDIUM ?? 200);
const HEALTH_RATE = Number(process.env.BENCH_HEALTH_RATE ?? 50);
const HEALTH_SECONDS = Number(process.env.BENCH_HEALTH_SECONDS ?? 10);
const PORT = 18131;
const WRITER_PORT = 18132;
const MiB = 1024 * 1024;
const report = createReport('streams', {
  title: 'Event streams with readers that never read: memory and /healthz',
  settings: { 'paused readers': READERS, 'large replies (65,000 × €)': LARGE, 'medium replies (30 KB)': MEDIUM, '/healthz rate': `${HEALTH_RATE}/s` },
});

/** Resident memory of every process in the child's process group (tsx runs the server in a child of its own). */
function groupRss(child: ChildProcess): number {
  let total = 0;
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const pgid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
      if (pgid !== child.pid) continue;
      const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      total += Number(rss?.[1] ?? 0) * 1024;
    } catch {
      /* gone meanwhile */
    }
  }
  return total;
}

const agent = new Agent({ keepAlive: true, maxSockets: 8 });
/** /healthz at a steady rate for `seconds`: every answer's latency (ms). */
async function health(seconds: number): Promise<number[]> {
  const out: Promise<number>[] = [];
  const every = 1000 / HEALTH_RATE;
  const began = performance.now();
  for (let tick = 0; performance.now() - began < seconds * 1000; tick++) {
    out.push(
      new Promise((resolve) => {
        const t = performance.now();
        request({ host: '127.0.0.1', port: PORT, path: '/healthz', agent }, (res) => {
          res.resume();
          res.on('end', () => resolve(performance.now() - t));
        })
          .on('error', () => resolve(NaN))
          .end();
      }),
    );
    await new Promise((r) => setTimeout(r, Math.max(0, began + (tick + 1) * every - performance.now())));
  }
  return (await Promise.all(out)).filter((x) => !Number.isNaN(x));
}

/**
 * Heap and external memory the API holds for READERS paused readers, measured in this process after full
 * collections (what a heap snapshot would count as live): the app in-process, the readers in a child process.
 */
async function retainedPerReader(databaseUrl: string, key: string): Promise<{ heap: number; external: number }> {
  v8.setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const app = await openBenchApp({ database: new URL(databaseUrl).pathname.slice(1), keep: true, redisPrefix: `hd_bench_streams_retained`, env: { EVENT_STREAMS_PER_CALLER: '100000', EVENT_STREAMS_PER_WORKSPACE: '100000' } });
  const measure = async () => {
    await new Promise((r) => setTimeout(r, 500));
    gc();
    gc();
    const m = process.memoryUsage();
    return { heap: m.heapUsed, external: m.external };
  };
  const readers = (n: number) =>
    spawn(process.execPath, ['-e', `const http=require('http');for(let i=0;i<${n};i++){http.request({port:${app.port},path:'/v1/events/stream',headers:{authorization:'Bearer ${key}'}},(res)=>res.pause()).end();}setInterval(()=>{},1000);`], { stdio: 'ignore' });
  try {
    // Warm: a few readers first, as in the process-level run.
    const warm = readers(5);
    await new Promise((r) => setTimeout(r, 3000));
    warm.kill();
    await new Promise((r) => setTimeout(r, 1000));
    const before = await measure();
    const held = readers(READERS);
    const deadline = Date.now() + 30_000;
    while (app.services.events.openStreams() < READERS && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    // Long enough to read the whole log into their sockets, short of the stall deadline.
    await new Promise((r) => setTimeout(r, 8000));
    const after = await measure();
    held.kill();
    return { heap: after.heap - before.heap, external: after.external - before.external };
  } finally {
    await app.close();
  }
}

async function main() {
  const database = await freshDatabase('helpdesk_bench_streams');
  // One key holds every reader here: the caps are raised so the bench measures the streams, not the 429.
  const env: Env = benchEnv(database.url, 'streams', {
    OPS_USER: 'ops',
    OPS_PASSWORD: 'bench-ops-password', EVENT_STREAMS_PER_CALLER: String(READERS * 2 + 1), EVENT_STREAMS_PER_WORKSPACE: String(READERS * 2 + 1), PG_POOL_MAX: '16' });
  const config = loadConfig(env);
  const { handle, ws } = await smsWorkspace(config);
  const key = ws.api_key.secret;
  const api = await start('src/server.ts', { ...env, PORT: String(PORT) }, null, PORT);
  const writer = await start('src/server.ts', { ...env, PORT: String(WRITER_PORT) }, null, WRITER_PORT);
  const base = `http://127.0.0.1:${WRITER_PORT}`;
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}) });
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
    return res.json() as Promise<{ id: string }>;
  };
  const cpuOfApi = () => cpuSample({ api }).api!;
  /** The API's CPU-ms per second over `ms`. */
  const cpuRate = async (ms: number) => {
    const before = cpuOfApi();
    await new Promise((r) => setTimeout(r, ms));
    return ((cpuOfApi() - before) / ms) * 1000;
  };

  // 1. The history the readers will be sent, then idle.
  const t = await call('POST', '/v1/tickets', { subject: 'Large', description: '€'.repeat(65_000), customer_email: 'large@bench.test' });
  for (let i = 0; i < LARGE; i++) await call('POST', `/v1/tickets/${t.id}/notes`, { body: `${i} ${'€'.repeat(65_000)}` });
  const medium = await call('POST', '/v1/tickets', { subject: 'Medium', description: 'm', customer_email: 'medium@bench.test' });
  const writeMedium = async (from: number, to: number) => {
    for (let i = from; i < to; i++) await call('POST', `/v1/tickets/${medium.id}/notes`, { body: `${i} ${'x'.repeat(30_000)}` });
  };
  await writeMedium(0, Math.floor(MEDIUM / 2));
  // A process that has served a stream before: five readers read the whole log and leave (what a stream costs
  // the first time, compiling its code and filling pools, is not what 200 readers cost).
  await Promise.all(
    Array.from({ length: 5 }, () =>
      new Promise<void>((resolve) => {
        const req = request({ host: '127.0.0.1', port: PORT, path: '/v1/events/stream', headers: { authorization: `Bearer ${key}` } }, (res) => {
          let got = 0;
          res.on('data', (c: Buffer) => {
            got += c.length;
            if (got > (LARGE * 250 + MEDIUM * 15_000) * 0.9) req.destroy();
          });
          res.on('close', () => resolve());
        });
        req.on('error', () => resolve());
        setTimeout(() => req.destroy(), 20_000).unref();
        req.end();
      }),
    ),
  );
  await health(2);
  await new Promise((r) => setTimeout(r, 1000));
  // Idle is the peak under the same /healthz probing as later, with no stream open: like for like.
  let idleRss = groupRss(api);
  const idleSampler = setInterval(() => (idleRss = Math.max(idleRss, groupRss(api))), 100);

  const idleHealth = await health(HEALTH_SECONDS);
  const idleCpu = await cpuRate(5000);
  clearInterval(idleSampler);
  console.log(`node ${process.version}; idle: RSS ${(idleRss / MiB).toFixed(1)} MiB, /healthz p50 ${quantile(idleHealth, 0.5).toFixed(1)} ms p99 ${quantile(idleHealth, 0.99).toFixed(1)} ms, CPU ${idleCpu.toFixed(1)} ms/s`);

  // 2. Readers that never read, from the start of the log; RSS sampled and /healthz measured from here on.
  let peak = groupRss(api);
  const sampler = setInterval(() => (peak = Math.max(peak, groupRss(api))), 100);
  const readers: ClientRequest[] = [];
  const statuses: number[] = [];
  await Promise.all(
    Array.from({ length: READERS }, () =>
      new Promise<void>((resolve) => {
        const req = request({ host: '127.0.0.1', port: PORT, path: '/v1/events/stream', headers: { authorization: `Bearer ${key}` } }, (res) => {
          statuses.push(res.statusCode ?? 0);
          res.pause();
          resolve();
        });
        req.on('error', () => resolve());
        req.end();
        readers.push(req);
      }),
    ),
  );
  const open = statuses.filter((s) => s === 200).length;
  // /healthz from the moment the readers are open (their opening is 200 requests at once, like any other burst).
  let stopHealth = false;
  const during: { at: number; ms: number }[] = [];
  const healthLoop = (async () => {
    while (!stopHealth) {
      const at = performance.now();
      during.push(...(await health(1)).map((ms) => ({ at, ms })));
    }
  })();

  // 3. More events while they stay paused, until the stall deadline has cut them off.
  const writing = performance.now();
  await writeMedium(Math.floor(MEDIUM / 2), MEDIUM);
  const wroteSeconds = (performance.now() - writing) / 1000;
  // Filling: the readers take what their sockets hold; then they sit paused and backed up until cut off.
  await new Promise((r) => setTimeout(r, 3000));
  const filledAt = performance.now();
  const stall = Number(env.EVENT_STREAM_STALL_SECONDS ?? 30);
  const cutBy = performance.now() + (stall + 15) * 1000;
  // The measured process's own count of its open streams (/metrics): a paused client cannot see its end.
  const openNow = async () => {
    const res = await fetch(`http://127.0.0.1:${PORT}/metrics`, { headers: { authorization: `Basic ${Buffer.from('ops:bench-ops-password').toString('base64')}` } });
    return Number(/^helpdesk_event_streams_open (\d+)/m.exec(await res.text())?.[1] ?? NaN);
  };
  while ((await openNow()) > 0 && performance.now() < cutBy) await new Promise((r) => setTimeout(r, 500));
  const cutOff = open - (await openNow());

  stopHealth = true;
  await healthLoop;
  clearInterval(sampler);
  const endRss = groupRss(api);
  const grew = peak - idleRss;
  const idleP99 = quantile(idleHealth, 0.99);
  const filling = during.filter((d) => d.at < filledAt).map((d) => d.ms);
  const paused = during.filter((d) => d.at >= filledAt).map((d) => d.ms);
  const duringP99 = quantile(paused, 0.99);
  const fillingP99 = quantile(filling, 0.99);
  console.log(`${open}/${READERS} paused streams; wrote ${MEDIUM - Math.floor(MEDIUM / 2)} more notes in ${wroteSeconds.toFixed(1)} s; ${cutOff} readers cut off as stalled; API RSS peak ${(peak / MiB).toFixed(1)} MiB (+${(grew / MiB).toFixed(1)} over idle), at the end ${(endRss / MiB).toFixed(1)} MiB`);
  console.log(`/healthz while the readers were filled (~${((200 * (LARGE * 250 + MEDIUM * 30_000)) / MiB).toFixed(0)} MiB pushed to their sockets): p50 ${quantile(filling, 0.5).toFixed(1)} ms, p99 ${fillingP99.toFixed(1)} ms, ${filling.length} answers`);
  console.log(`/healthz with the readers paused and backed up: p50 ${quantile(paused, 0.5).toFixed(1)} ms, p99 ${duringP99.toFixed(1)} ms (idle p99 ${idleP99.toFixed(1)} ms), ${paused.length} answers`);
  // Readers that are open and idle (nothing written): what idle streams cost. Fresh ones, the others were cut off.
  for (const r of readers) r.destroy();
  const idleReaders: ClientRequest[] = [];
  await Promise.all(
    Array.from({ length: READERS }, () =>
      new Promise<void>((resolve) => {
        const since = encodeURIComponent(Buffer.from(JSON.stringify({ s: 'position', k: '9223372036854775806', i: '00000000-0000-0000-0000-000000000000' })).toString('base64url'));
        const req = request({ host: '127.0.0.1', port: PORT, path: `/v1/events/stream?after=${since}`, headers: { authorization: `Bearer ${key}` } }, (res) => {
          res.pause();
          resolve();
        });
        req.on('error', () => resolve());
        req.end();
        idleReaders.push(req);
      }),
    ),
  );
  await new Promise((r) => setTimeout(r, 1000));
  const streamsCpu = await cpuRate(10_000);
  console.log(`API CPU with ${READERS} idle streams: ${streamsCpu.toFixed(1)} ms/s (${((streamsCpu - idleCpu) / READERS).toFixed(3)} ms/s per stream; idle ${idleCpu.toFixed(1)})`);
  for (const r of idleReaders) r.destroy();
  await stop(api);
  await stop(writer);

  // 4. What the streams hold, not what V8 and malloc keep after a burst: the same readers against the app in this
  // process, its heap and external memory after full collections, before and after.
  const retained = await retainedPerReader(database.url, key);
  console.log(`retained by ${READERS} paused readers after a full GC: heap ${(retained.heap / MiB).toFixed(1)} MiB, external ${(retained.external / MiB).toFixed(1)} MiB (${((retained.heap + retained.external) / READERS / 1024).toFixed(1)} KiB a reader)`);

  const rssMet = grew <= 64 * MiB;
  const retainedMet = retained.heap + retained.external <= 64 * MiB;
  const healthMet = duringP99 <= Math.max(2 * idleP99, 10);
  console.log(`${rssMet ? 'PASS' : 'MISS'}: RSS within 64 MiB of idle with ${open} paused readers (+${(grew / MiB).toFixed(1)} MiB)`);
  console.log(`${healthMet ? 'PASS' : 'MISS'}: /healthz p99 holds (${duringP99.toFixed(1)} ms against ${idleP99.toFixed(1)} ms idle)`);
  report.figure({ name: 'paused readers open', value: open, unit: 'streams', target: `${READERS}`, met: open === READERS });
  report.figure({ name: 'API RSS, idle', value: Math.round(idleRss / MiB), unit: 'MiB' });
  report.figure({ name: 'paused readers cut off as stalled (EVENT_STREAM_STALL_SECONDS)', value: cutOff, unit: 'streams', target: `${open}`, met: cutOff === open });
  report.figure({ name: 'API RSS peak with the paused readers', value: Math.round(peak / MiB), unit: 'MiB', baseline: Math.round(idleRss / MiB), target: '≤ idle + 64 MiB (issue 32)', met: rssMet });
  report.figure({ name: 'API RSS growth over idle', value: Math.round((grew / MiB) * 10) / 10, unit: 'MiB', target: '≤ 64 MiB (issue 32)', met: rssMet });
  report.figure({ name: 'memory the paused readers hold (heap + external after a full GC, in-process)', value: Math.round(((retained.heap + retained.external) / MiB) * 10) / 10, unit: 'MiB', target: '≤ 64 MiB (issue 32, for what streams hold)', met: retainedMet });
  report.figure({ name: '/healthz p99 with the readers paused and backed up', value: Math.round(duringP99 * 10) / 10, unit: 'ms', baseline: Math.round(idleP99 * 10) / 10, target: '≤ 2× idle, floor 10 ms (issue 32: "holds")', met: healthMet });
  report.figure({ name: '/healthz p50 with the readers paused and backed up', value: Math.round(quantile(paused, 0.5) * 10) / 10, unit: 'ms', baseline: Math.round(quantile(idleHealth, 0.5) * 10) / 10 });
  report.figure({ name: '/healthz p99 while the readers were filled', value: Math.round(fillingP99 * 10) / 10, unit: 'ms', baseline: Math.round(idleP99 * 10) / 10 });
  report.figure({ name: `API CPU with ${READERS} idle streams open (nothing written)`, value: Math.round(streamsCpu * 10) / 10, unit: 'ms/s', baseline: Math.round(idleCpu * 10) / 10 });
  report.note('Large events (65,000 × €, ~390 KB) reach a stream as references (data_ref); the medium ones (30 KB) whole, ~6 MB per reader, past what the kernel buffers for a paused reader, so the stream stops reading the log and is cut off after EVENT_STREAM_STALL_SECONDS. The writes go through a second API process; the measured one serves only the streams and /healthz.');

  await handle.close();
  await database.drop();
  agent.destroy();
}

runBench(main);
