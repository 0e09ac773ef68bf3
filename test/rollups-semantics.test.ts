/**
 * Rollups: the time-tracking summary's and the CSAT aggregate's semantics and spec rules, as named tests.
 */
import { newId } from '../src/lib/ids';
import { addMember, bearer, createWorkspace } from './helpers/factories';
import { createTeam } from './helpers/teams';
import { createTicket } from './helpers/tickets';
import { DAY, ZERO_COUNTS, ZERO_DISTRIBUTION, aggregate, api, backdate, bucketCount, csat, csatRuleViolations, dayString, entry, expectNoDifferences, isoIn, normCsat, normSummary, ok, split, summary, summaryRuleViolations, todo, withoutEmptyGroups, type Summary, useRollupsApp } from './helpers/rollups';

const { ctx } = useRollupsApp();

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
