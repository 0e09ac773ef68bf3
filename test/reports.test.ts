/**
 * Reports (issue 37): each report against hand-computed values on a small scenario (events placed at chosen
 * instants, one arriving late and earlier than what was counted, a reopen after a solve, a ticket moved between
 * teams and priorities), filters, day boundaries in the workspace zone, the HTTP surface (CSV, the 400-day limit,
 * the scope), and the equality of every report with its raw-SQL recomputation after many generated events
 * (REPORTS_EQUALITY_EVENTS, 50,000 by default; docs/decisions/reports.md records a run at 1,000,000).
 */
import { sql } from 'kysely';
import pino from 'pino';
import { createDb } from '../src/db';
import { createReportService } from '../src/domains/reports/service';
import { foldLock, foldUnlock } from '../src/domains/reports/store';
import type { QueueHub } from '../src/queue/hub';
import { sleep } from './helpers/wait';
import { bucketOf, BUCKET_BOUNDS, percentile } from '../src/domains/reports/buckets';
import { wantsCsv } from '../src/domains/reports/csv';
import { verifyWorkspace } from '../src/domains/reports/verify';
import { newId } from '../src/lib/ids';
import { addMember, bearer, createWorkspace, mintKey, type Member, type Workspace } from './helpers/factories';
import { expectReportsEqualRaw, generate, journalRows, logTime, openTicket, ownerOf, REPORTS, writeTicket } from './helpers/reports';
import { createTeam } from './helpers/teams';
import { createTicket } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

const { ctx } = useTestApp();
const reports = () => ctx.services.reports;

async function customerAndPolicy(tenantId: string) {
  const customerId = newId();
  await sql`INSERT INTO customers (id, tenant_id, display_name, email) VALUES (${customerId}, ${tenantId}, 'Customer', ${`c-${customerId}@example.test`})`.execute(ctx.db);
  const policy = await sql<{ id: string }>`SELECT id FROM sla_policies WHERE tenant_id = ${tenantId} AND is_default`.execute(ctx.db);
  return { customerId, policyId: policy.rows[0]!.id };
}

const get = (ws: Workspace, name: string, query: Record<string, string>, token = ws.ownerKey) => ctx.http.get(`/v1/reports/${name}`).query(query).set(bearer(token));

// 1. Pure parts
// ---------------------------------------------------------------------------------------------------------

describe('minute buckets', () => {
  test('exact below 64 minutes, then 32 buckets per doubling whose lower bound is at most 3.1 % below the value', () => {
    for (const m of [0, 1, 30, 63]) expect(BUCKET_BOUNDS[bucketOf(m)]).toBe(m);
    expect(BUCKET_BOUNDS[bucketOf(64)]).toBe(64);
    expect(BUCKET_BOUNDS[bucketOf(65)]).toBe(64);
    expect(BUCKET_BOUNDS[bucketOf(2010)]).toBe(1984);
    for (let m = 64; m < 200_000; m += 37) {
      const low = BUCKET_BOUNDS[bucketOf(m)]!;
      expect(low).toBeLessThanOrEqual(m);
      expect((m - low) / m).toBeLessThan(1 / 32);
    }
    expect(bucketOf(10_000_000)).toBe(BUCKET_BOUNDS.length - 1);
  });

  test("percentiles are PostgreSQL's percentile_disc: the first bucket whose cumulative count reaches ⌈p·n⌉", () => {
    const h = new Map([
      [bucketOf(10), 1],
      [bucketOf(90), 1],
    ]);
    expect(percentile(h, 0.5)).toBe(10);
    expect(percentile(h, 0.9)).toBe(90);
    expect(percentile(new Map(), 0.5)).toBeNull();
  });

  test('bucketing in SQL (width_bucket over the same bounds) agrees with bucketOf on both sides of every bound', async () => {
    // Both are non-decreasing step functions of the minute: agreeing just below and at every step, they agree everywhere.
    const minutes = [...new Set(BUCKET_BOUNDS.flatMap((b) => [b - 1, b, b + 1]).filter((m) => m >= 0)), 5_000_000];
    const { rows } = await sql<{ m: number; b: number }>`
      SELECT m, width_bucket(m, ${`{${BUCKET_BOUNDS.join(',')}}`}::int[]) - 1 AS b FROM unnest(${minutes}::int[]) AS m`.execute(ctx.db);
    expect(rows.filter((r) => r.b !== bucketOf(r.m))).toEqual([]);
    expect(rows).toHaveLength(minutes.length);
  });

  test('Accept: text/csv asks for CSV, unless JSON comes first', () => {
    expect(wantsCsv('text/csv')).toBe(true);
    expect(wantsCsv('text/csv;q=0.9, application/json;q=0.8')).toBe(true);
    expect(wantsCsv('application/json, text/csv')).toBe(false);
    expect(wantsCsv('*/*')).toBe(false);
    expect(wantsCsv(undefined)).toBe(false);
  });
});

