/**
 * `npm run bench`: every benchmark in bench/, one after another, each as its own process
 * (`node_modules/.bin/tsx bench/<file>`) that starts its own stack on a fresh database: auth, customers and
 * assign run the real app in-process on port 0, ingest, webhooks and rollups start the real API (and worker)
 * as child processes. Each bench's own output streams to the console as it runs; its figures come back as JSON
 * (bench/report.ts, through BENCH_REPORT) and go into bench/RESULTS.md with the machine, the date and the
 * versions.
 *
 *   npm run bench                      every bench; writes bench/RESULTS.md
 *   npm run bench -- ingest rollups    only those (names or files); prints the report, writes no file
 *   BENCH_RESULTS=<path>               write the report there instead (full run or subset)
 *   BENCH_TIMEOUT_SECONDS (3600)       per bench; a bench that runs longer is stopped and reported
 * Every knob of the benches themselves (BENCH_SECONDS, BENCH_CONNECTIONS, BENCH_TIME_ENTRIES, …) passes through
 * and is listed in the report when set. The runner exits 1 when a bench fails (a crash, or one of the checks a
 * bench already failed on before); a missed target alone is reported, not a failure.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import IORedis from 'ioredis';
import { Client } from 'pg';
import type { BenchReport, Figure, FigureValue } from './report';

const ROOT = path.resolve(__dirname, '..');
const TSX = path.join(ROOT, 'node_modules/.bin/tsx');
const DEFAULT_RESULTS = path.join(ROOT, 'bench/RESULTS.md');
const TIMEOUT_MS = Number(process.env.BENCH_TIMEOUT_SECONDS ?? 3600) * 1000;

interface BenchDef {
  name: string;
  file: string;
  /** The issue that asked for it. */
  issue: number;
  /** Fixed ports the bench's processes listen on: they must be free, or the bench would measure someone else's server. */
  ports: number[];
}

/** In issue order. A new bench file must be added here (the runner refuses to run while one is missing). */
const BENCHES: BenchDef[] = [
  { name: 'auth', file: 'auth.bench.ts', issue: 2, ports: [] },
  { name: 'customers', file: 'customers-list.ts', issue: 3, ports: [] },
  { name: 'assign', file: 'assign.ts', issue: 4, ports: [] },
  { name: 'ingest', file: 'ingest.ts', issue: 5, ports: [18081, 18082] },
  { name: 'webhooks', file: 'webhooks.ts', issue: 7, ports: [18091] },
  { name: 'rollups', file: 'rollups.ts', issue: 8, ports: [18095] },
  { name: 'paging', file: 'tickets-paging.ts', issue: 18, ports: [] },
  { name: 'events', file: 'events.ts', issue: 19, ports: [18101] },
  { name: 'scale', file: 'scale.ts', issue: 20, ports: [18111, 18112, 18113, 18114] },
  { name: 'fairness', file: 'fairness.ts', issue: 21, ports: [18121] },
  { name: 'writes', file: 'writes.ts', issue: 21, ports: [] },
  { name: 'streams', file: 'streams.ts', issue: 32, ports: [18131, 18132] },
  { name: 'outbound-fairness', file: 'outbound-fairness.ts', issue: 32, ports: [18141] },
  { name: 'outbound', file: 'outbound.ts', issue: 33, ports: [18151, 18152] },
  { name: 'attachments', file: 'attachments.ts', issue: 34, ports: [18161, 18162] },
  { name: 'search', file: 'search.ts', issue: 36, ports: [18171, 18172] },
  { name: 'reports', file: 'reports.ts', issue: 37, ports: [18181] },
  { name: 'time-rules', file: 'time-rules.ts', issue: 37, ports: [] },
  { name: 'schedules', file: 'schedules.ts', issue: 37, ports: [] },
];
/** Files in bench/ that are not benchmarks. */
const HELPERS = new Set(['lib.ts', 'processes.ts', 'report.ts', 'run.ts', 'inline-ingest-server.ts']);
/** Settings outside BENCH_* that change what the benches measure; listed in the report when set. */
const KNOBS = ['PG_POOL_MAX', 'WORKER_CONCURRENCY', 'INGEST_BATCH_WINDOW_MS', 'INGEST_BATCH_MAX', 'INBOUND_WEBHOOK_BATCH_WINDOW_MS', 'INBOUND_WEBHOOK_BATCH_MAX', 'INBOUND_WEBHOOK_RATE_POINTS', 'DATABASE_URL', 'REDIS_URL'];
/** Set by this runner for each bench; not the user's settings. */
const INTERNAL = new Set(['BENCH_REPORT', 'BENCH_CHILD_PIDS', 'BENCH_RESULTS', 'BENCH_TIMEOUT_SECONDS']);

