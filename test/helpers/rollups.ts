/**
 * The rollup tests' world: response shapes, HTTP helpers for the sources and reads, a direct SQL aggregation
 * over raw rows (independent of src/domains/rollups) to compare against, backdating, and a seeded random world.
 */
import type { ChildProcess } from 'node:child_process';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../../src/db';
import { type TestContext } from './context';
import { addMember, bearer, createWorkspace, type Member, type Workspace } from './factories';
import { createTeam } from './teams';
import { createTicket } from './tickets';
import { useTestApp } from './use-test-app';

/** The app of the test file using these helpers (set by useRollupsApp). */
export const suite = { ctx: undefined as unknown as TestContext };

/** The rollup files' app: started for the file, the helpers pointed at it, and child processes (the verify CLI) killed before it closes. */
export function useRollupsApp(): { ctx: TestContext; running: Set<ChildProcess> } {
  const running = new Set<ChildProcess>();
  const { ctx } = useTestApp({
    teardown: () => {
      for (const child of running) child.kill('SIGKILL');
    },
  });
  suite.ctx = ctx;
  return { ctx, running };
}

// ---------------------------------------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------------------------------------

export interface Split {
  minutes: number;
  billable_minutes: number;
  non_billable_minutes: number;
}
export interface Counts {
  total: number;
  open: number;
  done: number;
  overdue: number;
}
export interface Summary {
  since_days: number;
  total: { entries: number } & Split;
  by_agent: ({ user_id?: string; user_name?: string; entries: number } & Split)[];
  by_day: ({ day: string | null } & Split)[];
  by_team: ({ team_id?: string; team_name?: string } & Split)[];
  todos: {
    total: Counts;
    by_assignee: ({ assignee_id?: string; assignee_name?: string } & Counts)[];
    by_ticket: ({ ticket_id: string; ticket_subject: string } & Counts)[];
    by_ticket_limit: number;
  };
}
export interface CsatAggregate {
  since_days: number;
  overall: { responses: number; avg_score: number | null; distribution: Record<string, number> };
  per_agent: { assignee_id?: string; assignee_name?: string; responses: number; avg_score: number | null }[];
}
export interface TimeQuery {
  since_days?: number;
  user_id?: string;
  team_id?: string;
  by_ticket_limit?: number;
}

export const DAY = 24 * 3600 * 1000;
export const SUMMARY = '/v1/time-tracking/summary';
export const CSAT = '/v1/csat/aggregate';
export const ZERO_COUNTS: Counts = { total: 0, open: 0, done: 0, overdue: 0 };
export const ZERO_DISTRIBUTION = { '1': 0, '2': 0, '3': 0, '4': 0, '5': 0 };
export const ROOT = path.resolve(__dirname, '..', '..');
export const TSX = path.join(ROOT, 'node_modules/.bin/tsx');

/** Small seeded PRNG (mulberry32), so a failing sequence can be replayed. */
export function mulberry32(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)),
    chance: (p: number) => next() < p,
    pick<T>(xs: readonly T[]): T {
      return xs[Math.floor(next() * xs.length)]!;
    },
  };
}
export type Rng = ReturnType<typeof mulberry32>;

export const dayString = (offsetDays: number) => new Date(Date.now() - offsetDays * DAY).toISOString().slice(0, 10);
export const isoIn = (days: number) => new Date(Date.now() + days * DAY).toISOString();

// ---------------------------------------------------------------------------------------------------------
// HTTP helpers
// ---------------------------------------------------------------------------------------------------------