// 2. A small scenario, computed by hand
// ---------------------------------------------------------------------------------------------------------

describe('a hand-computed scenario', () => {
  let ws: Workspace;
  let a: Member;
  let b: Member;
  let team1: string;
  let team2: string;
  let t1: string;
  let t2: string;
  let t3: string;
  const range = { from: '2025-03-10', to: '2025-03-12' };
  /** A report as the service answers it, loosely typed (each test states the shape it expects). */
  type Answer = { days: Record<string, unknown>[]; total: Record<string, unknown>; agents?: Record<string, unknown>[]; [k: string]: unknown };
  const read = async (name: (typeof REPORTS)[number], q: Record<string, string> = {}) =>
    (await reports().report(ownerOf(ws.tenantId, ws.ownerId), name, { ...range, ...q })) as unknown as Answer;

  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    a = await addMember(ctx, ws, 'editor');
    b = await addMember(ctx, ws, 'editor');
    team1 = await createTeam(ctx, ws, 'Billing');
    team2 = await createTeam(ctx, ws, 'Shipping');
    const { customerId, policyId } = await customerAndPolicy(ws.tenantId);
    const r = reports();
    const db = ctx.db;
    const w = (id: string, x: Parameters<typeof writeTicket>[4]) => writeTicket(db, r, ws.tenantId, id, x);
    const at = (s: string) => new Date(s);

    // T1: email, normal, Billing, A. Replied in 30 minutes, noted, solved after two hours.
    t1 = await openTicket(db, r, ws.tenantId, { at: '2025-03-10T09:00:00Z', customerId, policyId, team_id: team1, assignee_id: a.userId, first_response_due: '2025-03-10T10:00:00Z', resolution_due: '2025-03-10T17:00:00Z' });
    await w(t1, { set: { first_responded_at: at('2025-03-10T09:30:00Z') }, events: [{ kind: 'reply', at: '2025-03-10T09:30:00Z', actor: a.userId }] });
    await w(t1, { events: [{ kind: 'internal_note', at: '2025-03-10T09:40:00Z', actor: a.userId }] });
    await w(t1, { set: { status: 'solved', solved_at: at('2025-03-10T11:00:00Z') }, events: [{ kind: 'status_changed', at: '2025-03-10T11:00:00Z', actor: a.userId, meta: { from: 'open', to: 'solved' } }] });
    // T2: chat, high, Shipping, B; opened at 23:30 UTC (00:30 the next day in Berlin). Solved, reopened, solved again.
    t2 = await openTicket(db, r, ws.tenantId, { at: '2025-03-10T23:30:00Z', customerId, policyId, team_id: team2, assignee_id: b.userId, source: 'chat', priority: 'high', first_response_due: '2025-03-11T00:30:00Z', resolution_due: '2025-03-11T03:30:00Z' });
    await w(t2, { set: { first_responded_at: at('2025-03-11T01:00:00Z') }, events: [{ kind: 'reply', at: '2025-03-11T01:00:00Z', actor: b.userId }] });
    await w(t2, { set: { status: 'solved', solved_at: at('2025-03-11T10:30:00Z') }, events: [{ kind: 'status_changed', at: '2025-03-11T10:30:00Z', actor: b.userId, meta: { from: 'open', to: 'solved' } }] });
    // T3: email, normal, Billing, nobody; stays open.
    t3 = await openTicket(db, r, ws.tenantId, { at: '2025-03-11T12:00:00Z', customerId, policyId, team_id: team1, first_response_due: '2025-03-11T13:00:00Z', resolution_due: '2025-03-12T12:00:00Z' });
    await logTime(db, r, ws.tenantId, t1, a.userId, 25, '2025-03-10T12:00:00Z');
    await r.fold(ws.tenantId);
    // After a fold: a reopen after the solve, the reply and solve that follow (the resolution moves two days on).
    await w(t2, {
      set: { status: 'open', reopened_at: at('2025-03-12T08:00:00Z'), solved_at: null, first_responded_at: null, first_response_due: at('2025-03-12T09:00:00Z'), resolution_due: at('2025-03-12T08:45:00Z') },
      events: [
        { kind: 'reopen', at: '2025-03-12T08:00:00Z', actor: b.userId, meta: { from: 'solved' } },
        { kind: 'status_changed', at: '2025-03-12T08:00:00Z', actor: b.userId, meta: { from: 'solved', to: 'open' } },
      ],
    });
    await w(t2, { set: { first_responded_at: at('2025-03-12T08:30:00Z') }, events: [{ kind: 'reply', at: '2025-03-12T08:30:00Z', actor: b.userId }] });
    await w(t2, { set: { status: 'solved', solved_at: at('2025-03-12T09:00:00Z') }, events: [{ kind: 'status_changed', at: '2025-03-12T09:00:00Z', actor: b.userId, meta: { from: 'open', to: 'solved' } }] });
    await logTime(db, r, ws.tenantId, t2, b.userId, 40, '2025-03-12T09:10:00Z');
    // A reply that arrives last but is dated before T1's first one: T1's first response is now 10 minutes.
    await w(t1, { events: [{ kind: 'reply', at: '2025-03-10T09:10:00Z', actor: a.userId }] });
    // T3 moves to Shipping and high: all of its facts move with it.
    await w(t3, { set: { team_id: team2, priority: 'high' }, events: [{ kind: 'fields_changed', at: '2025-03-12T10:00:00Z', actor: a.userId }] });
  });

  test('volume: created, solved, reopened per day and in total', async () => {
    const v = await read('volume');
    expect(v).toMatchObject({ report: 'volume', time_zone: 'UTC', filters: {} });
    expect(v.days).toEqual([
      { date: '2025-03-10', created: 2, solved: 1, reopened: 0 },
      { date: '2025-03-11', created: 1, solved: 1, reopened: 0 },
      { date: '2025-03-12', created: 0, solved: 1, reopened: 1 },
    ]);
    expect(v.total).toEqual({ created: 3, solved: 3, reopened: 1 });
  });

  test('first response time: the first reply ever, the late-arriving earlier reply counted; median and p90 by nearest rank', async () => {
    const f = await read('first_response_time');
    const none = { tickets: 0, median_minutes: null, p90_minutes: null, mean_minutes: null, median_business_minutes: null, p90_business_minutes: null, mean_business_minutes: null };
    const one = (m: number) => ({ tickets: 1, median_minutes: m, p90_minutes: m, mean_minutes: m, median_business_minutes: m, p90_business_minutes: m, mean_business_minutes: m });
    expect(f.days).toEqual([
      { date: '2025-03-10', ...one(10) },
      { date: '2025-03-11', ...one(90) },
      { date: '2025-03-12', ...none },
    ]);
    expect(f.total).toEqual({ tickets: 2, median_minutes: 10, p90_minutes: 90, mean_minutes: 50, median_business_minutes: 10, p90_business_minutes: 90, mean_business_minutes: 50 });
  });

  test('resolution time: created to the last solve (the reopened ticket counts once, on its final day, in its bucket)', async () => {
    const r = await read('resolution_time');
    expect(r.days.map((d) => [d.date, d.tickets, d.median_minutes])).toEqual([
      ['2025-03-10', 1, 120],
      ['2025-03-11', 0, null],
      ['2025-03-12', 1, 1984],
    ]);
    // 2,010 minutes is in the bucket [1984, 2016): the mean is exact.
    expect(r.total).toMatchObject({ tickets: 2, median_minutes: 120, p90_minutes: 1984, mean_minutes: 1065 });
  });

  test('replies per ticket and reopens, per day of resolution', async () => {
    const rp = await read('replies_per_ticket');
    expect(rp.days).toEqual([
      { date: '2025-03-10', solved_tickets: 1, replies: 2, replies_per_ticket: 2 },
      { date: '2025-03-11', solved_tickets: 0, replies: 0, replies_per_ticket: null },
      { date: '2025-03-12', solved_tickets: 1, replies: 2, replies_per_ticket: 2 },
    ]);
    const ro = await read('reopens');
    expect(ro.total).toEqual({ solved_tickets: 2, reopened_tickets: 1, reopens: 1, reopened_share: 0.5 });
    expect(ro.days[2]).toEqual({ date: '2025-03-12', solved_tickets: 1, reopened_tickets: 1, reopens: 1, reopened_share: 1 });
  });

  test('backlog at the end of each day, and SLA shares', async () => {
    const bl = await read('backlog');
    expect(bl.days).toEqual([
      { date: '2025-03-10', backlog: 1 },
      { date: '2025-03-11', backlog: 1 },
      { date: '2025-03-12', backlog: 1 },
    ]);
    expect(bl.total).toEqual({ opening: 0, closing: 1 });
    expect((await read('backlog', { from: '2025-03-12', to: '2025-03-20' })).total).toEqual({ opening: 1, closing: 1 });
    const s = await read('sla');
    expect(s.total).toEqual({ first_reply: { measured: 2, met: 2, share: 1 }, resolution: { measured: 2, met: 1, share: 0.5 } });
    expect(s.days[2]).toEqual({ date: '2025-03-12', first_reply: { measured: 1, met: 1, share: 1 }, resolution: { measured: 1, met: 0, share: 0 } });
  });

  test('agent activity: who replied, noted, solved and logged time, per day and per agent', async () => {
    const aa = await read('agent_activity');
    expect(aa.days).toEqual([
      { date: '2025-03-10', replies: 2, notes: 1, solved: 1, time_entries: 1, minutes_logged: 25 },
      { date: '2025-03-11', replies: 1, notes: 0, solved: 1, time_entries: 0, minutes_logged: 0 },
      { date: '2025-03-12', replies: 1, notes: 0, solved: 1, time_entries: 1, minutes_logged: 40 },
    ]);
    expect(aa.agents).toEqual([
      { agent_id: b.userId, agent_name: 'editor person', replies: 2, notes: 0, solved: 2, time_entries: 1, minutes_logged: 40 },
      { agent_id: a.userId, agent_name: 'editor person', replies: 2, notes: 1, solved: 1, time_entries: 1, minutes_logged: 25 },
    ]);
  });

  test('filters: team, agent, channel and priority follow the ticket as it is now', async () => {
    expect((await read('volume', { team_id: team1 })).total).toEqual({ created: 1, solved: 1, reopened: 0 });
    expect((await read('volume', { team_id: team2 })).days.map((d) => d.created)).toEqual([1, 1, 0]);
    expect((await read('first_response_time', { agent_id: a.userId })).total).toMatchObject({ tickets: 1, median_minutes: 10 });
    expect((await read('volume', { channel: 'chat' })).total).toEqual({ created: 1, solved: 2, reopened: 1 });
    expect((await read('volume', { priority: 'high' })).total).toEqual({ created: 2, solved: 2, reopened: 1 });
    expect((await read('volume', { priority: 'high', channel: 'email' })).total).toEqual({ created: 1, solved: 0, reopened: 0 });
    expect((await read('backlog', { team_id: team2 })).days.map((d) => d.backlog)).toEqual([1, 1, 1]);
    const activity = await read('agent_activity', { team_id: team1 });
    expect(activity.agents!.map((x) => x.agent_id)).toEqual([a.userId]);
    expect((await read('agent_activity', { agent_id: b.userId })).total).toEqual({ replies: 2, notes: 0, solved: 2, time_entries: 1, minutes_logged: 40 });
  });

  test('every report equals its raw-SQL recomputation, folded or not, and reports:verify finds no difference', async () => {
    const actor = ownerOf(ws.tenantId, ws.ownerId);
    const queries = [range, { ...range, team_id: team2 }, { ...range, agent_id: b.userId }, { ...range, channel: 'email', priority: 'normal' }, { from: '2025-03-01', to: '2025-04-30' }];
    expect(await journalRows(ctx.db, ws.tenantId)).toBeGreaterThan(0);
    await expectReportsEqualRaw(ctx.db, reports(), actor, queries);
    expect(await verifyWorkspace(ctx.db, ws.tenantId)).toEqual({ differences: [], remeasured: [] });
    await reports().fold(ws.tenantId);
    expect(await journalRows(ctx.db, ws.tenantId)).toBe(0);
    await expectReportsEqualRaw(ctx.db, reports(), actor, queries);
    expect(await verifyWorkspace(ctx.db, ws.tenantId)).toEqual({ differences: [], remeasured: [] });
    // Days whose kept percentiles are not refreshed yet (wiped here) are read from their histograms: still equal.
    await sql`UPDATE report_days SET pct_stale = true, frt_p50 = NULL, frt_p90 = NULL, frt_bp50 = NULL, frt_bp90 = NULL, res_p50 = NULL, res_p90 = NULL, res_bp50 = NULL, res_bp90 = NULL
              WHERE tenant_id = ${ws.tenantId} AND grain = 'd'`.execute(ctx.db);
    await expectReportsEqualRaw(ctx.db, reports(), actor, queries);
    await reports().fold(ws.tenantId);
    expect(Number((await sql<{ n: string }>`SELECT count(*) AS n FROM report_days WHERE tenant_id = ${ws.tenantId} AND pct_stale`.execute(ctx.db)).rows[0]!.n)).toBe(0);
    await expectReportsEqualRaw(ctx.db, reports(), actor, queries);
  });

  test('in Europe/Berlin a ticket opened at 23:30 UTC counts on the next day; the zone change re-buckets everything', async () => {
    const patched = await ctx.http.patch('/v1/tenants/me').set(bearer(ws.ownerKey)).send({ time_zone: 'Europe/Berlin' });
    expect(patched.status).toBe(200);
    expect(patched.body.time_zone).toBe('Europe/Berlin');
    // Until the re-bucketing has run, reports stay in the zone their days were cut in, and say so.
    expect((await read('volume')).time_zone).toBe('UTC');
    await reports().rebuildDays(ws.tenantId);
    const v = await read('volume');
    expect(v.time_zone).toBe('Europe/Berlin');
    expect(v.days).toEqual([
      { date: '2025-03-10', created: 1, solved: 1, reopened: 0 },
      { date: '2025-03-11', created: 2, solved: 1, reopened: 0 },
      { date: '2025-03-12', created: 0, solved: 1, reopened: 1 },
    ]);
    await expectReportsEqualRaw(ctx.db, reports(), ownerOf(ws.tenantId, ws.ownerId), [range, { ...range, team_id: team2 }]);
    expect(await sql`SELECT 1 FROM report_journal WHERE tenant_id = ${ws.tenantId}`.execute(ctx.db).then((r) => r.rows.length)).toBe(0);
    expect(await verifyWorkspace(ctx.db, ws.tenantId)).toEqual({ differences: [], remeasured: [] });
  });

  test('a bad zone is refused', async () => {
    const res = await ctx.http.patch('/v1/tenants/me').set(bearer(ws.ownerKey)).send({ time_zone: 'Mars/Olympus_Mons' });
    expect(res.status).toBe(400);
  });
});