interface Outcome {
  def: BenchDef;
  exitCode: number | null;
  signal: string | null;
  seconds: number;
  report: BenchReport | null;
  problem: string | null;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function selectBenches(args: string[]): BenchDef[] {
  const unknownFiles = readdirSync(path.join(ROOT, 'bench')).filter((f) => f.endsWith('.ts') && !HELPERS.has(f) && !BENCHES.some((b) => b.file === f));
  if (unknownFiles.length) throw new Error(`bench/run.ts does not know ${unknownFiles.join(', ')}: add it to BENCHES (or HELPERS if it is not a benchmark)`);
  if (args.length === 0) return BENCHES;
  return args.map((a) => {
    const key = path.basename(a).replace(/\.ts$/, '');
    const def = BENCHES.find((b) => b.name === key || b.file.replace(/\.ts$/, '') === key);
    if (!def) throw new Error(`unknown bench "${a}"; known: ${BENCHES.map((b) => b.name).join(', ')}`);
    return def;
  });
}

/**
 * Whether a process group still has a running member. On Linux /proc is read, so zombies (an exited tsx's
 * esbuild helper that nothing reaps in a container) do not count; elsewhere any member counts.
 */
function groupAlive(pgid: number): boolean {
  const members = liveMembers(pgid);
  if (members) return members.length > 0;
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The running (not zombie) members of a process group with their command lines; null where there is no /proc. */
function liveMembers(pgid: number): string[] | null {
  if (!existsSync('/proc/self/stat')) return null;
  const members: string[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // "pid (comm) state ppid pgrp …": comm may hold spaces and parentheses, so read after the last ')'.
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(pgrp) !== pgid || state === 'Z' || state === 'X') continue;
      const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter(Boolean);
      members.push(`${entry} (${path.basename(cmd[0] ?? '?')} … ${cmd.at(-1) ?? ''})`);
    } catch {
      /* gone meanwhile */
    }
  }
  return members;
}

/** Stops a process group: SIGTERM, up to 10 s to finish, then SIGKILL. */
async function stopGroup(pgid: number): Promise<boolean> {
  if (!groupAlive(pgid)) return false;
  try {
    process.kill(-pgid, 'SIGTERM');
  } catch {
    return false;
  }
  for (let i = 0; i < 100 && groupAlive(pgid); i++) await sleep(100);
  if (groupAlive(pgid)) {
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      /* gone meanwhile */
    }
  }
  return true;
}

/** Whether nothing listens on the port (so a bench's own server will be the one that answers there). */
const portFree = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });

let current: { pgid: number; pidsFile: string; dir: string } | null = null;

/** Everything a bench started that is still running: its own process group and the API/worker groups it recorded. */
async function stopLeftovers(pgid: number, pidsFile: string): Promise<string[]> {
  const pids = existsSync(pidsFile) ? readFileSync(pidsFile, 'utf8').split('\n').filter(Boolean).map(Number) : [];
  const stopped: string[] = [];
  for (const pid of [pgid, ...pids]) {
    const members = liveMembers(pid) ?? [`process group ${pid}`];
    if (await stopGroup(pid)) stopped.push(...members);
  }
  return stopped;
}

