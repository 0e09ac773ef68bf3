import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { sql, type RawBuilder } from 'kysely';
import type { Db } from '../src/db';
import { newId } from '../src/lib/ids';
import { startTestApp, type TestContext } from './helpers/context';
import { addMember, bearer, createWorkspace, type Member, type Workspace } from './helpers/factories';
import { createTeam } from './helpers/teams';
import { createTicket } from './helpers/tickets';
import { eventually, sleep } from './helpers/wait';

// ---------------------------------------------------------------------------------------------------------
// Shapes
// ---------------------------------------------------------------------------------------------------------

interface Split {
  minutes: number;
  billable_minutes: number;
  non_billable_minutes: number;
}
interface Counts {
  total: number;
  open: number;
  done: number;
  overdue: number;
}
interface Summary {
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
interface CsatAggregate {
  since_days: number;
  overall: { responses: number; avg_score: number | null; distribution: Record<string, number> };
  per_agent: { assignee_id?: string; assignee_name?: string; responses: number; avg_score: number | null }[];
}
interface TimeQuery {
  since_days?: number;
  user_id?: string;
  team_id?: string;
  by_ticket_limit?: number;
}

const DAY = 24 * 3600 * 1000;
const SUMMARY = '/v1/time-tracking/summary';
const CSAT = '/v1/csat/aggregate';
const ZERO_COUNTS: Counts = { total: 0, open: 0, done: 0, overdue: 0 };
const ZERO_DISTRIBUTION = { '1': 0, '2': 0, '3': 0, '4': 0, '5': 0 };
const ROOT = path.resolve(__dirname, '..');
const TSX = path.join(ROOT, 'node_modules/.bin/tsx');

/** Small seeded PRNG (mulberry32), so a failing sequence can be replayed. */
function mulberry32(seed: number) {
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
type Rng = ReturnType<typeof mulberry32>;

const dayString = (offsetDays: number) => new Date(Date.now() - offsetDays * DAY).toISOString().slice(0, 10);
const isoIn = (days: number) => new Date(Date.now() + days * DAY).toISOString();

let ctx: TestContext;
const running = new Set<ChildProcess>();

beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  for (const child of running) child.kill('SIGKILL');
  await ctx.close();
});

// ---------------------------------------------------------------------------------------------------------
// HTTP helpers
// ---------------------------------------------------------------------------------------------------------

const api = {
  addEntry: (ws: Workspace, ticketId: string, body: Record<string, unknown>, token = ws.ownerKey) =>
    ctx.http.post(`/v1/tickets/${ticketId}/time-entries`).set(bearer(token)).send(body),
  listEntries: (ws: Workspace, ticketId: string, token = ws.ownerKey) => ctx.http.get(`/v1/tickets/${ticketId}/time-entries`).set(bearer(token)),
  patchEntry: (ws: Workspace, id: string, body: Record<string, unknown>, token = ws.ownerKey) =>
    ctx.http.patch(`/v1/time-entries/${id}`).set(bearer(token)).send(body),
  deleteEntry: (ws: Workspace, id: string, token = ws.ownerKey) => ctx.http.delete(`/v1/time-entries/${id}`).set(bearer(token)),
  addTodo: (ws: Workspace, ticketId: string, body: Record<string, unknown>, token = ws.ownerKey) =>
    ctx.http.post(`/v1/tickets/${ticketId}/todos`).set(bearer(token)).send(body),
  patchTodo: (ws: Workspace, id: string, body: Record<string, unknown>, token = ws.ownerKey) => ctx.http.patch(`/v1/todos/${id}`).set(bearer(token)).send(body),
  deleteTodo: (ws: Workspace, id: string, token = ws.ownerKey) => ctx.http.delete(`/v1/todos/${id}`).set(bearer(token)),
  addCsat: (ws: Workspace, ticketId: string, body: Record<string, unknown>, token = ws.ownerKey) =>
    ctx.http.post(`/v1/tickets/${ticketId}/csat`).set(bearer(token)).send(body),
  patchTicket: (ws: Workspace, ticketId: string, body: Record<string, unknown>) => ctx.http.patch(`/v1/tickets/${ticketId}`).set(bearer(ws.ownerKey)).send(body),
  summaryRaw: (ws: Workspace, q: Record<string, unknown> = {}, token = ws.ownerKey) => ctx.http.get(SUMMARY).query(q).set(bearer(token)),
  csatRaw: (ws: Workspace, q: Record<string, unknown> = {}, token = ws.ownerKey) => ctx.http.get(CSAT).query(q).set(bearer(token)),
};