// 3. Over HTTP, through the real write path
// ---------------------------------------------------------------------------------------------------------

describe('GET /v1/reports/{name} over HTTP', () => {
  let ws: Workspace;
  let viewer: Member;
  const today = () => new Date().toISOString().slice(0, 10);

  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    viewer = await addMember(ctx, ws, 'viewer');
    // Written through the API: the timeline and the work service journal the facts in their transactions.
    const t = await createTicket(ctx, ws, { priority: 'high' });
    const h = bearer(ws.ownerKey);
    expect((await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(h).send({ body: 'On it.' })).status).toBe(201);
    expect((await ctx.http.post(`/v1/tickets/${t.id}/notes`).set(h).send({ body: 'Checking the logs.' })).status).toBe(201);
    expect((await ctx.http.post(`/v1/tickets/${t.id}/time-entries`).set(h).send({ minutes: 15 })).status).toBe(201);
    expect((await ctx.http.patch(`/v1/tickets/${t.id}`).set(h).send({ status: 'solved' })).status).toBe(200);
    expect((await ctx.http.post(`/v1/tickets/${t.id}/reopen`).set(h)).status).toBe(200);
    await createTicket(ctx, ws);
  });

  test('every report answers its own schema for today, matching the raw recomputation', async () => {
    for (const name of REPORTS) {
      const res = await get(ws, name, { from: today(), to: today() });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ report: name, from: today(), to: today(), time_zone: 'UTC' });
    }
    expect((await get(ws, 'volume', { from: today(), to: today() })).body.total).toEqual({ created: 2, solved: 1, reopened: 1 });
    expect((await get(ws, 'agent_activity', { from: today(), to: today() })).body.total).toEqual({ replies: 1, notes: 1, solved: 1, time_entries: 1, minutes_logged: 15 });
    expect((await get(ws, 'backlog', { from: today(), to: today() })).body.total).toEqual({ opening: 0, closing: 2 });
    expect((await get(ws, 'volume', { from: today(), to: today(), priority: 'high' })).body.total).toEqual({ created: 1, solved: 1, reopened: 1 });
    await expectReportsEqualRaw(ctx.db, reports(), ownerOf(ws.tenantId, ws.ownerId), [{ from: today(), to: today() }]);
    expect((await verifyWorkspace(ctx.db, ws.tenantId)).differences).toEqual([]);
  });

  test('Accept: text/csv answers the days as CSV', async () => {
    const res = await ctx.http.get('/v1/reports/sla').query({ from: today(), to: today() }).set(bearer(ws.ownerKey)).set('Accept', 'text/csv');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/csv/);
    const [header, row] = res.text.trim().split('\r\n');
    expect(header).toBe('date,first_reply_measured,first_reply_met,first_reply_share,resolution_measured,resolution_met,resolution_share');
    // The reopen restarted the clock: nothing is measured today any more, and the shares are empty cells.
    expect(row).toBe(`${today()},0,0,,0,0,`);
    const ft = await ctx.http.get('/v1/reports/first_response_time').query({ from: today(), to: today() }).set(bearer(ws.ownerKey)).set('Accept', 'text/csv');
    expect(ft.text.split('\r\n')[0]).toBe('date,tickets,median_minutes,p90_minutes,mean_minutes,median_business_minutes,p90_business_minutes,mean_business_minutes');
  });

  test('a range over 400 days, a reversed range or a bad date is a 400; 400 days exactly is fine', async () => {
    const long = await get(ws, 'volume', { from: '2024-01-01', to: '2025-02-04' });
    expect(long.status).toBe(400);
    expect(long.body.code).toBe('validation_failed');
    expect((await get(ws, 'volume', { from: '2024-01-01', to: '2025-02-03' })).status).toBe(200);
    expect((await get(ws, 'volume', { from: '2025-02-03', to: '2025-02-01' })).status).toBe(400);
    expect((await get(ws, 'volume', { from: '2025-02-30', to: '2025-03-01' })).status).toBe(400);
    expect((await get(ws, 'volume', { to: '2025-03-01' })).status).toBe(400);
    expect((await get(ws, 'volume', { from: today(), to: today(), priority: 'sometimes' })).status).toBe(400);
  });

  test('a viewer may read reports; a key needs reports:read', async () => {
    expect((await get(ws, 'backlog', { from: today(), to: today() }, viewer.token)).status).toBe(200);
    const readOnly = await mintKey(ctx, ws.ownerKey, { scopes: ['reports:read'] });
    expect((await get(ws, 'volume', { from: today(), to: today() }, readOnly.secret)).status).toBe(200);
    const other = await mintKey(ctx, ws.ownerKey, { scopes: ['tickets:read'] });
    expect((await get(ws, 'volume', { from: today(), to: today() }, other.secret)).status).toBe(403);
    expect((await ctx.http.get('/v1/reports/volume').query({ from: today(), to: today() })).status).toBe(401);
  });

  test("another workspace's reports see none of this one's tickets", async () => {
    const other = await createWorkspace(ctx);
    expect((await get(other, 'volume', { from: today(), to: today() })).body.total).toEqual({ created: 0, solved: 0, reopened: 0 });
  });
});

