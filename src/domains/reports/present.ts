import type { Executor } from '../../db';
import { addInto, BUCKET_BOUNDS, percentile, type Histogram } from './buckets';
import * as store from './store';

/** The reports, in the order the API documents them. */
export const REPORT_NAMES = ['first_response_time', 'resolution_time', 'replies_per_ticket', 'reopens', 'backlog', 'sla', 'volume', 'agent_activity'] as const;
export type ReportName = (typeof REPORT_NAMES)[number];

/** A report's range (local dates, both included) and filters. */
export interface ReportQuery {
  from: string;
  to: string;
  team_id?: string;
  agent_id?: string;
  channel?: string;
  priority?: string;
}

/** What one report reads: report_days columns and histograms, journal metrics, the backlog's opening, per-agent totals. */
export interface ReportRead {
  columns: string[];
  hists?: string[];
  metrics: string[];
  opening?: boolean;
  agents?: boolean;
}

const TIME = (p: 'frt' | 'res'): ReportRead => ({
  columns: [`${p}_n`, `${p}_sum`, `${p}_bsum`, `${p}_p50`, `${p}_p90`, `${p}_bp50`, `${p}_bp90`],
  hists: [`${p}_h`, `${p}_bh`],
  metrics: [p, `${p}_b`],
});

export const REPORT_READS: Record<ReportName, ReportRead> = {
  first_response_time: TIME('frt'),
  resolution_time: TIME('res'),
  replies_per_ticket: { columns: ['rpt_n', 'rpt_replies'], metrics: ['rpt'] },
  reopens: { columns: ['rpt_n', 'reo_n', 'reo_sum'], metrics: ['rpt', 'reo'] },
  backlog: { columns: ['backlog'], metrics: ['backlog'], opening: true },
  sla: { columns: ['slaf_n', 'slaf_met', 'slar_n', 'slar_met'], metrics: ['slaf', 'slar'] },
  volume: { columns: ['created', 'solved', 'reopened'], metrics: ['created', 'solved', 'reopened'] },
  agent_activity: { columns: ['replies', 'notes', 'agent_solved', 'entries', 'minutes'], metrics: ['reply', 'note', 'agent_solved', 'minutes'], agents: true },
};

/**
 * One day's (or the range's) counters and histograms, from day rows and journal facts. A day without journal facts
 * of a histogram carries the percentiles the fold kept (`p`, bucket numbers) instead of the histogram; `whole` names
 * the histograms that are complete here (read, plus the journal's facts), whose percentiles are computed.
 */
export interface Totals {
  c: Record<string, number>;
  h: Record<string, Histogram>;
  p: Record<string, number | null>;
  whole: Set<string>;
}

const empty = (): Totals => ({ c: {}, h: {}, p: {}, whole: new Set() });
const add = (t: Totals, column: string, n: number) => {
  t.c[column] = (t.c[column] ?? 0) + n;
};
const hist = (t: Totals, column: string) => (t.h[column] ??= new Map());

/** A day row's counters and histograms into `t`. */
function addRow(t: Totals, row: Record<string, unknown>) {
  for (const [column] of store.COUNTERS) if (typeof row[column] === 'number' || typeof row[column] === 'string') add(t, column, Number(row[column]));
  for (const [column] of store.HISTOGRAMS) if (row[column]) addInto(hist(t, column), row[column] as Record<string, number>);
  for (const [column] of store.PERCENTILES) if (column in row) t.p[column] = row[column] as number | null;
  // A row whose percentiles the fold has not refreshed yet came with its histograms: those are computed here.
  if (row.pct_stale === true) for (const [column] of store.HISTOGRAMS) if (column in row) t.whole.add(column);
}

/** A journal fact's counts into `t`, in the columns its metric sums to. */
function addFact(t: Totals, f: { metric: string; bucket: number | null; n: number; v: number }, counters = true) {
  if (counters) for (const [column, metric, part] of store.COUNTERS) if (metric === f.metric) add(t, column, part === 'n' ? f.n : f.v);
  for (const [column, metric] of store.HISTOGRAMS) {
    if (metric === f.metric && f.bucket !== null) {
      addInto(hist(t, column), new Map([[f.bucket, f.n]]));
      t.whole.add(column);
    }
  }
}

function merge(into: Totals, t: Totals) {
  for (const [k, n] of Object.entries(t.c)) add(into, k, n);
  for (const [k, h] of Object.entries(t.h)) addInto(hist(into, k), h);
}