async function runBench(def: BenchDef, dir: string): Promise<Outcome> {
  const reportFile = path.join(dir, `${def.name}.json`);
  const pidsFile = path.join(dir, `${def.name}.pids`);
  const started = Date.now();
  const outcome = (o: Partial<Outcome>): Outcome => ({ def, exitCode: null, signal: null, seconds: (Date.now() - started) / 1000, report: null, problem: null, ...o });

  const busy: number[] = [];
  for (const port of def.ports) if (!(await portFree(port))) busy.push(port);
  if (busy.length) return outcome({ problem: `not run: port ${busy.join(', ')} already in use (another bench or server); its figures would be someone else's` });

  const file = `bench/${def.file}`;
  console.log(`\n━━━ ${def.name}: ${path.relative(ROOT, TSX)} ${file}`);
  const child = spawn(TSX, [file], {
    cwd: ROOT,
    env: { ...process.env, BENCH_REPORT: reportFile, BENCH_CHILD_PIDS: pidsFile },
    stdio: ['ignore', 'inherit', 'inherit'],
    // Its own process group, so it and tsx's child can be stopped together.
    detached: true,
  });
  current = { pgid: child.pid!, pidsFile, dir };
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    void stopGroup(child.pid!);
  }, TIMEOUT_MS);
  const [exitCode, signal] = await new Promise<[number | null, string | null]>((resolve) => child.once('exit', (code, sig) => resolve([code, sig])));
  clearTimeout(timer);
  const stopped = await stopLeftovers(child.pid!, pidsFile);
  current = null;

  let report: BenchReport | null = null;
  if (existsSync(reportFile)) {
    try {
      report = JSON.parse(readFileSync(reportFile, 'utf8')) as BenchReport;
    } catch (err) {
      return outcome({ exitCode, signal, problem: `unreadable figures: ${(err as Error).message}` });
    }
  }
  const problems: string[] = [];
  if (timedOut) problems.push(`stopped after ${TIMEOUT_MS / 1000} s (BENCH_TIMEOUT_SECONDS)`);
  if (exitCode !== 0) problems.push(signal ? `ended by ${signal}` : `exited with code ${exitCode}`);
  if (!report) problems.push('recorded no figures');
  if (stopped.length) problems.push(`left processes running, stopped: ${stopped.join(', ')}`);
  const seconds = (Date.now() - started) / 1000;
  console.log(`━━━ ${def.name}: ${exitCode === 0 ? 'done' : 'FAILED'} in ${seconds.toFixed(0)} s${problems.length ? ` (${problems.join('; ')})` : ''}`);
  return outcome({ exitCode, signal, report, seconds, problem: problems.length ? problems.join('; ') : null });
}

// ─── the report ───────────────────────────────────────────────────────────────────────────────────────────────

function sh(cmd: string, args: string[]): string | null {
  const r = spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8' });
  return r.status === 0 ? r.stdout.trim() : null;
}

function redactUrl(value: string): string {
  try {
    const u = new URL(value);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return value;
  }
}

async function postgresVersion(): Promise<string> {
  const url = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/helpdesk');
  url.pathname = '/postgres';
  const client = new Client({ connectionString: url.toString() });
  try {
    await client.connect();
    const { rows } = await client.query<{ server_version: string }>('SHOW server_version');
    return rows[0]?.server_version ?? 'unknown';
  } catch (err) {
    return `unknown (${(err as Error).message})`;
  } finally {
    await client.end().catch(() => {});
  }
}

async function redisVersion(): Promise<string> {
  const redis = new IORedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    const info = await redis.info('server');
    return /redis_version:(\S+)/.exec(info)?.[1] ?? 'unknown';
  } catch (err) {
    return `unknown (${(err as Error).message})`;
  } finally {
    redis.disconnect();
  }
}

const packageVersion = (name: string) => {
  try {
    return (JSON.parse(readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'not installed';
  }
};

function osName(): string {
  try {
    const pretty = /^PRETTY_NAME="?([^"\n]*)"?/m.exec(readFileSync('/etc/os-release', 'utf8'))?.[1];
    if (pretty) return `${pretty}, ${os.type()} ${os.release()} ${os.arch()}`;
  } catch {
    /* not Linux */
  }
  return `${os.type()} ${os.release()} ${os.arch()}`;
}

const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

function formatNumber(n: number): string {
  if (!Number.isFinite(n)) return String(n);
  if (Number.isInteger(n)) return n.toLocaleString('en-US');
  const abs = Math.abs(n);
  if (abs >= 100) return Math.round(n).toLocaleString('en-US');
  if (abs >= 10) return n.toFixed(1);
  return n.toFixed(2);
}

function formatValue(v: FigureValue | null | undefined, unit?: string): string {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (typeof v === 'string') return v;
  return unit ? `${formatNumber(v)} ${unit}` : formatNumber(v);
}