describe('the per-minute sweep', () => {
  test('folds every workspace with deltas waiting (their fold jobs lost), and nothing of the others', async () => {
    const a = await createWorkspace(ctx);
    const b = await createWorkspace(ctx);
    await createTicket(ctx, a);
    await createTicket(ctx, b);
    expect(await journalRows(ctx.db, a.tenantId)).toBeGreaterThan(0);
    expect(await journalRows(ctx.db, b.tenantId)).toBeGreaterThan(0);
    const out = await reports().sweep();
    expect(out.folded).toBeGreaterThanOrEqual(2);
    expect(await journalRows(ctx.db, a.tenantId)).toBe(0);
    expect(await journalRows(ctx.db, b.tenantId)).toBe(0);
    expect((await reports().sweep()).folded).toBe(0);
  });
});

describe('the fold under a statement timeout', () => {
  test('a chunk stopped by the statement timeout is rolled back and tried again a quarter the size, until it folds', async () => {
    const ws = await createWorkspace(ctx);
    await createTicket(ctx, ws);
    await createTicket(ctx, ws);
    const pending = await journalRows(ctx.db, ws.tenantId);
    expect(pending).toBeGreaterThan(0);
    // A service over connections whose statements may run 300 ms. Another session holds the workspace's fold lock,
    // so each chunk's lock wait is cancelled by the timeout, exactly as a chunk too slow to fold in time is; the lock
    // is let go at the second retry's warning, so the third attempt folds.
    const short = createDb({ ...ctx.config, PG_STATEMENT_TIMEOUT_MS: 300 });
    const warnings: { chunk: number; next: number }[] = [];
    let release: () => void = () => undefined;
    const released = new Promise<void>((r) => (release = r));
    const logger = pino({ level: 'warn' }, {
      write(line: string) {
        const entry = JSON.parse(line) as { msg: string; chunk: number; next: number };
        if (!entry.msg.includes('statement timeout')) return;
        warnings.push({ chunk: entry.chunk, next: entry.next });
        if (warnings.length === 2) release();
      },
    });
    const service = createReportService({ db: short.db, queues: { enqueue: async () => undefined } as unknown as QueueHub, logger });
    const holder = ctx.db.connection().execute(async (conn) => {
      await foldLock(ws.tenantId).execute(conn);
      await released;
      await foldUnlock(ws.tenantId).execute(conn);
    });
    try {
      await sleep(50);
      const out = await service.fold(ws.tenantId);
      expect(out.moved).toBe(pending);
      expect(warnings).toEqual([
        { chunk: 1000, next: 250 },
        { chunk: 250, next: 100 },
      ]);
      expect(await journalRows(ctx.db, ws.tenantId)).toBe(0);
    } finally {
      release();
      await holder;
      await short.close();
    }
  });
});