function ok<T>(res: { status: number; body: unknown }, status: number, what: string): T {
  if (res.status !== status) throw new Error(`${what}: expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as T;
}

async function entry(ws: Workspace, ticketId: string, body: Record<string, unknown>): Promise<{ id: string; created_at: string }> {
  return ok(await api.addEntry(ws, ticketId, body), 201, 'add time entry');
}
async function todo(ws: Workspace, ticketId: string, body: Record<string, unknown>): Promise<{ id: string }> {
  return ok(await api.addTodo(ws, ticketId, { title: 'Call back', ...body }), 201, 'add todo');
}
async function csat(ws: Workspace, ticketId: string, score: number): Promise<{ id: string; assignee_id?: string }> {
  return ok(await api.addCsat(ws, ticketId, { score }), 201, 'add csat');
}
async function summary(ws: Workspace, q: TimeQuery = {}): Promise<Summary> {
  return ok(await api.summaryRaw(ws, q as Record<string, unknown>), 200, `GET summary ${JSON.stringify(q)}`);
}
async function aggregate(ws: Workspace, sinceDays?: number): Promise<CsatAggregate> {
  return ok(await api.csatRaw(ws, sinceDays === undefined ? {} : { since_days: sinceDays }), 200, `GET csat ${sinceDays}`);
}
async function ticketDetail(ws: Workspace, id: string) {
  return ok<{ time_total_minutes: number; time_billable_minutes: number; todo_counts: { open: number; done: number; overdue: number } }>(
    await ctx.http.get(`/v1/tickets/${id}`).set(bearer(ws.ownerKey)),
    200,
    'GET ticket',
  );
}

// ---------------------------------------------------------------------------------------------------------
// Direct SQL over raw rows (independent of src/domains/rollups)
// ---------------------------------------------------------------------------------------------------------

const split = (minutes: number, billable: number): Split => ({ minutes, billable_minutes: billable, non_billable_minutes: minutes - billable });

async function rawSummary(db: Db, tenantId: string, q: TimeQuery): Promise<Summary> {
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

async function rawCsat(db: Db, tenantId: string, sinceDays: number): Promise<CsatAggregate> {
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

const byKey = <T>(key: (x: T) => string | null | undefined) => (xs: T[]) => [...xs].sort((a, b) => String(key(a) ?? '').localeCompare(String(key(b) ?? '')));
/** Groupings as sets (sorted by their key); by_ticket keeps its order, which the spec fixes. */
const normSummary = (s: Summary): Summary => ({
  ...s,
  by_agent: byKey<Summary['by_agent'][number]>((x) => x.user_id)(s.by_agent),
  by_day: byKey<Summary['by_day'][number]>((x) => x.day)(s.by_day),
  by_team: byKey<Summary['by_team'][number]>((x) => x.team_id)(s.by_team),
  todos: { ...s.todos, by_assignee: byKey<Summary['todos']['by_assignee'][number]>((x) => x.assignee_id)(s.todos.by_assignee) },
});
const normCsat = (c: CsatAggregate): CsatAggregate => ({ ...c, per_agent: byKey<CsatAggregate['per_agent'][number]>((x) => x.assignee_id)(c.per_agent) });

/** The spec's arithmetic rules; returns the violations (empty when all hold). */
function summaryRuleViolations(s: Summary): string[] {
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
function csatRuleViolations(c: CsatAggregate): string[] {
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

type SourceTable = 'time_entries' | 'csat_responses' | 'todos';

/** Moves a raw row's created_at and rebuilds the workspace's buckets from raw rows, as a backfill would. */
async function backdate(tenantId: string, table: SourceTable, id: string, at: Date): Promise<void> {
  const r = await sql`update ${sql.table(table)} set created_at = ${at} where tenant_id = ${tenantId} and id = ${id}`.execute(ctx.db);
  if (Number(r.numAffectedRows) !== 1) throw new Error(`backdate: no ${table} row ${id}`);
  await ctx.services.rollups.rebuild(tenantId);
}

const journalCount = async (tenantId: string) =>
  (await sql<{ n: number }>`select count(*)::int as n from rollup_journal where tenant_id = ${tenantId}`.execute(ctx.db)).rows[0]!.n;
const bucketCount = async (tenantId: string) =>
  (await sql<{ n: number }>`select (select count(*) from time_buckets where tenant_id = ${tenantId}) + (select count(*) from csat_buckets where tenant_id = ${tenantId}) as n`.execute(ctx.db))
    .rows[0]!.n;
/** verify() found nothing: every list of differences it returns (time and csat at least) is empty. */
async function expectNoDifferences(tenantId: string): Promise<void> {
  const diff = (await ctx.services.rollups.verify(tenantId)) as unknown as Record<string, unknown[]>;
  expect(Object.keys(diff)).toEqual(expect.arrayContaining(['time', 'csat']));
  expect(Object.fromEntries(Object.entries(diff).filter(([, v]) => v.length > 0))).toEqual({});
}

// ---------------------------------------------------------------------------------------------------------
// A random world: 3 agents (+ one who gets removed), 2 teams plus no team, tickets with and without assignee
// ---------------------------------------------------------------------------------------------------------

interface TicketModel {
  id: string;
  team: string | null;
  assignee: string | null;
}
interface EntryModel {
  ticket: string;
  user: string | null;
  team: string | null;
  minutes: number;
  billable: boolean;
  worked_on: string | null;
}
interface TodoModel {
  ticket: string;
  assignee: string | null;
  done: boolean;
  due: string | null;
}

const WINDOW_EDGES = [1, 2, 7, 14, 30, 180, 365];

/** A time in the last 200 days (half of them in the last 3), never within 10 minutes of a window's edge. */
function randomPast(rng: Rng): Date {
  for (;;) {
    const ago = rng.chance(0.5) ? rng.next() * 3 * DAY : rng.next() * 200 * DAY;
    if (WINDOW_EDGES.every((d) => Math.abs(ago - d * DAY) > 10 * 60 * 1000)) return new Date(Date.now() - ago);
  }
}

class World {
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
    const ws = await createWorkspace(ctx);
    const agents = [await addMember(ctx, ws, 'editor'), await addMember(ctx, ws, 'editor'), await addMember(ctx, ws, 'editor')];
    const extra = await addMember(ctx, ws, 'editor');
    const teams = [await createTeam(ctx, ws, 'Team A'), await createTeam(ctx, ws, 'Team B')];
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
      const t = await createTicket(ctx, ws, { ...(team ? { team_id: team } : {}), ...(assignee ? { assignee_id: assignee } : {}) });
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
    const res = await ctx.http.delete(`/v1/members/${this.extra.userId}`).set(bearer(this.ws.ownerKey));
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
        from time_entries where tenant_id = ${t}`.execute(ctx.db)
    ).rows;
    expect(Object.fromEntries(entries.map(({ id, ...rest }) => [id, rest]))).toEqual(Object.fromEntries(this.entries));
    const responses = (await sql<{ id: string; ticket: string; assignee: string | null; score: number }>`select id::text, ticket_id::text as ticket, assignee_id::text as assignee, score from csat_responses where tenant_id = ${t}`.execute(ctx.db)).rows;
    expect(Object.fromEntries(responses.map(({ id, ...rest }) => [id, rest]))).toEqual(Object.fromEntries(this.csat));
    const todos = (
      await sql<{ id: string; ticket: string; assignee: string | null; done: boolean; due: Date | null }>`select id::text, ticket_id::text as ticket, assignee_id::text as assignee, done_at is not null as done, due_at as due from todos where tenant_id = ${t}`.execute(ctx.db)
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

type Mismatch = { label: string; query: unknown; got: unknown; want: unknown };

/** Groups that hold no entry at all (entries 0): what a read shows when signed deltas cancel out. */
const withoutEmptyGroups = (x: Summary): Summary => ({
  ...x,
  by_agent: x.by_agent.filter((r) => r.entries !== 0),
  by_day: x.by_day.filter((r) => r.minutes !== 0 || r.billable_minutes !== 0),
  by_team: x.by_team.filter((r) => r.minutes !== 0 || r.billable_minutes !== 0),
});

/** A failure message that says which mismatches are only empty (zero) group rows and shows the others. */
function explain(mismatches: Mismatch[]) {
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
async function compareAll(w: World, rng: Rng, label: string, mismatches: Mismatch[]): Promise<Map<string, unknown>> {
  const answers = new Map<string, unknown>();
  for (const q of w.timeQueries(rng)) {
    const got = await summary(w.ws, q);
    const want = await rawSummary(ctx.db, w.tenantId, q);
    answers.set(`time ${JSON.stringify(q)}`, got);
    if (!isDeepStrictEqual(normSummary(got), normSummary(want))) mismatches.push({ label, query: q, got, want });
    const v = summaryRuleViolations(got);
    if (v.length) mismatches.push({ label: `${label}: rules`, query: q, got: v, want: [] });
  }
  for (const since of [1, 30, 365]) {
    const got = await aggregate(w.ws, since);
    const want = await rawCsat(ctx.db, w.tenantId, since);
    answers.set(`csat ${since}`, got);
    if (!isDeepStrictEqual(normCsat(got), normCsat(want))) mismatches.push({ label, query: { csat: since }, got, want });
    const v = csatRuleViolations(got);
    if (v.length) mismatches.push({ label: `${label}: rules`, query: { csat: since }, got: v, want: [] });
  }
  return answers;
}

// ---------------------------------------------------------------------------------------------------------
// 1. Sources through HTTP
// ---------------------------------------------------------------------------------------------------------

describe('rollup sources over HTTP (no worker running)', () => {
  let ws: Workspace;
  let other: Workspace;
  let agent: Member;
  let viewer: Member;
  let teamId: string;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    other = await createWorkspace(ctx);
    agent = await addMember(ctx, ws, 'editor');
    viewer = await addMember(ctx, ws, 'viewer');
    teamId = await createTeam(ctx, ws, 'Billing');
  });

  test('time entries: create (defaults: billable, caller, no worked_on, ticket team), list oldest first, patch, delete', async () => {
    const t = await createTicket(ctx, ws, { team_id: teamId });
    const a = await api.addEntry(ws, t.id, { minutes: 30 });
    expect(a.status).toBe(201);
    expect(a.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      ticket_id: t.id,
      user_id: ws.ownerId,
      team_id: teamId,
      minutes: 30,
      billable: true,
      worked_on: null,
      created_at: expect.any(String),
    });
    const b = ok<{ id: string }>(await api.addEntry(ws, t.id, { minutes: 15, billable: false, user_id: agent.userId, worked_on: '2024-02-29' }), 201, 'b');
    expect(b).toMatchObject({ user_id: agent.userId, billable: false, worked_on: '2024-02-29', minutes: 15 });

    const list = await api.listEntries(ws, t.id);
    expect(list.status).toBe(200);
    expect(list.body.time_entries.map((e: { id: string }) => e.id)).toEqual([a.body.id, b.id]);

    const p = await api.patchEntry(ws, b.id, { minutes: 45, billable: true, user_id: null, worked_on: null });
    expect(p.status).toBe(200);
    expect(p.body).toEqual({ id: b.id, ticket_id: t.id, team_id: teamId, minutes: 45, billable: true, worked_on: null, created_at: expect.any(String) });
    // A partial patch leaves every other field alone.
    const p2 = await api.patchEntry(ws, a.body.id, { worked_on: '2025-01-02' });
    expect(p2.body).toMatchObject({ minutes: 30, billable: true, user_id: ws.ownerId, worked_on: '2025-01-02' });

    expect((await api.deleteEntry(ws, a.body.id)).status).toBe(204);
    expect((await api.deleteEntry(ws, a.body.id)).status).toBe(404);
    expect((await api.patchEntry(ws, a.body.id, { minutes: 5 })).status).toBe(404);
    expect((await api.listEntries(ws, t.id)).body.time_entries.map((e: { id: string }) => e.id)).toEqual([b.id]);
  });

  test('todos: create, mark done (done_at kept on a second done), undone, reassign, delete', async () => {
    const t = await createTicket(ctx, ws);
    const due = isoIn(2);
    const c = await api.addTodo(ws, t.id, { title: 'Ship replacement', assignee_id: agent.userId, due_at: due });
    expect(c.status).toBe(201);
    expect(c.body).toEqual({
      id: expect.any(String),
      ticket_id: t.id,
      title: 'Ship replacement',
      assignee_id: agent.userId,
      due_at: new Date(due).toISOString(),
      done: false,
      done_at: null,
      created_at: expect.any(String),
    });
    const d1 = ok<{ done: boolean; done_at: string }>(await api.patchTodo(ws, c.body.id, { done: true }), 200, 'done');
    expect(d1.done).toBe(true);
    expect(typeof d1.done_at).toBe('string');
    await sleep(5);
    const d2 = ok<{ done_at: string }>(await api.patchTodo(ws, c.body.id, { done: true, title: 'Shipped' }), 200, 'done again');
    expect(d2).toMatchObject({ done_at: d1.done_at, title: 'Shipped' });
    const u = ok<Record<string, unknown>>(await api.patchTodo(ws, c.body.id, { done: false, assignee_id: null, due_at: null }), 200, 'undone');
    expect(u).toMatchObject({ done: false, done_at: null, due_at: null });
    expect(u).not.toHaveProperty('assignee_id');
    expect((await api.deleteTodo(ws, c.body.id)).status).toBe(204);
    expect((await api.deleteTodo(ws, c.body.id)).status).toBe(404);
    expect((await api.patchTodo(ws, c.body.id, { done: true })).status).toBe(404);
  });

  test('csat: a response records the ticket assignee at that moment; a later reassignment does not move it', async () => {
    const t = await createTicket(ctx, ws, { assignee_id: agent.userId });
    const r = await api.addCsat(ws, t.id, { score: 4, comment: 'Quick and kind' });
    expect(r.status).toBe(201);
    expect(r.body).toEqual({ id: expect.any(String), ticket_id: t.id, assignee_id: agent.userId, score: 4, comment: 'Quick and kind', created_at: expect.any(String) });
    ok(await api.patchTicket(ws, t.id, { assignee_id: null }), 200, 'unassign');
    const r2 = await api.addCsat(ws, t.id, { score: 2 });
    expect(r2.status).toBe(201);
    expect(r2.body).not.toHaveProperty('assignee_id');
    expect(r2.body.comment).toBe('');
    const stored = await sql<{ id: string; assignee_id: string | null }>`select id::text, assignee_id::text from csat_responses where ticket_id = ${t.id}`.execute(ctx.db);
    expect(Object.fromEntries(stored.rows.map((x) => [x.id, x.assignee_id]))).toEqual({ [r.body.id]: agent.userId, [r2.body.id]: null });
  });

  test('validation: minutes 0/1441/1.5, score 0/6, bad dates, unknown fields and empty patches are 400', async () => {
    const t = await createTicket(ctx, ws);
    const e = await entry(ws, t.id, { minutes: 10 });
    const td = await todo(ws, t.id, {});
    const bad: [string, () => Promise<{ status: number; body: { code?: string } }>][] = [
      ['minutes 0', () => api.addEntry(ws, t.id, { minutes: 0 })],
      ['minutes 1441', () => api.addEntry(ws, t.id, { minutes: 1441 })],
      ['minutes 1.5', () => api.addEntry(ws, t.id, { minutes: 1.5 })],
      ['minutes missing', () => api.addEntry(ws, t.id, {})],
      ['minutes as string', () => api.addEntry(ws, t.id, { minutes: '10' })],
      ['worked_on not a date', () => api.addEntry(ws, t.id, { minutes: 10, worked_on: '2024-13-01' })],
      ['user_id not a uuid', () => api.addEntry(ws, t.id, { minutes: 10, user_id: 'bob' })],
      ['unknown field on entry', () => api.addEntry(ws, t.id, { minutes: 10, note: 'x' })],
      ['patch minutes 0', () => api.patchEntry(ws, e.id, { minutes: 0 })],
      ['patch minutes 1441', () => api.patchEntry(ws, e.id, { minutes: 1441 })],
      ['patch empty', () => api.patchEntry(ws, e.id, {})],
      ['patch unknown field', () => api.patchEntry(ws, e.id, { team_id: teamId })],
      ['todo without title', () => api.addTodo(ws, t.id, {})],
      ['todo blank title', () => api.addTodo(ws, t.id, { title: '   ' })],
      ['todo bad due_at', () => api.addTodo(ws, t.id, { title: 'x', due_at: 'tomorrow' })],
      ['todo unknown field', () => api.addTodo(ws, t.id, { title: 'x', priority: 'high' })],
      ['todo patch empty', () => api.patchTodo(ws, td.id, {})],
      ['todo patch unknown field', () => api.patchTodo(ws, td.id, { ticket_id: t.id })],
      ['score 6', () => api.addCsat(ws, t.id, { score: 6 })],
      ['score 0', () => api.addCsat(ws, t.id, { score: 0 })],
      ['score 4.5', () => api.addCsat(ws, t.id, { score: 4.5 })],
      ['csat unknown field', () => api.addCsat(ws, t.id, { score: 5, assignee_id: agent.userId })],
    ];
    for (const [name, call] of bad) {
      const res = await call();
      expect({ name, status: res.status, code: res.body.code }).toEqual({ name, status: 400, code: 'validation_failed' });
    }
    // Nothing of that was stored.
    expect((await api.listEntries(ws, t.id)).body.time_entries).toHaveLength(1);
    expect((await sql<{ n: number }>`select count(*)::int as n from csat_responses where ticket_id = ${t.id}`.execute(ctx.db)).rows[0]!.n).toBe(0);
    expect((await ticketDetail(ws, t.id)).todo_counts).toEqual({ open: 1, done: 0, overdue: 0 });
  });

  test('unknown user_id or assignee_id (including a member of another workspace) is 422 member_unknown', async () => {
    const t = await createTicket(ctx, ws);
    const e = await entry(ws, t.id, { minutes: 10 });
    const td = await todo(ws, t.id, {});
    for (const stranger of [newId(), other.ownerId]) {
      for (const res of [
        await api.addEntry(ws, t.id, { minutes: 10, user_id: stranger }),
        await api.patchEntry(ws, e.id, { user_id: stranger }),
        await api.addTodo(ws, t.id, { title: 'x', assignee_id: stranger }),
        await api.patchTodo(ws, td.id, { assignee_id: stranger }),
      ]) {
        expect({ status: res.status, code: res.body.code }).toEqual({ status: 422, code: 'member_unknown' });
      }
    }
    const entries = (await api.listEntries(ws, t.id)).body.time_entries;
    expect(entries).toHaveLength(1);
    expect(entries[0].user_id).toBe(ws.ownerId);
  });

  test("another workspace's ticket, entry or todo is 404 and untouched; malformed path ids are 404", async () => {
    const theirs = await createTicket(ctx, other);
    const theirEntry = await entry(other, theirs.id, { minutes: 20 });
    const theirTodo = await todo(other, theirs.id, {});
    for (const res of [
      await api.addEntry(ws, theirs.id, { minutes: 10 }),
      await api.listEntries(ws, theirs.id),
      await api.patchEntry(ws, theirEntry.id, { minutes: 99 }),
      await api.deleteEntry(ws, theirEntry.id),
      await api.addTodo(ws, theirs.id, { title: 'x' }),
      await api.patchTodo(ws, theirTodo.id, { done: true }),
      await api.deleteTodo(ws, theirTodo.id),
      await api.addCsat(ws, theirs.id, { score: 1 }),
      await api.addEntry(ws, 'not-a-uuid', { minutes: 10 }),
      await api.patchEntry(ws, 'not-a-uuid', { minutes: 10 }),
      await api.deleteTodo(ws, 'not-a-uuid'),
    ]) {
      expect(res.status).toBe(404);
    }
    const list = ok<{ time_entries: { id: string; minutes: number }[] }>(await api.listEntries(other, theirs.id), 200, 'their list');
    expect(list.time_entries).toEqual([expect.objectContaining({ id: theirEntry.id, minutes: 20 })]);
    expect((await ticketDetail(other, theirs.id)).todo_counts).toEqual({ open: 1, done: 0, overdue: 0 });
    expect((await aggregate(other, 1)).overall.responses).toBe(0);
  });

  test('a viewer gets 403 insufficient_role on every write, and may read the list and both rollups', async () => {
    const t = await createTicket(ctx, ws);
    const e = await entry(ws, t.id, { minutes: 10 });
    const td = await todo(ws, t.id, {});
    for (const res of [
      await api.addEntry(ws, t.id, { minutes: 10 }, viewer.token),
      await api.patchEntry(ws, e.id, { minutes: 11 }, viewer.token),
      await api.deleteEntry(ws, e.id, viewer.token),
      await api.addTodo(ws, t.id, { title: 'x' }, viewer.token),
      await api.patchTodo(ws, td.id, { done: true }, viewer.token),
      await api.deleteTodo(ws, td.id, viewer.token),
      await api.addCsat(ws, t.id, { score: 5 }, viewer.token),
    ]) {
      expect({ status: res.status, code: res.body.code }).toEqual({ status: 403, code: 'insufficient_role' });
    }
    const list = await api.listEntries(ws, t.id, viewer.token);
    expect(list.status).toBe(200);
    expect(list.body.time_entries).toEqual([expect.objectContaining({ id: e.id, minutes: 10 })]);
    expect((await api.summaryRaw(ws, {}, viewer.token)).status).toBe(200);
    expect((await api.csatRaw(ws, {}, viewer.token)).status).toBe(200);
    expect((await ticketDetail(ws, t.id)).todo_counts).toEqual({ open: 1, done: 0, overdue: 0 });
  });

  test('ticket detail: time_total_minutes, time_billable_minutes and todo_counts follow the sources', async () => {
    const t = await createTicket(ctx, ws);
    expect(await ticketDetail(ws, t.id)).toMatchObject({ time_total_minutes: 0, time_billable_minutes: 0, todo_counts: { open: 0, done: 0, overdue: 0 } });
    const a = await entry(ws, t.id, { minutes: 30 });
    const b = await entry(ws, t.id, { minutes: 20, billable: false });
    expect(await ticketDetail(ws, t.id)).toMatchObject({ time_total_minutes: 50, time_billable_minutes: 30 });
    ok(await api.patchEntry(ws, b.id, { minutes: 25, billable: true }), 200, 'patch');
    expect(await ticketDetail(ws, t.id)).toMatchObject({ time_total_minutes: 55, time_billable_minutes: 55 });
    ok(await api.deleteEntry(ws, a.id), 204, 'delete');
    expect(await ticketDetail(ws, t.id)).toMatchObject({ time_total_minutes: 25, time_billable_minutes: 25 });

    const late = await todo(ws, t.id, { due_at: isoIn(-1) });
    await todo(ws, t.id, { due_at: isoIn(1) });
    const done = await todo(ws, t.id, {});
    ok(await api.patchTodo(ws, done.id, { done: true }), 200, 'done');
    expect((await ticketDetail(ws, t.id)).todo_counts).toEqual({ open: 2, done: 1, overdue: 1 });
    ok(await api.patchTodo(ws, late.id, { done: true }), 200, 'late done');
    expect((await ticketDetail(ws, t.id)).todo_counts).toEqual({ open: 1, done: 2, overdue: 0 });
    ok(await api.deleteTodo(ws, done.id), 204, 'delete todo');
    expect((await ticketDetail(ws, t.id)).todo_counts).toEqual({ open: 1, done: 1, overdue: 0 });
  });
});