/** value ÷ baseline as "0.87×"; a speed-up (baseline ÷ value, for latencies) as "33× faster" or "2.1× slower". */
function formatRatio(f: Figure): string {
  const x = (r: number) => (r >= 10 ? r.toFixed(0) : r.toFixed(2));
  if (f.ratio === null || f.ratio === undefined || !Number.isFinite(f.ratio)) return '—';
  if (f.ratioKind !== 'baseline/value') return `${x(f.ratio)}×`;
  return f.ratio >= 1 || f.ratio === 0 ? `${x(f.ratio)}× faster` : `${x(1 / f.ratio)}× slower`;
}

const formatMet = (met: boolean | null | undefined) => (met === true ? 'yes' : met === false ? '**NO**' : '—');

function duration(seconds: number): string {
  const m = Math.floor(seconds / 60);
  const s = Math.round(seconds % 60);
  return m ? `${m} min ${s} s` : `${s} s`;
}

interface RunInfo {
  command: string;
  startedAt: Date;
  finishedAt: Date;
  loadAverage: number[];
  commit: string;
  overrides: string[];
  full: boolean;
  postgres: string;
  redis: string;
}

function render(info: RunInfo, outcomes: Outcome[]): string {
  const cpus = os.cpus();
  const out: string[] = [];
  const line = (s = '') => out.push(s);
  line('# Benchmark results');
  line();
  line(`Written by \`npm run bench\` (bench/run.ts); do not edit by hand, run it again. What each bench does and how the`);
  line(`figures compare with earlier runs: [docs/performance.md](../docs/performance.md).`);
  if (!info.full) line(`\nSubset run (${outcomes.map((o) => o.def.name).join(', ')}): only these benches.`);
  if (info.overrides.length) line(`\n**Non-default settings** (figures are not comparable with runs at the default sizes): ${info.overrides.map((o) => `\`${o}\``).join(', ')}.`);
  line();
  line('## Run');
  line();
  line(`- Command: \`${info.command}\`; each bench as its own process: \`node_modules/.bin/tsx bench/<file>\`, one after another`);
  line(`- Date: ${info.startedAt.toISOString()} to ${info.finishedAt.toISOString()} (${duration((info.finishedAt.getTime() - info.startedAt.getTime()) / 1000)})`);
  line(`- Commit: ${info.commit}`);
  line(`- Settings: ${info.overrides.length ? info.overrides.map((o) => `\`${o}\``).join(', ') : 'the benches\' defaults (no BENCH_* or tuning variable set)'}`);
  line();
  line('## Machine');
  line();
  line(`- CPU: ${cpus[0]?.model.trim() ?? 'unknown'} × ${cpus.length}`);
  line(`- Memory: ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB`);
  line(`- OS: ${osName()}`);
  line(`- Load average when the run started: ${info.loadAverage.map((l) => l.toFixed(2)).join(' / ')} (1 / 5 / 15 min); load generator, API, worker, PostgreSQL and Redis share these cores`);
  line();
  line('## Versions');
  line();
  line('| component | version |');
  line('|---|---|');
  line(`| Node.js | ${process.version} |`);
  line(`| PostgreSQL (\`SHOW server_version\`) | ${cell(info.postgres)} |`);
  line(`| Redis (\`INFO server\` redis_version) | ${cell(info.redis)} |`);
  for (const p of ['express', 'bullmq', 'pg', 'kysely', 'ioredis', 'zod', 'autocannon', 'tsx']) line(`| ${p} | ${packageVersion(p)} |`);
  line();
  line('## Summary');
  line();
  line('| bench | issue | exit | duration | targets met |');
  line('|---|---|---|---|---|');
  for (const o of outcomes) {
    const targets = o.report?.figures.filter((f) => f.met !== null && f.met !== undefined) ?? [];
    const met = targets.filter((f) => f.met).length;
    const exit = o.exitCode === null ? (o.signal ?? 'not run') : String(o.exitCode);
    line(
      `| [${o.def.name}](#${o.def.name}) | ${o.def.issue} | ${exit} | ${duration(o.seconds)} | ${targets.length ? `${met} of ${targets.length}` : '—'}${o.problem ? ` (${cell(o.problem)})` : ''} |`,
    );
  }
  for (const o of outcomes) {
    line();
    line(`## ${o.def.name}`);
    line();
    const r = o.report;
    line(`${r ? `${r.title} ` : ''}(issue ${o.def.issue}). \`node_modules/.bin/tsx bench/${o.def.file}\`, exit ${o.exitCode ?? o.signal ?? 'none'}, ${duration(o.seconds)}.`);
    if (o.problem) line(`\n**${o.problem}.**`);
    if (!r) continue;
    const settings = Object.entries(r.settings);
    if (settings.length) line(`\nSettings: ${settings.map(([k, v]) => `${k} ${typeof v === 'number' ? formatNumber(v) : String(v)}`).join(', ')}.`);
    for (const n of r.notes) line(`\n${n}`);
    line();
    if (r.figures.length === 0) {
      line('No figures recorded.');
      continue;
    }
    line('| figure | value | baseline | ratio | target | met |');
    line('|---|---|---|---|---|---|');
    for (const f of r.figures) {
      line(
        `| ${cell(f.name)} | ${cell(formatValue(f.value, f.unit))} | ${cell(formatValue(f.baseline, f.unit))} | ${formatRatio(f)} | ${cell(f.target ?? '—')} | ${formatMet(f.met)} |`,
      );
    }
  }
  return `${out.join('\n')}\n`;
}