// 4. Equality with the raw recomputation after many generated events
// ---------------------------------------------------------------------------------------------------------

const EVENTS = Number(process.env.REPORTS_EQUALITY_EVENTS ?? 50_000);

describe(`every report equals its raw-SQL recomputation after ~${EVENTS.toLocaleString('en-US')} generated events`, () => {
  test(
    'out-of-order events, reopens after solves, moves between dimensions, merges, time logged, edited and deleted; a zone change halfway',
    async () => {
      const ws = await createWorkspace(ctx);
      const agents: string[] = [];
      for (let i = 0; i < 12; i++) agents.push((await addMember(ctx, ws, 'editor')).userId);
      const teams: string[] = [];
      for (let i = 0; i < 4; i++) teams.push(await createTeam(ctx, ws, `Team ${i}`));
      const { customerId, policyId } = await customerAndPolicy(ws.tenantId);
      const started = Date.now();
      const generated = await generate({ db: ctx.db, reports: reports(), tenantId: ws.tenantId, agents, teams, customerId, policyId }, EVENTS, {
        start: '2025-01-01T00:00:00Z',
        onRound: async (r) => {
          if (r === 1) {
            await sql`UPDATE tenants SET time_zone = 'America/New_York' WHERE id = ${ws.tenantId}`.execute(ctx.db);
            await reports().rebuildDays(ws.tenantId);
          }
        },
      });
      const generatedIn = (Date.now() - started) / 1000;
      const actor = ownerOf(ws.tenantId, ws.ownerId);
      const queries = [
        { from: '2024-12-20', to: '2025-06-30' },
        { from: '2025-03-01', to: '2025-03-31' },
        { from: '2025-02-10', to: '2025-03-05', team_id: teams[1] },
        { from: '2025-01-01', to: '2025-05-31', agent_id: agents[3] },
        { from: '2025-01-15', to: '2025-04-15', channel: 'chat', priority: 'urgent' },
      ];
      const unfolded = await journalRows(ctx.db, ws.tenantId);
      const t0 = Date.now();
      const compared = await expectReportsEqualRaw(ctx.db, reports(), actor, queries);
      expect((await verifyWorkspace(ctx.db, ws.tenantId, 20)).differences).toEqual([]);
      await reports().fold(ws.tenantId);
      await expectReportsEqualRaw(ctx.db, reports(), actor, queries);
      expect((await verifyWorkspace(ctx.db, ws.tenantId, 20)).differences).toEqual([]);
      console.log(
        `reports equality: ${generated.tickets} tickets, ${generated.events} timeline events and ${generated.entries} time entries ` +
          `(${generated.events + generated.entries} events) generated and journaled in ${generatedIn.toFixed(0)} s; ${unfolded} journal rows unfolded at the first comparison; ` +
          `${compared} report reads compared twice (unfolded, folded) with their raw recomputation and verified in ${((Date.now() - t0) / 1000).toFixed(0)} s; ` +
          `seconds per action: ${Object.entries(generated.seconds).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')}`,
      );
      expect(generated.events + generated.entries).toBeGreaterThan(EVENTS * 0.95);
      expect(unfolded).toBeGreaterThan(0);
    },
    Math.max(600_000, EVENTS * 6),
  );
});