// ---------------------------------------------------------------------------------------------------------
// Query validation
// ---------------------------------------------------------------------------------------------------------

describe('rollup queries', () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
  });

  test.each([
    ['unknown parameter', SUMMARY, { agent_id: newId() }],
    ['unknown parameter with a valid one', SUMMARY, { since_days: '7', foo: '1' }],
    ['since_days 0', SUMMARY, { since_days: '0' }],
    ['since_days 181', SUMMARY, { since_days: '181' }],
    ['since_days not an integer', SUMMARY, { since_days: '1.5' }],
    ['since_days negative', SUMMARY, { since_days: '-1' }],
    ['since_days empty', SUMMARY, { since_days: '' }],
    ['since_days twice', SUMMARY, 'since_days=1&since_days=2'],
    ['user_id not a uuid', SUMMARY, { user_id: 'me' }],
    ['team_id not a uuid', SUMMARY, { team_id: '42' }],
    ['by_ticket_limit 0', SUMMARY, { by_ticket_limit: '0' }],
    ['csat since_days 0', CSAT, { since_days: '0' }],
    ['csat since_days 366', CSAT, { since_days: '366' }],
    ['csat user_id (not a csat filter)', CSAT, { user_id: newId() }],
    ['csat team_id (not a csat filter)', CSAT, { team_id: newId() }],
  ])('%s → 400 validation_failed', async (_name, route, q) => {
    const res = await ctx.http.get(route).query(q).set(bearer(ws.ownerKey));
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
  });

  test('defaults: since_days 14 and by_ticket_limit 50 for time, since_days 30 for csat; the bounds 1, 180 and 365 are accepted', async () => {
    expect((await summary(ws)).since_days).toBe(14);
    expect((await summary(ws)).todos.by_ticket_limit).toBe(50);
    expect((await aggregate(ws)).since_days).toBe(30);
    expect((await summary(ws, { since_days: 1 })).since_days).toBe(1);
    expect((await summary(ws, { since_days: 180 })).since_days).toBe(180);
    expect((await aggregate(ws, 1)).since_days).toBe(1);
    expect((await aggregate(ws, 365)).since_days).toBe(365);
  });

  test('the default windows really are 14 and 30 days: entries 13 days old count, 15 days old do not', async () => {
    const w = await createWorkspace(ctx);
    const t = await createTicket(ctx, w);
    const inside = await entry(w, t.id, { minutes: 13 });
    const outside = await entry(w, t.id, { minutes: 15 });
    await backdate(w.tenantId, 'time_entries', inside.id, new Date(Date.now() - 13 * DAY));
    await backdate(w.tenantId, 'time_entries', outside.id, new Date(Date.now() - 15 * DAY));
    const c29 = await csat(w, t.id, 5);
    const c31 = await csat(w, t.id, 1);
    await backdate(w.tenantId, 'csat_responses', c29.id, new Date(Date.now() - 29 * DAY));
    await backdate(w.tenantId, 'csat_responses', c31.id, new Date(Date.now() - 31 * DAY));
    expect((await summary(w)).total.minutes).toBe(13);
    expect((await aggregate(w)).overall).toEqual({ responses: 1, avg_score: 5, distribution: { ...ZERO_DISTRIBUTION, '5': 1 } });
  });
});