async function main() {
  const args = process.argv.slice(2).filter((a) => a !== '--');
  const selected = selectBenches(args);
  const full = selected.length === BENCHES.length && args.length === 0;
  const startedAt = new Date();
  const loadAverage = os.loadavg();
  const overrides = Object.keys(process.env)
    .filter((k) => (k.startsWith('BENCH_') && !INTERNAL.has(k)) || KNOBS.includes(k))
    .sort()
    .map((k) => `${k}=${k.endsWith('_URL') ? redactUrl(process.env[k]!) : process.env[k]}`);
  const command = `${overrides.length ? `${overrides.join(' ')} ` : ''}npm run bench${args.length ? ` -- ${args.join(' ')}` : ''}`;

  // PostgreSQL and Redis must answer; start them the way `npm test` does when they do not.
  const services = spawnSync('bash', ['scripts/services.sh'], { cwd: ROOT, stdio: 'inherit' });
  if (services.status !== 0) throw new Error('PostgreSQL and Redis are not available (scripts/services.sh failed)');
  const [postgres, redis] = await Promise.all([postgresVersion(), redisVersion()]);
  const head = sh('git', ['rev-parse', '--short', 'HEAD']) ?? 'unknown';
  const dirty = sh('git', ['status', '--porcelain', '--untracked-files=no']);
  const commit = dirty === null ? head : dirty ? `${head} with uncommitted changes to ${dirty.split('\n').length} tracked file(s)` : `${head} (clean)`;

  console.log(`bench: ${selected.map((b) => b.name).join(', ')}; node ${process.version}, PostgreSQL ${postgres}, Redis ${redis}`);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'helpdesk-bench-'));
  const outcomes: Outcome[] = [];
  try {
    for (const def of selected) outcomes.push(await runBench(def, dir));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  const markdown = render({ command, startedAt, finishedAt: new Date(), loadAverage, commit, overrides, full, postgres, redis }, outcomes);
  const target = process.env.BENCH_RESULTS ? path.resolve(process.env.BENCH_RESULTS) : full ? DEFAULT_RESULTS : null;
  console.log('\n');
  if (target) {
    writeFileSync(target, markdown);
    console.log(`wrote ${path.relative(process.cwd(), target) || target}`);
  } else {
    process.stdout.write(markdown);
    console.log(`\n(subset run: bench/RESULTS.md left as it was; set BENCH_RESULTS=<path> to write this report to a file)`);
  }
  const missed = outcomes.flatMap((o) => (o.report?.figures ?? []).filter((f) => f.met === false).map((f) => `${o.def.name}: ${f.name} (${f.target})`));
  if (missed.length) console.log(`targets missed:\n  ${missed.join('\n  ')}`);
  const failed = outcomes.filter((o) => o.exitCode !== 0);
  if (failed.length) {
    console.log(`failed: ${failed.map((o) => `${o.def.name} (${o.problem})`).join(', ')}`);
    process.exitCode = 1;
  }
}

// Ctrl-C or a SIGTERM stops the running bench and whatever it started, not just this runner.
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    const c = current;
    console.error(`\nbench: ${sig}, stopping the running bench`);
    void (c ? stopLeftovers(c.pgid, c.pidsFile) : Promise.resolve([])).finally(() => {
      if (c) rmSync(c.dir, { recursive: true, force: true });
      process.exit(130);
    });
  });
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