const c = (t: Totals, k: string) => t.c[k] ?? 0;
const round = (x: number, places: number) => Math.round(x * 10 ** places) / 10 ** places;
const ratio = (a: number, b: number, places: number) => (b === 0 ? null : round(a / b, places));

/** A percentile: from the histogram when it is complete here, else the one the fold kept for the day. */
function pct(t: Totals, histogram: string, p: number, kept: string): number | null {
  if (t.whole.has(histogram)) return percentile(t.h[histogram] ?? new Map(), p);
  const b = t.p[kept];
  return b === null || b === undefined ? null : BUCKET_BOUNDS[b]!;
}

function timeShape(t: Totals, p: 'frt' | 'res') {
  const n = c(t, `${p}_n`);
  return {
    tickets: n,
    median_minutes: pct(t, `${p}_h`, 0.5, `${p}_p50`),
    p90_minutes: pct(t, `${p}_h`, 0.9, `${p}_p90`),
    mean_minutes: ratio(c(t, `${p}_sum`), n, 1),
    median_business_minutes: pct(t, `${p}_bh`, 0.5, `${p}_bp50`),
    p90_business_minutes: pct(t, `${p}_bh`, 0.9, `${p}_bp90`),
    mean_business_minutes: ratio(c(t, `${p}_bsum`), n, 1),
  };
}

/** Each report's numbers for one day (or the range), from its totals. The backlog is cumulative: see `present`. */
export const SHAPES: Record<Exclude<ReportName, 'backlog'>, (t: Totals) => Record<string, unknown>> = {
  first_response_time: (t) => timeShape(t, 'frt'),
  resolution_time: (t) => timeShape(t, 'res'),
  replies_per_ticket: (t) => ({ solved_tickets: c(t, 'rpt_n'), replies: c(t, 'rpt_replies'), replies_per_ticket: ratio(c(t, 'rpt_replies'), c(t, 'rpt_n'), 2) }),
  reopens: (t) => ({ solved_tickets: c(t, 'rpt_n'), reopened_tickets: c(t, 'reo_n'), reopens: c(t, 'reo_sum'), reopened_share: ratio(c(t, 'reo_n'), c(t, 'rpt_n'), 4) }),
  sla: (t) => ({
    first_reply: { measured: c(t, 'slaf_n'), met: c(t, 'slaf_met'), share: ratio(c(t, 'slaf_met'), c(t, 'slaf_n'), 4) },
    resolution: { measured: c(t, 'slar_n'), met: c(t, 'slar_met'), share: ratio(c(t, 'slar_met'), c(t, 'slar_n'), 4) },
  }),
  volume: (t) => ({ created: c(t, 'created'), solved: c(t, 'solved'), reopened: c(t, 'reopened') }),
  agent_activity: (t) => ({ replies: c(t, 'replies'), notes: c(t, 'notes'), solved: c(t, 'agent_solved'), time_entries: c(t, 'entries'), minutes_logged: c(t, 'minutes') }),
};

// ---- dates ----

const DAY_MS = 86_400_000;
const dayNumber = (date: string) => Date.parse(`${date}T00:00:00Z`) / DAY_MS;
const dateOf = (day: number) => new Date(day * DAY_MS).toISOString().slice(0, 10);

/** Every date from `from` to `to`, both included. */
export function datesBetween(from: string, to: string): string[] {
  const out: string[] = [];
  for (let d = dayNumber(from); d <= dayNumber(to); d++) out.push(dateOf(d));
  return out;
}

/** The whole months inside [from, to], as [first month's first day, the day after the last month); empty when none. */
export function wholeMonths(from: string, to: string): { monthsFrom: string; monthsTo: string } {
  const first = from.endsWith('-01') ? from : nextMonth(from);
  const after = dateOf(dayNumber(to) + 1);
  const last = after.endsWith('-01') ? after : `${after.slice(0, 7)}-01`;
  return first < last ? { monthsFrom: first, monthsTo: last } : { monthsFrom: from, monthsTo: from };
}

function nextMonth(date: string): string {
  const d = new Date(`${date.slice(0, 7)}-01T00:00:00Z`);
  d.setUTCMonth(d.getUTCMonth() + 1);
  return d.toISOString().slice(0, 10);
}

/** The per-day totals of one key over [from, to], and the backlog's opening, as read (days and journal). */
export function totalsByDay(read: store.Read, from: string, to: string): Map<string, Totals> {
  const byDay = new Map(datesBetween(from, to).map((d) => [d, empty()]));
  for (const row of read.days) {
    const t = byDay.get(row.day);
    if (t) addRow(t, row);
  }
  for (const f of read.journal) {
    const t = byDay.get(f.day);
    if (t) addFact(t, f);
  }
  return byDay;
}