// ---------------------------------------------------------------------------------------------------------
// 3. Spec rules and semantics as named tests
// ---------------------------------------------------------------------------------------------------------

describe('time-tracking summary: semantics and spec rules', () => {
  test('an empty window answers zeroes with every key present (fresh workspace, and one with only old data)', async () => {
    const ws = await createWorkspace(ctx);
    const empty = (since_days: number, by_ticket_limit = 50): Summary => ({
      since_days,
      total: { entries: 0, minutes: 0, billable_minutes: 0, non_billable_minutes: 0 },
      by_agent: [],
      by_day: [],
      by_team: [],
      todos: { total: ZERO_COUNTS, by_assignee: [], by_ticket: [], by_ticket_limit },
    });
    expect(await summary(ws)).toStrictEqual(empty(14));
    expect(await summary(ws, { since_days: 180, by_ticket_limit: 7 })).toStrictEqual(empty(180, 7));
    expect(await aggregate(ws)).toStrictEqual({ since_days: 30, overall: { responses: 0, avg_score: null, distribution: ZERO_DISTRIBUTION }, per_agent: [] });

    // Data older than the window, folded into buckets, still answers zeroes.
    const t = await createTicket(ctx, ws);
    const e = await entry(ws, t.id, { minutes: 90, worked_on: dayString(100) });
    const td = await todo(ws, t.id, { due_at: isoIn(-50) });
    const c = await csat(ws, t.id, 3);
    await backdate(ws.tenantId, 'time_entries', e.id, new Date(Date.now() - 100 * DAY));
    await backdate(ws.tenantId, 'todos', td.id, new Date(Date.now() - 100 * DAY));
    await backdate(ws.tenantId, 'csat_responses', c.id, new Date(Date.now() - 100 * DAY));
    expect(await bucketCount(ws.tenantId)).toBeGreaterThan(0);
    expect(await summary(ws, { since_days: 30 })).toStrictEqual(empty(30));
    expect(await aggregate(ws, 30)).toStrictEqual({ since_days: 30, overall: { responses: 0, avg_score: null, distribution: ZERO_DISTRIBUTION }, per_agent: [] });
    expect((await summary(ws, { since_days: 180 })).total.minutes).toBe(90);
  });

  test('per-agent, per-day and per-team minutes each sum to total.minutes; billable + non_billable = minutes at every level; null keys kept', async () => {
    const ws = await createWorkspace(ctx);
    const a1 = await addMember(ctx, ws, 'editor');
    const a2 = await addMember(ctx, ws, 'editor');
    const team = await createTeam(ctx, ws, 'Tier 2');
    const inTeam = await createTicket(ctx, ws, { team_id: team });
    const noTeam = await createTicket(ctx, ws);
    const d1 = dayString(1);
    const d2 = dayString(2);
    await entry(ws, inTeam.id, { minutes: 30, user_id: a1.userId, worked_on: d1 });
    await entry(ws, inTeam.id, { minutes: 20, billable: false, user_id: a1.userId, worked_on: d2 });
    await entry(ws, noTeam.id, { minutes: 45, user_id: a2.userId, worked_on: d1 });
    await entry(ws, noTeam.id, { minutes: 5, billable: false, user_id: a2.userId });
    const nobody = await entry(ws, inTeam.id, { minutes: 7 });
    ok(await api.patchEntry(ws, nobody.id, { user_id: null }), 200, 'unattribute');

    for (const phase of ['journal only', 'after fold']) {
      if (phase === 'after fold') await ctx.services.rollups.fold(ws.tenantId);
      const s = await summary(ws, { since_days: 1 });
      expect({ phase, rules: summaryRuleViolations(s) }).toEqual({ phase, rules: [] });
      expect(s.total).toEqual({ entries: 5, minutes: 107, billable_minutes: 82, non_billable_minutes: 25 });
      // Exact rows (rows that hold no entry are the subject of the "no zero rows" test, not of this one).
      expect(normSummary(withoutEmptyGroups(s)).by_agent).toEqual(
        normSummary({ ...s, by_agent: [
          { user_id: a1.userId, user_name: 'editor person', entries: 2, minutes: 50, billable_minutes: 30, non_billable_minutes: 20 },
          { user_id: a2.userId, user_name: 'editor person', entries: 2, minutes: 50, billable_minutes: 45, non_billable_minutes: 5 },
          { entries: 1, minutes: 7, billable_minutes: 7, non_billable_minutes: 0 },
        ] }).by_agent,
      );
      expect(normSummary(withoutEmptyGroups(s)).by_day).toEqual([
        { day: d2, minutes: 20, billable_minutes: 0, non_billable_minutes: 20 },
        { day: d1, minutes: 75, billable_minutes: 75, non_billable_minutes: 0 },
        { day: null, minutes: 12, billable_minutes: 7, non_billable_minutes: 5 },
      ].sort((a, b) => String(a.day ?? '').localeCompare(String(b.day ?? ''))));
      expect(normSummary(withoutEmptyGroups(s)).by_team).toEqual(
        normSummary({ ...s, by_team: [
          { team_id: team, team_name: 'Tier 2', minutes: 57, billable_minutes: 37, non_billable_minutes: 20 },
          { minutes: 50, billable_minutes: 45, non_billable_minutes: 5 },
        ] }).by_team,
      );
    }
  });

  test('the window is created_at within since_days of now (not worked_on); the edge day counts only its part inside the window', async () => {
    const ws = await createWorkspace(ctx);
    const t = await createTicket(ctx, ws);
    // Worked long ago, logged now: inside every window, under its worked_on day.
    await entry(ws, t.id, { minutes: 1, worked_on: '2020-01-01' });
    // Logged 3 days ago about today: outside since_days=2, inside 7.
    const three = await entry(ws, t.id, { minutes: 10, worked_on: dayString(0) });
    await backdate(ws.tenantId, 'time_entries', three.id, new Date(Date.now() - 3 * DAY));
    // The edge day of since_days=7: one entry just inside the cutoff, one just outside, same UTC day when possible.
    const cutoff = Date.now() - 7 * DAY;
    const edgeStart = Date.UTC(new Date(cutoff).getUTCFullYear(), new Date(cutoff).getUTCMonth(), new Date(cutoff).getUTCDate());
    const insideAt = cutoff + Math.max(60_000, Math.min(3600_000, (edgeStart + DAY - cutoff) / 2));
    const outsideAt = cutoff - Math.max(60_000, Math.min(3600_000, (cutoff - edgeStart) / 2));
    const inside = await entry(ws, t.id, { minutes: 100 });
    const outside = await entry(ws, t.id, { minutes: 1000 });
    await backdate(ws.tenantId, 'time_entries', inside.id, new Date(insideAt));
    await backdate(ws.tenantId, 'time_entries', outside.id, new Date(outsideAt));

    const check = async (phase: string) => {
      const got = Object.fromEntries(await Promise.all([1, 2, 7, 8].map(async (d) => [d, (await summary(ws, { since_days: d })).total.minutes])));
      expect({ phase, got }).toEqual({ phase, got: { 1: 1, 2: 1, 7: 111, 8: 1111 } });
    };
    await check('buckets only');
    // Edits journal deltas for the edge day and for older days: still exact before and after the fold.
    ok(await api.patchEntry(ws, inside.id, { minutes: 200 }), 200, 'patch inside');
    ok(await api.patchEntry(ws, outside.id, { minutes: 1100 }), 200, 'patch outside');
    ok(await api.patchEntry(ws, three.id, { billable: false }), 200, 'patch three');
    const check2 = async (phase: string) => {
      const got = Object.fromEntries(await Promise.all([1, 2, 7, 8].map(async (d) => [d, (await summary(ws, { since_days: d })).total])));
      expect({ phase, got }).toEqual({
        phase,
        got: {
          1: { entries: 1, ...split(1, 1) },
          2: { entries: 1, ...split(1, 1) },
          7: { entries: 3, ...split(211, 201) },
          8: { entries: 4, ...split(1311, 1301) },
        },
      });
    };
    await check2('journal');
    await ctx.services.rollups.fold(ws.tenantId);
    await check2('folded');
    await expectNoDifferences(ws.tenantId);
  });

  test("an entry's team is the ticket's team when it was logged: moving the ticket later does not move past entries", async () => {
    const ws = await createWorkspace(ctx);
    const teamA = await createTeam(ctx, ws, 'A');
    const teamB = await createTeam(ctx, ws, 'B');
    const t = await createTicket(ctx, ws, { team_id: teamA });
    const first = await entry(ws, t.id, { minutes: 30 });
    ok(await api.patchTicket(ws, t.id, { team_id: teamB }), 200, 'move to B');
    await entry(ws, t.id, { minutes: 20 });
    ok(await api.patchTicket(ws, t.id, { team_id: null }), 200, 'no team');
    await entry(ws, t.id, { minutes: 5 });
    // Editing the old entry keeps its team.
    ok(await api.patchEntry(ws, first.id, { minutes: 31 }), 200, 'edit old');
    for (const phase of ['journal', 'folded']) {
      if (phase === 'folded') await ctx.services.rollups.fold(ws.tenantId);
      const s = await summary(ws);
      expect({ phase, teams: normSummary(s).by_team }).toEqual({
        phase,
        teams: normSummary({ ...s, by_team: [
          { team_id: teamA, team_name: 'A', ...split(31, 31) },
          { team_id: teamB, team_name: 'B', ...split(20, 20) },
          split(5, 5),
        ] }).by_team,
      });
      expect((await summary(ws, { team_id: teamA })).total.minutes).toBe(31);
      expect((await summary(ws, { team_id: teamB })).total.minutes).toBe(20);
    }
  });

  test('removing a member moves their minutes to the by_agent row without user_id; a user_id filter on them still finds them', async () => {
    const ws = await createWorkspace(ctx);
    const leaver = await addMember(ctx, ws, 'editor');
    const stayer = await addMember(ctx, ws, 'editor');
    const t = await createTicket(ctx, ws);
    await entry(ws, t.id, { minutes: 45, user_id: leaver.userId });
    await entry(ws, t.id, { minutes: 15, user_id: stayer.userId, billable: false });
    await ctx.services.rollups.fold(ws.tenantId);
    await entry(ws, t.id, { minutes: 10, user_id: leaver.userId });
    const before = await summary(ws);
    expect(before.by_agent).toContainEqual({ user_id: leaver.userId, user_name: 'editor person', entries: 2, ...split(55, 55) });

    ok(await ctx.http.delete(`/v1/members/${leaver.userId}`).set(bearer(ws.ownerKey)), 204, 'remove member');
    for (const phase of ['half folded', 'folded']) {
      if (phase === 'folded') await ctx.services.rollups.fold(ws.tenantId);
      const s = await summary(ws);
      expect({ phase, by_agent: normSummary(s).by_agent }).toEqual({
        phase,
        by_agent: normSummary({ ...s, by_agent: [{ entries: 2, ...split(55, 55) }, { user_id: stayer.userId, user_name: 'editor person', entries: 1, ...split(15, 0) }] }).by_agent,
      });
      expect(s.total).toEqual(before.total);
      const only = await summary(ws, { user_id: leaver.userId });
      expect(only.by_agent).toEqual([{ entries: 2, ...split(55, 55) }]);
    }
    // The removed user cannot be attributed new time.
    expect((await api.addEntry(ws, t.id, { minutes: 5, user_id: leaver.userId })).body.code).toBe('member_unknown');
  });

  test('no zero rows: an entry created then deleted, or moved to another user/day, leaves nothing behind (journal and folded)', async () => {
    const ws = await createWorkspace(ctx);
    const a1 = await addMember(ctx, ws, 'editor');
    const a2 = await addMember(ctx, ws, 'editor');
    const team = await createTeam(ctx, ws, 'Only');
    const t = await createTicket(ctx, ws, { team_id: team });
    const moved = await entry(ws, t.id, { minutes: 40, user_id: a1.userId, worked_on: dayString(1) });
    await ctx.services.rollups.fold(ws.tenantId);
    ok(await api.patchEntry(ws, moved.id, { user_id: a2.userId, worked_on: dayString(2) }), 200, 'move');
    const gone = await entry(ws, t.id, { minutes: 25, user_id: a1.userId, worked_on: dayString(3) });
    ok(await api.deleteEntry(ws, gone.id), 204, 'delete');
    const t2 = await createTicket(ctx, ws);
    const gone2 = await entry(ws, t2.id, { minutes: 5 });
    await ctx.services.rollups.fold(ws.tenantId);
    ok(await api.deleteEntry(ws, gone2.id), 204, 'delete folded');
    for (const phase of ['journal', 'folded']) {
      if (phase === 'folded') await ctx.services.rollups.fold(ws.tenantId);
      const s = await summary(ws);
      expect({ phase, by_agent: s.by_agent, by_day: s.by_day, by_team: s.by_team }).toEqual({
        phase,
        by_agent: [{ user_id: a2.userId, user_name: 'editor person', entries: 1, ...split(40, 40) }],
        by_day: [{ day: dayString(2), ...split(40, 40) }],
        by_team: [{ team_id: team, team_name: 'Only', ...split(40, 40) }],
      });
    }
  });

  test('user_id narrows time to that user and todos to that assignee; team_id narrows time to the entry team and todos to the ticket team', async () => {
    const ws = await createWorkspace(ctx);
    const a1 = await addMember(ctx, ws, 'editor');
    const a2 = await addMember(ctx, ws, 'editor');
    const teamA = await createTeam(ctx, ws, 'A');
    const teamB = await createTeam(ctx, ws, 'B');
    const tA = await createTicket(ctx, ws, { team_id: teamA });
    const tB = await createTicket(ctx, ws, { team_id: teamB });
    await entry(ws, tA.id, { minutes: 10, user_id: a1.userId });
    await entry(ws, tA.id, { minutes: 20, user_id: a2.userId });
    await entry(ws, tB.id, { minutes: 40, user_id: a1.userId });
    await todo(ws, tA.id, { assignee_id: a1.userId });
    await todo(ws, tA.id, { assignee_id: a2.userId, due_at: isoIn(-1) });
    await todo(ws, tB.id, { assignee_id: a1.userId });
    await todo(ws, tB.id, {});
    // The ticket moves: time stays with team B (logged there), todos follow the ticket's current team.
    ok(await api.patchTicket(ws, tB.id, { team_id: teamA }), 200, 'move');

    const u1 = await summary(ws, { user_id: a1.userId });
    expect(u1.total.minutes).toBe(50);
    expect(u1.by_agent.map((r) => r.user_id)).toEqual([a1.userId]);
    expect(u1.todos.total).toEqual({ total: 2, open: 2, done: 0, overdue: 0 });
    expect(u1.todos.by_assignee.map((r) => r.assignee_id)).toEqual([a1.userId]);

    const A = await summary(ws, { team_id: teamA });
    expect(A.total.minutes).toBe(30);
    expect(A.by_team.map((r) => r.team_id)).toEqual([teamA]);
    expect(A.todos.total).toEqual({ total: 4, open: 4, done: 0, overdue: 1 });
    const B = await summary(ws, { team_id: teamB });
    expect(B.total.minutes).toBe(40);
    expect(B.todos.total).toEqual(ZERO_COUNTS);

    const both = await summary(ws, { user_id: a2.userId, team_id: teamA });
    expect(both.total).toEqual({ entries: 1, ...split(20, 20) });
    expect(both.todos.total).toEqual({ total: 1, open: 1, done: 0, overdue: 1 });
    expect(both.todos.by_ticket).toEqual([{ ticket_id: tA.id, ticket_subject: tA.subject, total: 1, open: 1, done: 0, overdue: 1 }]);

    // A well-formed id that matches nothing narrows to nothing (it is not dropped).
    const none = await summary(ws, { user_id: newId() });
    expect(none.total.minutes).toBe(0);
    expect(none.todos.total).toEqual(ZERO_COUNTS);
  });

  test('todos count by creation in the window; overdue = open with due_at in the past', async () => {
    const ws = await createWorkspace(ctx);
    const t = await createTicket(ctx, ws);
    const old = await todo(ws, t.id, { due_at: isoIn(-30) });
    await backdate(ws.tenantId, 'todos', old.id, new Date(Date.now() - 10 * DAY));
    await todo(ws, t.id, { due_at: isoIn(-1) }); // open, overdue
    await todo(ws, t.id, { due_at: isoIn(1) }); // open, not yet due
    await todo(ws, t.id, {}); // open, no due date
    const doneLate = await todo(ws, t.id, { due_at: isoIn(-2) });
    ok(await api.patchTodo(ws, doneLate.id, { done: true }), 200, 'done'); // done: never overdue
    expect((await summary(ws, { since_days: 7 })).todos.total).toEqual({ total: 4, open: 3, done: 1, overdue: 1 });
    expect((await summary(ws, { since_days: 30 })).todos.total).toEqual({ total: 5, open: 4, done: 1, overdue: 2 });
  });

  test('todos.by_ticket is ordered by open desc, total desc, ticket id, and capped by by_ticket_limit; nothing else is capped', async () => {
    const ws = await createWorkspace(ctx);
    const agents = [await addMember(ctx, ws, 'editor'), await addMember(ctx, ws, 'editor'), await addMember(ctx, ws, 'editor')];
    const tickets = [];
    for (let i = 0; i < 5; i += 1) tickets.push(await createTicket(ctx, ws));
    const [t1, t2, t3, t4, t5] = tickets as [(typeof tickets)[number], (typeof tickets)[number], (typeof tickets)[number], (typeof tickets)[number], (typeof tickets)[number]];
    const give = async (t: { id: string }, open: number, done: number) => {
      for (let i = 0; i < open + done; i += 1) {
        const x = await todo(ws, t.id, { assignee_id: agents[i % 3]!.userId });
        if (i >= open) ok(await api.patchTodo(ws, x.id, { done: true }), 200, 'done');
      }
    };
    await give(t1, 2, 0); // open 2, total 2
    await give(t2, 2, 1); // open 2, total 3
    await give(t3, 1, 4); // open 1, total 5
    await give(t4, 0, 1); // open 0, total 1
    await give(t5, 2, 0); // ties with t1: ticket id decides
    for (const [i, a] of agents.entries()) await entry(ws, t1.id, { minutes: 10 + i, user_id: a.userId });

    const [first, second] = [t1, t5].sort((a, b) => (a.id < b.id ? -1 : 1)) as [{ id: string }, { id: string }];
    const full = await summary(ws);
    expect(full.todos.by_ticket.map((r) => r.ticket_id)).toEqual([t2.id, first.id, second.id, t3.id, t4.id]);
    expect(full.todos.by_ticket[0]).toEqual({ ticket_id: t2.id, ticket_subject: t2.subject, total: 3, open: 2, done: 1, overdue: 0 });
    expect(full.todos.by_ticket_limit).toBe(50);

    const capped = await summary(ws, { by_ticket_limit: 2 });
    expect(capped.todos.by_ticket_limit).toBe(2);
    expect(capped.todos.by_ticket.map((r) => r.ticket_id)).toEqual([t2.id, first.id]);
    // Totals and the other groupings are not capped.
    expect(capped.todos.total).toEqual({ total: 13, open: 7, done: 6, overdue: 0 });
    expect(capped.todos.by_assignee).toHaveLength(3);
    expect(capped.by_agent).toHaveLength(3);
    expect(capped.by_agent.reduce((n, r) => n + r.minutes, 0)).toBe(33);
    const { by_ticket: _a, by_ticket_limit: _b, ...restCapped } = capped.todos;
    const { by_ticket: _c, by_ticket_limit: _d, ...restFull } = full.todos;
    expect(restCapped).toEqual(restFull);
    expect({ ...capped, todos: null }).toEqual({ ...full, todos: null });
  });
});