export const api = {
  addEntry: (ws: Workspace, ticketId: string, body: Record<string, unknown>, token = ws.ownerKey) =>
    suite.ctx.http.post(`/v1/tickets/${ticketId}/time-entries`).set(bearer(token)).send(body),
  listEntries: (ws: Workspace, ticketId: string, token = ws.ownerKey) => suite.ctx.http.get(`/v1/tickets/${ticketId}/time-entries`).set(bearer(token)),
  patchEntry: (ws: Workspace, id: string, body: Record<string, unknown>, token = ws.ownerKey) =>
    suite.ctx.http.patch(`/v1/time-entries/${id}`).set(bearer(token)).send(body),
  deleteEntry: (ws: Workspace, id: string, token = ws.ownerKey) => suite.ctx.http.delete(`/v1/time-entries/${id}`).set(bearer(token)),
  addTodo: (ws: Workspace, ticketId: string, body: Record<string, unknown>, token = ws.ownerKey) =>
    suite.ctx.http.post(`/v1/tickets/${ticketId}/todos`).set(bearer(token)).send(body),
  patchTodo: (ws: Workspace, id: string, body: Record<string, unknown>, token = ws.ownerKey) => suite.ctx.http.patch(`/v1/todos/${id}`).set(bearer(token)).send(body),
  deleteTodo: (ws: Workspace, id: string, token = ws.ownerKey) => suite.ctx.http.delete(`/v1/todos/${id}`).set(bearer(token)),
  addCsat: (ws: Workspace, ticketId: string, body: Record<string, unknown>, token = ws.ownerKey) =>
    suite.ctx.http.post(`/v1/tickets/${ticketId}/csat`).set(bearer(token)).send(body),
  patchTicket: (ws: Workspace, ticketId: string, body: Record<string, unknown>) => suite.ctx.http.patch(`/v1/tickets/${ticketId}`).set(bearer(ws.ownerKey)).send(body),
  summaryRaw: (ws: Workspace, q: Record<string, unknown> = {}, token = ws.ownerKey) => suite.ctx.http.get(SUMMARY).query(q).set(bearer(token)),
  csatRaw: (ws: Workspace, q: Record<string, unknown> = {}, token = ws.ownerKey) => suite.ctx.http.get(CSAT).query(q).set(bearer(token)),
};

