/**
 * Rollups (issue 8): the sources (time entries, todos, satisfaction responses) over HTTP, and query validation.
 * Semantics: rollups-semantics.test.ts; properties, ETags and the verify CLI: rollups-properties.test.ts;
 * precomputation with the worker: rollups-worker.test.ts.
 */
import { sql } from 'kysely';
import { newId } from '../src/lib/ids';
import { addMember, bearer, createWorkspace, type Member, type Workspace } from './helpers/factories';
import { createTeam } from './helpers/teams';
import { createTicket } from './helpers/tickets';
import { sleep } from './helpers/wait';
import { CSAT, DAY, SUMMARY, ZERO_DISTRIBUTION, aggregate, api, backdate, csat, entry, isoIn, ok, summary, ticketDetail, todo, useRollupsApp } from './helpers/rollups';

const { ctx } = useRollupsApp();

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