describe('csat aggregate: semantics and spec rules', () => {
  test('distribution has keys "1".."5", avg_score is the exact mean, per_agent keeps the no-assignee row and sums to responses', async () => {
    const ws = await createWorkspace(ctx);
    const a1 = await addMember(ctx, ws, 'editor');
    const a2 = await addMember(ctx, ws, 'editor');
    const t1 = await createTicket(ctx, ws, { assignee_id: a1.userId });
    const t2 = await createTicket(ctx, ws, { assignee_id: a2.userId });
    const t0 = await createTicket(ctx, ws);
    for (const s of [5, 4, 4]) await csat(ws, t1.id, s);
    await csat(ws, t2.id, 3);
    for (const s of [1, 2]) await csat(ws, t0.id, s);
    for (const phase of ['journal', 'folded']) {
      if (phase === 'folded') await ctx.services.rollups.fold(ws.tenantId);
      const c = await aggregate(ws);
      expect({ phase, overall: c.overall }).toStrictEqual({ phase, overall: { responses: 6, avg_score: 19 / 6, distribution: { '1': 1, '2': 1, '3': 1, '4': 2, '5': 1 } } });
      expect({ phase, per_agent: normCsat(c).per_agent }).toEqual({
        phase,
        per_agent: normCsat({ ...c, per_agent: [
          { assignee_id: a1.userId, assignee_name: 'editor person', responses: 3, avg_score: 13 / 3 },
          { assignee_id: a2.userId, assignee_name: 'editor person', responses: 1, avg_score: 3 },
          { responses: 2, avg_score: 1.5 },
        ] }).per_agent,
      });
      expect(csatRuleViolations(c)).toEqual([]);
    }
  });

  test('responses count in the window by created_at; the rated agent is the assignee at response time', async () => {
    const ws = await createWorkspace(ctx);
    const a1 = await addMember(ctx, ws, 'editor');
    const a2 = await addMember(ctx, ws, 'editor');
    const t = await createTicket(ctx, ws, { assignee_id: a1.userId });
    const old = await csat(ws, t.id, 1);
    await backdate(ws.tenantId, 'csat_responses', old.id, new Date(Date.now() - 40 * DAY));
    await csat(ws, t.id, 5);
    ok(await api.patchTicket(ws, t.id, { assignee_id: a2.userId }), 200, 'reassign');
    await csat(ws, t.id, 2);
    const c30 = await aggregate(ws, 30);
    expect(c30.overall).toEqual({ responses: 2, avg_score: 3.5, distribution: { ...ZERO_DISTRIBUTION, '2': 1, '5': 1 } });
    expect(normCsat(c30).per_agent).toEqual(
      normCsat({ ...c30, per_agent: [
        { assignee_id: a1.userId, assignee_name: 'editor person', responses: 1, avg_score: 5 },
        { assignee_id: a2.userId, assignee_name: 'editor person', responses: 1, avg_score: 2 },
      ] }).per_agent,
    );
    const c365 = await aggregate(ws, 365);
    expect(c365.overall).toEqual({ responses: 3, avg_score: 8 / 3, distribution: { ...ZERO_DISTRIBUTION, '1': 1, '2': 1, '5': 1 } });
    expect(c365.per_agent.find((r) => r.assignee_id === a1.userId)).toEqual({ assignee_id: a1.userId, assignee_name: 'editor person', responses: 2, avg_score: 3 });
    expect((await aggregate(ws, 1)).overall.responses).toBe(2);
  });
});