export function ok<T>(res: { status: number; body: unknown }, status: number, what: string): T {
  if (res.status !== status) throw new Error(`${what}: expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as T;
}

export async function entry(ws: Workspace, ticketId: string, body: Record<string, unknown>): Promise<{ id: string; created_at: string }> {
  return ok(await api.addEntry(ws, ticketId, body), 201, 'add time entry');
}
export async function todo(ws: Workspace, ticketId: string, body: Record<string, unknown>): Promise<{ id: string }> {
  return ok(await api.addTodo(ws, ticketId, { title: 'Call back', ...body }), 201, 'add todo');
}
export async function csat(ws: Workspace, ticketId: string, score: number): Promise<{ id: string; assignee_id?: string }> {
  return ok(await api.addCsat(ws, ticketId, { score }), 201, 'add csat');
}
export async function summary(ws: Workspace, q: TimeQuery = {}): Promise<Summary> {
  return ok(await api.summaryRaw(ws, q as Record<string, unknown>), 200, `GET summary ${JSON.stringify(q)}`);
}
export async function aggregate(ws: Workspace, sinceDays?: number): Promise<CsatAggregate> {
  return ok(await api.csatRaw(ws, sinceDays === undefined ? {} : { since_days: sinceDays }), 200, `GET csat ${sinceDays}`);
}
export async function ticketDetail(ws: Workspace, id: string) {
  return ok<{ time_total_minutes: number; time_billable_minutes: number; todo_counts: { open: number; done: number; overdue: number } }>(
    await suite.ctx.http.get(`/v1/tickets/${id}`).set(bearer(ws.ownerKey)),
    200,
    'GET ticket',
  );
}

// ---------------------------------------------------------------------------------------------------------
// Direct SQL over raw rows (independent of src/domains/rollups)
// ---------------------------------------------------------------------------------------------------------

export const split = (minutes: number, billable: number): Split => ({ minutes, billable_minutes: billable, non_billable_minutes: minutes - billable });

export async function rawSummary(db: Db, tenantId: string, q: TimeQuery): Promise<Summary> {
  const n = q.since_days ?? 14;
  const uid = q.user_id ?? null;
  const tid = q.team_id ?? null;
  const limit = q.by_ticket_limit ?? 50;
  const te: RawBuilder<unknown> = sql`te.tenant_id = ${tenantId} and te.created_at > now() - make_interval(days => ${n}::int)
    and (${uid}::uuid is null or te.user_id = ${uid}::uuid) and (${tid}::uuid is null or te.team_id = ${tid}::uuid)`;
  const sums = sql`count(*)::int as entries, coalesce(sum(te.minutes), 0)::int as minutes, coalesce(sum(te.minutes) filter (where te.billable), 0)::int as billable`;
  type G = { key: string | null; name: string | null; entries: number; minutes: number; billable: number };
  const total = (await sql<G>`select null as key, null as name, ${sums} from time_entries te where ${te}`.execute(db)).rows[0]!;
  // The agent is the entry's user while they are a member of the workspace; anyone else is the null key.
  const agents = (
    await sql<G>`select m.user_id::text as key, max(u.name) as name, ${sums}
      from time_entries te
      left join memberships m on m.tenant_id = te.tenant_id and m.user_id = te.user_id
      left join users u on u.id = m.user_id
      where ${te} group by m.user_id`.execute(db)
  ).rows;
  const teams = (
    await sql<G>`select te.team_id::text as key, max(tm.name) as name, ${sums}
      from time_entries te left join teams tm on tm.tenant_id = te.tenant_id and tm.id = te.team_id
      where ${te} group by te.team_id`.execute(db)
  ).rows;
  const days = (await sql<G>`select te.worked_on::text as key, null as name, ${sums} from time_entries te where ${te} group by te.worked_on`.execute(db)).rows;

  const td: RawBuilder<unknown> = sql`t.tenant_id = ${tenantId} and t.created_at > now() - make_interval(days => ${n}::int)
    and (${uid}::uuid is null or t.assignee_id = ${uid}::uuid) and (${tid}::uuid is null or tk.team_id = ${tid}::uuid)`;
  const counts = sql`count(*)::int as total, count(*) filter (where t.done_at is null)::int as "open",
    count(*) filter (where t.done_at is not null)::int as done, count(*) filter (where t.done_at is null and t.due_at < now())::int as overdue`;
  type T = Counts & { key: string | null; name: string | null };
  const todoFrom = sql`todos t join tickets tk on tk.tenant_id = t.tenant_id and tk.id = t.ticket_id`;
  const todoTotal = (await sql<T>`select ${counts} from ${todoFrom} where ${td}`.execute(db)).rows[0]!;
  const byAssignee = (
    await sql<T>`select t.assignee_id::text as key, max(u.name) as name, ${counts}
      from ${todoFrom}
      left join memberships m on m.tenant_id = t.tenant_id and m.user_id = t.assignee_id
      left join users u on u.id = m.user_id
      where ${td} group by t.assignee_id`.execute(db)
  ).rows;
  const byTicket = (
    await sql<T>`select t.ticket_id::text as key, tk.subject as name, ${counts} from ${todoFrom} where ${td}
      group by t.ticket_id, tk.subject order by "open" desc, total desc, t.ticket_id::text collate "C" limit ${limit}`.execute(db)
  ).rows;
  const c = (r: Counts): Counts => ({ total: r.total, open: r.open, done: r.done, overdue: r.overdue });
  return {
    since_days: n,
    total: { entries: total.entries, ...split(total.minutes, total.billable) },
    by_agent: agents.map((r) => ({ ...(r.key ? { user_id: r.key } : {}), ...(r.name ? { user_name: r.name } : {}), entries: r.entries, ...split(r.minutes, r.billable) })),
    by_day: days.map((r) => ({ day: r.key, ...split(r.minutes, r.billable) })),
    by_team: teams.map((r) => ({ ...(r.key ? { team_id: r.key } : {}), ...(r.name ? { team_name: r.name } : {}), ...split(r.minutes, r.billable) })),
    todos: {
      total: c(todoTotal),
      by_assignee: byAssignee.map((r) => ({ ...(r.key ? { assignee_id: r.key } : {}), ...(r.name ? { assignee_name: r.name } : {}), ...c(r) })),
      by_ticket: byTicket.map((r) => ({ ticket_id: r.key!, ticket_subject: r.name!, ...c(r) })),
      by_ticket_limit: limit,
    },
  };
}

export async function rawCsat(db: Db, tenantId: string, sinceDays: number): Promise<CsatAggregate> {
  const w: RawBuilder<unknown> = sql`c.tenant_id = ${tenantId} and c.created_at > now() - make_interval(days => ${sinceDays}::int)`;
  const overall = (await sql<{ responses: number; avg: number | null }>`select count(*)::int as responses, sum(c.score)::float8 / nullif(count(*), 0) as avg from csat_responses c where ${w}`.execute(db)).rows[0]!;
  const dist = (
    await sql<{ key: string; n: number }>`select s::text as key, count(c.id)::int as n from generate_series(1, 5) s left join csat_responses c on c.score = s and ${w} group by s`.execute(db)
  ).rows;
  const agents = (
    await sql<{ key: string | null; name: string | null; responses: number; avg: number }>`
      select c.assignee_id::text as key, max(u.name) as name, count(*)::int as responses, sum(c.score)::float8 / count(*) as avg
      from csat_responses c
      left join memberships m on m.tenant_id = c.tenant_id and m.user_id = c.assignee_id
      left join users u on u.id = m.user_id
      where ${w} group by c.assignee_id`.execute(db)
  ).rows;
  return {
    since_days: sinceDays,
    overall: { responses: overall.responses, avg_score: overall.avg, distribution: Object.fromEntries(dist.map((d) => [d.key, d.n])) },
    per_agent: agents.map((r) => ({ ...(r.key ? { assignee_id: r.key } : {}), ...(r.name ? { assignee_name: r.name } : {}), responses: r.responses, avg_score: r.avg })),
  };
}

export const byKey = <T>(key: (x: T) => string | null | undefined) => (xs: T[]) => [...xs].sort((a, b) => String(key(a) ?? '').localeCompare(String(key(b) ?? '')));
/** Groupings as sets (sorted by their key); by_ticket keeps its order, which the spec fixes. */
export const normSummary = (s: Summary): Summary => ({
  ...s,
  by_agent: byKey<Summary['by_agent'][number]>((x) => x.user_id)(s.by_agent),
  by_day: byKey<Summary['by_day'][number]>((x) => x.day)(s.by_day),
  by_team: byKey<Summary['by_team'][number]>((x) => x.team_id)(s.by_team),
  todos: { ...s.todos, by_assignee: byKey<Summary['todos']['by_assignee'][number]>((x) => x.assignee_id)(s.todos.by_assignee) },
});
export const normCsat = (c: CsatAggregate): CsatAggregate => ({ ...c, per_agent: byKey<CsatAggregate['per_agent'][number]>((x) => x.assignee_id)(c.per_agent) });

/** The spec's arithmetic rules; returns the violations (empty when all hold). */
export function summaryRuleViolations(s: Summary): string[] {
  const out: string[] = [];
  const sum = (xs: Split[]) => xs.reduce((n, x) => n + x.minutes, 0);
  for (const [name, rows] of [['by_agent', s.by_agent], ['by_day', s.by_day], ['by_team', s.by_team]] as const) {
    if (sum(rows) !== s.total.minutes) out.push(`${name} minutes sum ${sum(rows)} ≠ total ${s.total.minutes}`);
  }
  if (s.by_agent.reduce((n, x) => n + x.entries, 0) !== s.total.entries) out.push('by_agent entries do not sum to total.entries');
  for (const x of [s.total, ...s.by_agent, ...s.by_day, ...s.by_team]) {
    if (x.billable_minutes + x.non_billable_minutes !== x.minutes || x.billable_minutes < 0 || x.non_billable_minutes < 0) out.push(`split broken: ${JSON.stringify(x)}`);
  }
  const t = s.todos.total;
  if (t.open + t.done !== t.total || t.overdue > t.open) out.push(`todo counts inconsistent: ${JSON.stringify(t)}`);
  for (const k of ['total', 'open', 'done', 'overdue'] as const) {
    const a = s.todos.by_assignee.reduce((n, x) => n + x[k], 0);
    if (a !== t[k]) out.push(`todos.by_assignee ${k} sum ${a} ≠ ${t[k]}`);
  }
  return out;
}
export function csatRuleViolations(c: CsatAggregate): string[] {
  const out: string[] = [];
  if (!isDeepStrictEqual(Object.keys(c.overall.distribution).sort(), ['1', '2', '3', '4', '5'])) out.push(`distribution keys ${Object.keys(c.overall.distribution)}`);
  const d = Object.values(c.overall.distribution).reduce((n, x) => n + x, 0);
  if (d !== c.overall.responses) out.push(`distribution sums to ${d} ≠ ${c.overall.responses}`);
  const p = c.per_agent.reduce((n, x) => n + x.responses, 0);
  if (p !== c.overall.responses) out.push(`per_agent sums to ${p} ≠ ${c.overall.responses}`);
  if ((c.overall.responses === 0) !== (c.overall.avg_score === null)) out.push('avg_score null iff no responses broken');
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Backdating: the only way this file moves created_at, and it keeps the buckets right
// ---------------------------------------------------------------------------------------------------------

export type SourceTable = 'time_entries' | 'csat_responses' | 'todos';

/** Moves a raw row's created_at and rebuilds the workspace's buckets from raw rows, as a backfill would. */
export async function backdate(tenantId: string, table: SourceTable, id: string, at: Date): Promise<void> {
  const r = await sql`update ${sql.table(table)} set created_at = ${at} where tenant_id = ${tenantId} and id = ${id}`.execute(suite.ctx.db);
  if (Number(r.numAffectedRows) !== 1) throw new Error(`backdate: no ${table} row ${id}`);
  await suite.ctx.services.rollups.rebuild(tenantId);
}

export const journalCount = async (tenantId: string) =>
  (await sql<{ n: number }>`select count(*)::int as n from rollup_journal where tenant_id = ${tenantId}`.execute(suite.ctx.db)).rows[0]!.n;
export const bucketCount = async (tenantId: string) =>
  (await sql<{ n: number }>`select (select count(*) from time_buckets where tenant_id = ${tenantId}) + (select count(*) from csat_buckets where tenant_id = ${tenantId}) as n`.execute(suite.ctx.db))
    .rows[0]!.n;
/** verify() found nothing: every list of differences it returns (time and csat at least) is empty. */
export async function expectNoDifferences(tenantId: string): Promise<void> {
  const diff = (await suite.ctx.services.rollups.verify(tenantId)) as unknown as Record<string, unknown[]>;
  expect(Object.keys(diff)).toEqual(expect.arrayContaining(['time', 'csat']));
  expect(Object.fromEntries(Object.entries(diff).filter(([, v]) => v.length > 0))).toEqual({});
}

// ---------------------------------------------------------------------------------------------------------
// A random world: 3 agents (+ one who gets removed), 2 teams plus no team, tickets with and without assignee
// ---------------------------------------------------------------------------------------------------------

export interface TicketModel {
  id: string;
  team: string | null;
  assignee: string | null;
}
export interface EntryModel {
  ticket: string;
  user: string | null;
  team: string | null;
  minutes: number;
  billable: boolean;
  worked_on: string | null;
}
export interface TodoModel {
  ticket: string;
  assignee: string | null;
  done: boolean;
  due: string | null;
}

export const WINDOW_EDGES = [1, 2, 7, 14, 30, 180, 365];

/** A time in the last 200 days (half of them in the last 3), never within 10 minutes of a window's edge. */
export function randomPast(rng: Rng): Date {
  for (;;) {
    const ago = rng.chance(0.5) ? rng.next() * 3 * DAY : rng.next() * 200 * DAY;
    if (WINDOW_EDGES.every((d) => Math.abs(ago - d * DAY) > 10 * 60 * 1000)) return new Date(Date.now() - ago);
  }
}

export class World {
  readonly entries = new Map<string, EntryModel>();
  readonly todos = new Map<string, TodoModel>();
  readonly csat = new Map<string, { ticket: string; assignee: string | null; score: number }>();
  removed = false;
  readonly workedOn = [dayString(0), dayString(1), dayString(3), dayString(40), dayString(-2)];
  log: string[] = [];

  constructor(
    readonly ws: Workspace,
    readonly agents: Member[],
    readonly extra: Member,
    readonly teams: string[],
    readonly tickets: TicketModel[],
  ) {}

  static async create(): Promise<World> {
    const ws = await createWorkspace(suite.ctx);
    const agents = [await addMember(suite.ctx, ws, 'editor'), await addMember(suite.ctx, ws, 'editor'), await addMember(suite.ctx, ws, 'editor')];
    const extra = await addMember(suite.ctx, ws, 'editor');
    const teams = [await createTeam(suite.ctx, ws, 'Team A'), await createTeam(suite.ctx, ws, 'Team B')];
    const specs: [string | null, string | null][] = [
      [teams[0]!, agents[0]!.userId],
      [teams[0]!, null],
      [teams[1]!, agents[1]!.userId],
      [teams[1]!, agents[2]!.userId],
      [null, agents[2]!.userId],
      [null, null],
    ];
    const tickets: TicketModel[] = [];
    for (const [team, assignee] of specs) {
      const t = await createTicket(suite.ctx, ws, { ...(team ? { team_id: team } : {}), ...(assignee ? { assignee_id: assignee } : {}) });
      tickets.push({ id: t.id, team, assignee });
    }
    return new World(ws, agents, extra, teams, tickets);
  }

  get tenantId() {
    return this.ws.tenantId;
  }
  /** Users a time entry may be attributed to right now. */
  members(): string[] {
    return [this.ws.ownerId, ...this.agents.map((a) => a.userId), ...(this.removed ? [] : [this.extra.userId])];
  }
  /** Every user a filter may name (including one removed from the workspace). */
  filterUsers(): string[] {
    return [this.ws.ownerId, ...this.agents.map((a) => a.userId), this.extra.userId];
  }

  async removeExtra(): Promise<void> {
    const res = await suite.ctx.http.delete(`/v1/members/${this.extra.userId}`).set(bearer(this.ws.ownerKey));
    ok(res, 204, 'remove member');
    this.removed = true;
  }

  async randomOp(rng: Rng, allowBackdate: boolean): Promise<void> {
    const ws = this.ws;
    const ops: [number, () => Promise<void>][] = [
      [5, async () => {
        const tk = rng.pick(this.tickets);
        const body: Record<string, unknown> = { minutes: rng.pick([1, 1440, rng.int(1, 480), rng.int(1, 60)]) };
        if (rng.chance(0.7)) body.billable = rng.chance(0.6);
        const user = rng.pick([undefined, ...this.members()]);
        if (user) body.user_id = user;
        if (rng.chance(0.75)) body.worked_on = rng.pick(this.workedOn);
        const e = await entry(ws, tk.id, body);
        this.entries.set(e.id, { ticket: tk.id, user: user ?? ws.ownerId, team: tk.team, minutes: body.minutes as number, billable: (body.billable as boolean | undefined) ?? true, worked_on: (body.worked_on as string | undefined) ?? null });
        this.log.push(`create entry ${e.id}`);
      }],
      [3, async () => {
        if (this.entries.size === 0) return;
        const id = rng.pick([...this.entries.keys()]);
        const m = this.entries.get(id)!;
        const body: Record<string, unknown> = {};
        while (Object.keys(body).length === 0) {
          if (rng.chance(0.4)) body.minutes = rng.int(1, 1440);
          if (rng.chance(0.3)) body.billable = rng.chance(0.5);
          if (rng.chance(0.3)) body.user_id = rng.pick([null, ...this.members()]);
          if (rng.chance(0.3)) body.worked_on = rng.pick([null, ...this.workedOn]);
        }
        ok(await api.patchEntry(ws, id, body), 200, 'patch entry');
        if ('minutes' in body) m.minutes = body.minutes as number;
        if ('billable' in body) m.billable = body.billable as boolean;
        if ('user_id' in body) m.user = body.user_id as string | null;
        if ('worked_on' in body) m.worked_on = body.worked_on as string | null;
        this.log.push(`patch entry ${id} ${JSON.stringify(body)}`);
      }],
      [1.5, async () => {
        if (this.entries.size === 0) return;
        const id = rng.pick([...this.entries.keys()]);
        ok(await api.deleteEntry(ws, id), 204, 'delete entry');
        this.entries.delete(id);
        this.log.push(`delete entry ${id}`);
      }],
      [2, async () => {
        const tk = rng.pick(this.tickets);
        const assignee = rng.pick([undefined, ws.ownerId, ...this.agents.map((a) => a.userId)]);
        const due = rng.pick([undefined, isoIn(-rng.int(1, 20)), isoIn(rng.int(1, 20))]);
        const t = await todo(ws, tk.id, { ...(assignee ? { assignee_id: assignee } : {}), ...(due ? { due_at: due } : {}) });
        this.todos.set(t.id, { ticket: tk.id, assignee: assignee ?? null, done: false, due: due ?? null });
      }],
      [2, async () => {
        if (this.todos.size === 0) return;
        const id = rng.pick([...this.todos.keys()]);
        const m = this.todos.get(id)!;
        const body: Record<string, unknown> = {};
        while (Object.keys(body).length === 0) {
          if (rng.chance(0.5)) body.done = rng.chance(0.6);
          if (rng.chance(0.25)) body.assignee_id = rng.pick([null, ...this.agents.map((a) => a.userId)]);
          if (rng.chance(0.25)) body.due_at = rng.pick([null, isoIn(-rng.int(1, 20)), isoIn(rng.int(1, 20))]);
          if (rng.chance(0.1)) body.title = `Renamed ${rng.int(1, 999)}`;
        }
        ok(await api.patchTodo(ws, id, body), 200, 'patch todo');
        if ('done' in body) m.done = body.done as boolean;
        if ('assignee_id' in body) m.assignee = body.assignee_id as string | null;
        if ('due_at' in body) m.due = body.due_at as string | null;
      }],
      [0.5, async () => {
        if (this.todos.size === 0) return;
        const id = rng.pick([...this.todos.keys()]);
        ok(await api.deleteTodo(ws, id), 204, 'delete todo');
        this.todos.delete(id);
      }],
      [3, async () => {
        const tk = rng.pick(this.tickets);
        const score = rng.int(1, 5);
        const c = await csat(ws, tk.id, score);
        this.csat.set(c.id, { ticket: tk.id, assignee: tk.assignee, score });
        this.log.push(`csat ${c.id}`);
      }],
      [0.8, async () => {
        const tk = rng.pick(this.tickets);
        const team = rng.pick([null, ...this.teams]);
        ok(await api.patchTicket(ws, tk.id, { team_id: team }), 200, 'move ticket');
        tk.team = team;
        this.log.push(`move ticket ${tk.id} to ${team}`);
      }],
      [0.8, async () => {
        const tk = rng.pick(this.tickets);
        const assignee = rng.pick([null, ...this.agents.map((a) => a.userId)]);
        ok(await api.patchTicket(ws, tk.id, { assignee_id: assignee }), 200, 'reassign ticket');
        tk.assignee = assignee;
      }],
      [allowBackdate ? 2 : 0, async () => {
        const table = rng.pick<SourceTable>(['time_entries', 'time_entries', 'csat_responses', 'todos']);
        const ids = [...(table === 'time_entries' ? this.entries : table === 'todos' ? this.todos : this.csat).keys()];
        if (ids.length === 0) return;
        const id = rng.pick(ids);
        const at = randomPast(rng);
        await backdate(this.tenantId, table, id, at);
        this.log.push(`backdate ${table} ${id} to ${at.toISOString()}`);
      }],
    ];
    const totalWeight = ops.reduce((n, [w]) => n + w, 0);
    let r = rng.next() * totalWeight;
    for (const [w, run] of ops) {
      if (r < w) return run();
      r -= w;
    }
    return ops[0]![1]();
  }

  /** The raw rows hold exactly what the model says (team at log time, assignee at response time, patches). */
  async rawRowsMatchModel(): Promise<void> {
    const t = this.tenantId;
    const entries = (
      await sql<{ id: string } & EntryModel>`select id::text, ticket_id::text as ticket, user_id::text as "user", team_id::text as team, minutes, billable, worked_on::text as worked_on
        from time_entries where tenant_id = ${t}`.execute(suite.ctx.db)
    ).rows;
    expect(Object.fromEntries(entries.map(({ id, ...rest }) => [id, rest]))).toEqual(Object.fromEntries(this.entries));
    const responses = (await sql<{ id: string; ticket: string; assignee: string | null; score: number }>`select id::text, ticket_id::text as ticket, assignee_id::text as assignee, score from csat_responses where tenant_id = ${t}`.execute(suite.ctx.db)).rows;
    expect(Object.fromEntries(responses.map(({ id, ...rest }) => [id, rest]))).toEqual(Object.fromEntries(this.csat));
    const todos = (
      await sql<{ id: string; ticket: string; assignee: string | null; done: boolean; due: Date | null }>`select id::text, ticket_id::text as ticket, assignee_id::text as assignee, done_at is not null as done, due_at as due from todos where tenant_id = ${t}`.execute(suite.ctx.db)
    ).rows;
    expect(Object.fromEntries(todos.map(({ id, due, ...rest }) => [id, { ...rest, due: due ? due.getTime() : null }]))).toEqual(
      Object.fromEntries([...this.todos].map(([id, m]) => [id, { ...m, due: m.due ? new Date(m.due).getTime() : null }])),
    );
  }

  /** The time queries of one comparison: every window × (no filter, small by_ticket cap, user, team, both). */
  timeQueries(rng: Rng): TimeQuery[] {
    const out: TimeQuery[] = [];
    for (const since_days of [1, 2, 7, 30, 180]) {
      out.push(
        { since_days },
        { since_days, by_ticket_limit: 3 },
        { since_days, user_id: rng.pick(this.filterUsers()) },
        { since_days, team_id: rng.pick(this.teams) },
        { since_days, user_id: rng.pick(this.filterUsers()), team_id: rng.pick(this.teams) },
      );
    }
    return out;
  }
}

export type Mismatch = { label: string; query: unknown; got: unknown; want: unknown };

/** Groups that hold no entry at all (entries 0): what a read shows when signed deltas cancel out. */
export const withoutEmptyGroups = (x: Summary): Summary => ({
  ...x,
  by_agent: x.by_agent.filter((r) => r.entries !== 0),
  by_day: x.by_day.filter((r) => r.minutes !== 0 || r.billable_minutes !== 0),
  by_team: x.by_team.filter((r) => r.minutes !== 0 || r.billable_minutes !== 0),
});

/** A failure message that says which mismatches are only empty (zero) group rows and shows the others. */
export function explain(mismatches: Mismatch[]) {
  const isTime = (m: Mismatch) => (m.got as Summary | undefined)?.by_agent !== undefined && (m.want as Summary | undefined)?.by_agent !== undefined;
  const emptyRowsOnly = (m: Mismatch) =>
    !m.label.endsWith('rules') && isTime(m) && isDeepStrictEqual(normSummary(withoutEmptyGroups(m.got as Summary)), normSummary(withoutEmptyGroups(m.want as Summary)));
  const others = mismatches.filter((m) => !emptyRowsOnly(m));
  const example = mismatches.find((m) => !m.label.endsWith('rules') && isTime(m) && emptyRowsOnly(m));
  return {
    mismatches: mismatches.length,
    onlyEmptyGroupRows: mismatches.length - others.length,
    emptyRowExample: example
      ? { label: example.label, query: example.query, rows: [...(example.got as Summary).by_agent, ...(example.got as Summary).by_day, ...(example.got as Summary).by_team].filter((r) => r.minutes === 0) }
      : null,
    others: others.slice(0, 3),
  };
}

/** Compares every endpoint answer with the raw aggregation; collects mismatches and rule violations. */
export async function compareAll(w: World, rng: Rng, label: string, mismatches: Mismatch[]): Promise<Map<string, unknown>> {
  const answers = new Map<string, unknown>();
  for (const q of w.timeQueries(rng)) {
    const got = await summary(w.ws, q);
    const want = await rawSummary(suite.ctx.db, w.tenantId, q);
    answers.set(`time ${JSON.stringify(q)}`, got);
    if (!isDeepStrictEqual(normSummary(got), normSummary(want))) mismatches.push({ label, query: q, got, want });
    const v = summaryRuleViolations(got);
    if (v.length) mismatches.push({ label: `${label}: rules`, query: q, got: v, want: [] });
  }
  for (const since of [1, 30, 365]) {
    const got = await aggregate(w.ws, since);
    const want = await rawCsat(suite.ctx.db, w.tenantId, since);
    answers.set(`csat ${since}`, got);
    if (!isDeepStrictEqual(normCsat(got), normCsat(want))) mismatches.push({ label, query: { csat: since }, got, want });
    const v = csatRuleViolations(got);
    if (v.length) mismatches.push({ label: `${label}: rules`, query: { csat: since }, got: v, want: [] });
  }
  return answers;
}

// ---------------------------------------------------------------------------------------------------------