const filtersOf = (q: ReportQuery) => ({
  ...(q.team_id ? { team_id: q.team_id } : {}),
  ...(q.agent_id ? { agent_id: q.agent_id } : {}),
  ...(q.channel ? { channel: q.channel } : {}),
  ...(q.priority ? { priority: q.priority } : {}),
});

export const keyOf = (q: ReportQuery): store.Key => ({
  team: q.team_id?.toLowerCase() ?? '*',
  agent: q.agent_id?.toLowerCase() ?? '*',
  channel: q.channel ?? '*',
  priority: q.priority ?? '*',
});

/**
 * A report's answer from what was read: every date of the range (zero-filled), the range's total, and for agent
 * activity the per-agent totals. Shared by the service and the raw recomputation's comparison.
 */
export function answer(name: ReportName, q: ReportQuery, read: store.Read, byDay: Map<string, Totals>, agents?: store.AgentTotals[]) {
  const { zone, opening } = read;
  const total = empty();
  for (const t of byDay.values()) for (const [k, n] of Object.entries(t.c)) add(total, k, n);
  // The range's histograms: what the months and the days around them hold, plus every journal fact in the range.
  for (const [column, h] of Object.entries(read.totals ?? {})) {
    addInto(hist(total, column), h);
    total.whole.add(column);
  }
  for (const f of read.journal) addFact(total, f, false);
  const base = { report: name, from: q.from, to: q.to, time_zone: zone, filters: filtersOf(q) };
  if (name === 'backlog') {
    let running = opening;
    const days = [...byDay].map(([date, t]) => {
      running += c(t, 'backlog');
      return { date, backlog: running };
    });
    return { ...base, days, total: { opening, closing: running } };
  }
  const shape = SHAPES[name];
  const days = [...byDay].map(([date, t]) => ({ date, ...shape(t) }));
  if (name !== 'agent_activity') return { ...base, days, total: shape(total) };
  const list = (agents ?? [])
    .map((a) => ({
      agent_id: a.agent_id,
      ...(a.name ? { agent_name: a.name } : {}),
      replies: a.replies,
      notes: a.notes,
      solved: a.agent_solved,
      time_entries: a.entries,
      minutes_logged: a.minutes,
    }))
    .sort((x, y) => y.replies - x.replies || y.solved - x.solved || y.minutes_logged - x.minutes_logged || String(x.agent_id).localeCompare(String(y.agent_id)));
  return { ...base, days, total: shape(total), agents: list };
}

/**
 * Reads one report from the folded days and the journal, one snapshot: one statement, or (agent activity, which
 * also reads per-agent totals) a read-only REPEATABLE READ transaction of two.
 */
export async function present(name: ReportName, q: ReportQuery, read: ReportRead, db: Executor, tenantId: string) {
  const key = keyOf(q);
  const range = { from: q.from, to: q.to, ...wholeMonths(q.from, q.to) };
  const want = { columns: read.columns, hists: read.hists ?? [], metrics: read.metrics, opening: read.opening === true };
  if (!read.agents) {
    const r = await store.readDays(db, tenantId, key, range, want);
    return answer(name, q, r, totalsByDay(r, q.from, q.to));
  }
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(async (tx) => {
      const r = await store.readDays(tx, tenantId, key, range, want);
      const agents = key.agent === '*' ? await store.agentTotals(tx, tenantId, { team: key.team, channel: key.channel, priority: key.priority }, range) : undefined;
      const byDay = totalsByDay(r, q.from, q.to);
      return answer(name, q, r, byDay, agents ?? (await oneAgent(tx, tenantId, key.agent, byDay)));
    });
}

/** With an agent filter, the per-agent list is that agent alone: the range's totals, named while a member. */
async function oneAgent(db: Executor, tenantId: string, agentId: string, byDay: Map<string, Totals>): Promise<store.AgentTotals[]> {
  const t = empty();
  for (const d of byDay.values()) merge(t, d);
  if (['replies', 'notes', 'agent_solved', 'entries', 'minutes'].every((k) => c(t, k) === 0)) return [];
  const names = await store.memberNames(db, tenantId, [agentId]);
  return [{ agent_id: agentId, name: names.get(agentId) ?? null, replies: c(t, 'replies'), notes: c(t, 'notes'), agent_solved: c(t, 'agent_solved'), entries: c(t, 'entries'), minutes: c(t, 'minutes') }];
}