// ---------------------------------------------------------------------------------------------------------
// 2. Property-style: random sequences against a raw SQL aggregation
// ---------------------------------------------------------------------------------------------------------

describe('property: endpoint answers equal a direct aggregation over raw rows', () => {
  test('5 rounds × 60 random creates, edits, deletes, moves and backdates: equal before and after a fold; verify() finds nothing', async () => {
    const rng = mulberry32(0x5eed_2024);
    const w = await World.create();
    const mismatches: Mismatch[] = [];
    let journalSeen = 0;
    for (let round = 0; round < 5; round += 1) {
      if (round === 2) await w.removeExtra();
      // Backdates (which rebuild the buckets) come early, so the reads below see buckets plus journal.
      for (let i = 0; i < 60; i += 1) await w.randomOp(rng, i < 40);
      await w.rawRowsMatchModel();

      journalSeen += await journalCount(w.tenantId);
      const before = await compareAll(w, mulberry32(round), `round ${round} before fold`, mismatches);
      await expectNoDifferences(w.tenantId);

      await ctx.services.rollups.fold(w.tenantId);
      expect(await journalCount(w.tenantId)).toBe(0);
      await expectNoDifferences(w.tenantId);
      const after = await compareAll(w, mulberry32(round), `round ${round} after fold`, mismatches);
      // The same queries answer the same before and after the fold, order included.
      for (const [k, v] of before) if (!isDeepStrictEqual(after.get(k), v)) mismatches.push({ label: `round ${round}: fold changed the answer`, query: k, got: after.get(k), want: v });
    }
    // The sequence did exercise the journal, both windows and every kind of row.
    expect(journalSeen).toBeGreaterThan(0);
    expect(w.entries.size).toBeGreaterThan(10);
    expect(w.csat.size).toBeGreaterThan(10);
    const spread = await sql<{ recent: number; older: number; old: number }>`
      select count(*) filter (where created_at > now() - interval '2 days')::int as recent,
             count(*) filter (where created_at <= now() - interval '2 days' and created_at > now() - interval '30 days')::int as older,
             count(*) filter (where created_at <= now() - interval '30 days')::int as old
      from time_entries where tenant_id = ${w.tenantId}`.execute(ctx.db);
    expect(spread.rows[0]!.older + spread.rows[0]!.old).toBeGreaterThan(0);
    expect(mismatches.length === 0 ? [] : explain(mismatches)).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------------------
// 5. ETag / If-None-Match
// ---------------------------------------------------------------------------------------------------------

describe('ETag and If-None-Match on both reads', () => {
  test('time summary: 304 while nothing changed (a fold changes nothing), 200 with a new ETag after a time or todo write', async () => {
    const ws = await createWorkspace(ctx);
    const t = await createTicket(ctx, ws);
    await entry(ws, t.id, { minutes: 10 });
    const r1 = await api.summaryRaw(ws, { since_days: 7 });
    expect(r1.status).toBe(200);
    const tag1 = r1.headers.etag as string;
    expect(tag1).toMatch(/^"[^"]+"$/);
    const again = await api.summaryRaw(ws, { since_days: 7 }).set('If-None-Match', tag1);
    expect(again.status).toBe(304);
    expect(again.text ?? '').toBe('');
    expect(again.headers.etag).toBe(tag1);

    await ctx.services.rollups.fold(ws.tenantId);
    expect((await api.summaryRaw(ws, { since_days: 7 }).set('If-None-Match', tag1)).status).toBe(304);
    // Another query is another answer.
    const other = await api.summaryRaw(ws, { since_days: 8 }).set('If-None-Match', tag1);
    expect(other.status).toBe(200);

    await entry(ws, t.id, { minutes: 5 });
    const r2 = await api.summaryRaw(ws, { since_days: 7 }).set('If-None-Match', tag1);
    expect(r2.status).toBe(200);
    expect(r2.body.total.minutes).toBe(15);
    const tag2 = r2.headers.etag as string;
    expect(tag2).not.toBe(tag1);
    expect((await api.summaryRaw(ws, { since_days: 7 }).set('If-None-Match', tag2)).status).toBe(304);

    await todo(ws, t.id, {});
    const r3 = await api.summaryRaw(ws, { since_days: 7 }).set('If-None-Match', tag2);
    expect(r3.status).toBe(200);
    expect(r3.headers.etag).not.toBe(tag2);
    expect(r3.body.todos.total.total).toBe(1);
  });

  test('csat aggregate: 304 while nothing changed, 200 with a new ETag after a response', async () => {
    const ws = await createWorkspace(ctx);
    const t = await createTicket(ctx, ws);
    const r1 = await api.csatRaw(ws);
    expect(r1.status).toBe(200);
    const tag1 = r1.headers.etag as string;
    expect(tag1).toMatch(/^"[^"]+"$/);
    expect((await api.csatRaw(ws).set('If-None-Match', tag1)).status).toBe(304);
    await csat(ws, t.id, 4);
    const r2 = await api.csatRaw(ws).set('If-None-Match', tag1);
    expect(r2.status).toBe(200);
    expect(r2.body.overall.responses).toBe(1);
    const tag2 = r2.headers.etag as string;
    expect(tag2).not.toBe(tag1);
    await ctx.services.rollups.fold(ws.tenantId);
    expect((await api.csatRaw(ws).set('If-None-Match', tag2)).status).toBe(304);
  });
});

// ---------------------------------------------------------------------------------------------------------
// 6. The verify CLI
// ---------------------------------------------------------------------------------------------------------

function runTsx(args: string[], env: Record<string, string>, timeoutMs = 30_000): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(TSX, args, { cwd: ROOT, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout!.setEncoding('utf8').on('data', (c: string) => (stdout += c));
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      running.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('npm run rollups:verify', () => {
  const env = () => ({ NODE_ENV: 'test', DATABASE_URL: ctx.config.DATABASE_URL, API_KEY_PEPPER: ctx.config.API_KEY_PEPPER });
  const verifyCli = (tenantId: string, ...extra: string[]) => runTsx(['scripts/rollups-verify.ts', '--tenant', tenantId, ...extra], env());
  const differenceCount = (stdout: string, tenantId: string) => Number(new RegExp(`^rollups of ${tenantId}: (\\d+) difference\\(s\\)$`, 'm').exec(stdout)?.[1] ?? 0);
  let w: World;

  beforeAll(async () => {
    // A randomized sequence of creates, edits, deletes and backdates, folded halfway, journal left after.
    const rng = mulberry32(0xc1_1);
    w = await World.create();
    for (let i = 0; i < 40; i += 1) await w.randomOp(rng, i < 25);
    await ctx.services.rollups.fold(w.tenantId);
    for (let i = 0; i < 15; i += 1) await w.randomOp(rng, false);
  });
  /** Each corruption is repaired from raw rows afterwards, so every test starts clean. */
  afterEach(async () => {
    await ctx.services.rollups.rebuild(w.tenantId);
  });

  test('after a random sequence of creates, edits, deletes (journal not yet folded): exit 0 and "no differences"', async () => {
    expect(await journalCount(w.tenantId)).toBeGreaterThan(0);
    expect(await bucketCount(w.tenantId)).toBeGreaterThan(0);
    const clean = await verifyCli(w.tenantId);
    expect({ code: clean.code, stderr: clean.stderr }).toEqual({ code: 0, stderr: '' });
    expect(clean.stdout).toContain(`rollups of ${w.tenantId}: no differences between buckets and raw rows`);
  });

  test('a corrupted time bucket: exit 1 and a line naming its day and user with buckets vs raw minutes', async () => {
    await ctx.services.rollups.fold(w.tenantId);
    const tb = await sql<{ day: string; user_id: string | null }>`
      update time_buckets set minutes = minutes + 7
      where ctid = (select ctid from time_buckets where tenant_id = ${w.tenantId} order by day desc, minutes desc limit 1)
      returning day::text, user_id::text`.execute(ctx.db);
    expect(tb.rows).toHaveLength(1);
    const t = tb.rows[0]!;
    expect((await ctx.services.rollups.verify(w.tenantId)).time).toHaveLength(1);

    const dirty = await verifyCli(w.tenantId);
    expect(dirty.code).toBe(1);
    const line = dirty.stdout.split('\n').find((l) => l.startsWith(`time  day ${t.day} user ${t.user_id ?? '-'} `));
    expect(line).toBeDefined();
    const [, folded, raw] = /buckets \d+ entries \/ (\d+) min, raw \d+ entries \/ (\d+) min$/.exec(line!)!;
    expect(Number(folded) - Number(raw)).toBe(7);
    expect(differenceCount(dirty.stdout, w.tenantId)).toBeGreaterThanOrEqual(1);
    expect(dirty.stdout).not.toContain('no differences');
  });

  test('a corrupted csat bucket: exit 1 and a line naming its day and score with buckets vs raw', async () => {
    await ctx.services.rollups.fold(w.tenantId);
    const cb = await sql<{ day: string; score: number }>`
      update csat_buckets set responses = responses + 2
      where ctid = (select ctid from csat_buckets where tenant_id = ${w.tenantId} order by day desc, score limit 1)
      returning day::text, score`.execute(ctx.db);
    expect(cb.rows).toHaveLength(1);
    const c = cb.rows[0]!;
    const dirty = await verifyCli(w.tenantId);
    expect(dirty.code).toBe(1);
    const m = new RegExp(`^csat  day ${c.day} assignee \\S+ score ${c.score}: buckets (\\d+), raw (\\d+)$`, 'm').exec(dirty.stdout);
    expect(m).not.toBeNull();
    expect(Number(m![1]) - Number(m![2])).toBe(2);
    expect(differenceCount(dirty.stdout, w.tenantId)).toBeGreaterThanOrEqual(1);
  });

  test('--repair reports the differences, rebuilds from raw rows, and the next run exits 0', async () => {
    await sql`update time_buckets set entries = entries + 1 where ctid = (select ctid from time_buckets where tenant_id = ${w.tenantId} limit 1)`.execute(ctx.db);
    const repair = await verifyCli(w.tenantId, '--repair');
    expect(repair.code).toBe(1);
    expect(repair.stdout).toContain('buckets rebuilt from raw rows');
    await expectNoDifferences(w.tenantId);
    const after = await verifyCli(w.tenantId);
    expect(after.code).toBe(0);
  });

  test('a --tenant that is not a uuid exits 2', async () => {
    const r = await verifyCli('acme');
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--tenant must be a workspace id');
  });
});

/**
 * Unfiltered reads are served from per-dimension rows (time_dims, csat_dims) when those tables exist: a
 * consistency check that cannot see them cannot vouch for the answers. Skipped where the tables do not exist.
 */
describe('npm run rollups:verify sees the tables the endpoints read', () => {
  const env = () => ({ NODE_ENV: 'test', DATABASE_URL: ctx.config.DATABASE_URL, API_KEY_PEPPER: ctx.config.API_KEY_PEPPER });
  const hasTable = async (name: string) => (await sql<{ t: string | null }>`select to_regclass(${name})::text as t`.execute(ctx.db)).rows[0]!.t !== null;

  for (const [table, column, endpoint] of [
    ['time_dims', 'minutes', 'time summary'],
    ['csat_dims', 'responses', 'csat aggregate'],
  ] as const) {
    test(`a corrupted ${table} row changes the ${endpoint} answer and verify exits 1`, async () => {
      if (!(await hasTable(table))) return;
      const ws = await createWorkspace(ctx);
      const a = await addMember(ctx, ws, 'editor');
      const t = await createTicket(ctx, ws, { assignee_id: a.userId });
      await entry(ws, t.id, { minutes: 30, user_id: a.userId });
      await csat(ws, t.id, 4);
      await ctx.services.rollups.fold(ws.tenantId);
      await expectNoDifferences(ws.tenantId);
      const before = { time: await summary(ws, { since_days: 7 }), csat: await aggregate(ws, 7) };

      const r = await sql`update ${sql.table(table)} set ${sql.ref(column)} = ${sql.ref(column)} + 3 where tenant_id = ${ws.tenantId}`.execute(ctx.db);
      expect(Number(r.numAffectedRows)).toBeGreaterThan(0);
      const after = { time: await summary(ws, { since_days: 7 }), csat: await aggregate(ws, 7) };
      expect(after).not.toEqual(before); // the endpoint reads this table

      const run = await runTsx(['scripts/rollups-verify.ts', '--tenant', ws.tenantId], env());
      expect({ code: run.code, stdout: run.stdout }).toEqual({ code: 1, stdout: expect.stringMatching(/difference\(s\)/) });
    });
  }
});

// ---------------------------------------------------------------------------------------------------------
// 4. Precomputation with the worker running (last: the workers stay up until the file ends)
// ---------------------------------------------------------------------------------------------------------

describe('precomputation with the rollups worker running', () => {
  beforeAll(async () => {
    await ctx.startWorkers();
    // Let the sweep the scheduler may start with (and the fold jobs left by earlier tests) run first.
    await sleep(1500);
  });
  afterEach(() => {
    jest.restoreAllMocks();
  });

  test('a burst of 30 concurrent writes is folded by far fewer rollups.fold jobs; afterwards the journal is empty and buckets equal raw', async () => {
    const ws = await createWorkspace(ctx);
    const a = await addMember(ctx, ws, 'editor');
    const t1 = await createTicket(ctx, ws, { assignee_id: a.userId });
    const t2 = await createTicket(ctx, ws);
    const folds = jest.spyOn(ctx.services.rollups, 'fold');
    const writes = Array.from({ length: 30 }, (_, i) =>
      i % 3 === 2 ? api.addCsat(ws, i % 2 ? t1.id : t2.id, { score: 1 + (i % 5) }) : api.addEntry(ws, i % 2 ? t1.id : t2.id, { minutes: 1 + i, user_id: a.userId, billable: i % 4 !== 0 }),
    );
    const results = await Promise.all(writes);
    expect(results.map((r) => r.status)).toEqual(Array(30).fill(201));

    await eventually(async () => ((await journalCount(ws.tenantId)) === 0 ? true : undefined), 10_000, 'journal of the burst folded');
    const runs = folds.mock.calls.filter(([tenant]) => tenant === ws.tenantId).length;
    expect(runs).toBeGreaterThanOrEqual(1);
    // Far fewer than the 30 writes (a slow machine may spread the burst over a few coalescing windows).
    expect(runs).toBeLessThanOrEqual(10);
    expect(await bucketCount(ws.tenantId)).toBeGreaterThan(0);
    await expectNoDifferences(ws.tenantId);
    expect(normSummary(await summary(ws, { since_days: 1 }))).toEqual(normSummary(await rawSummary(ctx.db, ws.tenantId, { since_days: 1 })));
    expect(normCsat(await aggregate(ws, 1))).toEqual(normCsat(await rawCsat(ctx.db, ws.tenantId, 1)));
    expect((await summary(ws, { since_days: 1 })).total.entries).toBe(20);
  });

  test('a write that lands while its workspace is being folded is folded soon after, not left for the minute sweep', async () => {
    const ws = await createWorkspace(ctx);
    const t = await createTicket(ctx, ws);
    const realFold = ctx.services.rollups.fold;
    let entered!: () => void;
    const inFold = new Promise<void>((r) => (entered = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let first = true;
    jest.spyOn(ctx.services.rollups, 'fold').mockImplementation(async (tenant: string) => {
      const out = await realFold(tenant);
      if (tenant === ws.tenantId && first) {
        first = false;
        entered();
        await gate; // the job is still active here
      }
      return out;
    });
    try {
      await entry(ws, t.id, { minutes: 10 });
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([inFold, new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('no fold job ran for the first write')), 10_000)))]);
      clearTimeout(timer);
      await entry(ws, t.id, { minutes: 20 });
      expect(await journalCount(ws.tenantId)).toBe(1);
    } finally {
      release();
    }
    // Reads are exact meanwhile either way.
    expect((await summary(ws, { since_days: 1 })).total.minutes).toBe(30);
    const folded = await eventually(async () => ((await journalCount(ws.tenantId)) === 0 ? true : undefined), 5_000, 'the second write folded').catch(() => false);
    expect({ foldedWithin5s: folded, journal: await journalCount(ws.tenantId) }).toEqual({ foldedWithin5s: true, journal: 0 });
  });
});
