import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { startTestApp } from './helpers/context';
import { addMember, bearer, createWorkspace, mintKey, type Member, type Workspace } from './helpers/factories';
import { addToTeam, assign, createTeam, onlineTeam, setPresence, setUnavailable } from './helpers/teams';
import { createTicket } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ workspaces: 1 });

const ASSIGNMENT_FIELDS = ['assignee_id', 'assignee_name', 'ticket_id', 'team_id', 'skipped'].sort();

async function cursor(teamId: string): Promise<number> {
  const row = await ctx.db.selectFrom('teams').select('rr_last_position').where('id', '=', teamId).executeTakeFirstOrThrow();
  return Number(row.rr_last_position);
}

async function ticketRow(id: string) {
  return ctx.db.selectFrom('tickets').select(['assignee_id', 'team_id', 'updated_at', 'status']).where('id', '=', id).executeTakeFirstOrThrow();
}

async function eventKinds(ticketId: string): Promise<string[]> {
  const rows = await ctx.db.selectFrom('ticket_events').select('kind').where('ticket_id', '=', ticketId).orderBy('seq').execute();
  return rows.map((r) => r.kind);
}

async function notificationsOf(m: Member) {
  const res = await ctx.http.get('/v1/notifications').set(bearer(m.token));
  expect(res.status).toBe(200);
  return res.body.notifications as { kind: string; ticket_id: string; meta: Record<string, unknown> }[];
}

async function listTeams(w: Workspace, token = w.ownerKey) {
  const res = await ctx.http.get('/v1/teams').set(bearer(token));
  expect(res.status).toBe(200);
  return res.body.teams as { id: string; name: string; members: { user_id: string; name: string; position: number }[]; created_at: string }[];
}

/** Assigns a fresh ticket and returns the chosen member id (expects 200). */
async function nextAssignee(w: Workspace, teamId: string): Promise<{ assignee: string; skipped: { user_id: string; reason: string }[] }> {
  const t = await createTicket(ctx, w);
  const res = await assign(ctx, w, teamId, t.id);
  expect(res.status).toBe(200);
  return { assignee: res.body.assignee_id, skipped: res.body.skipped };
}

describe('teams: create, list, members', () => {
  test('an admin creates a team; the response is the team with an empty rotation', async () => {
    const admin = await addMember(ctx, ws, 'admin');
    const res = await ctx.http.post('/v1/teams').set(bearer(admin.token)).send({ name: '  Billing  ' });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(['created_at', 'id', 'members', 'name']);
    expect(res.body).toMatchObject({ name: 'Billing', members: [] });
    expect(res.body.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T.*Z$/);
    const listed = (await listTeams(ws)).find((t) => t.id === res.body.id);
    expect(listed).toEqual(res.body);
  });

  test('creating a team is admin only and needs helpdesk-ops:write; a bad name is 400', async () => {
    const editor = await addMember(ctx, ws, 'editor');
    const denied = await ctx.http.post('/v1/teams').set(bearer(editor.token)).send({ name: 'Nope' });
    expect(denied.status).toBe(403);
    expect(denied.body.code).toBe('insufficient_role');
    const ingressKey = await mintKey(ctx, ws.ownerKey, { scopes: ['helpdesk-ingress:write'] });
    const wrongTag = await ctx.http.post('/v1/teams').set(bearer(ingressKey.secret)).send({ name: 'Nope' });
    expect(wrongTag.status).toBe(403);
    expect(wrongTag.body.code).toBe('insufficient_scope');
    const opsKey = await mintKey(ctx, ws.ownerKey, { scopes: ['helpdesk-ops:write'] });
    expect((await ctx.http.post('/v1/teams').set(bearer(opsKey.secret)).send({ name: 'Via key' })).status).toBe(201);
    for (const body of [{}, { name: '   ' }, { name: 'x'.repeat(121) }, { name: 'ok', extra: 1 }]) {
      const res = await ctx.http.post('/v1/teams').set(bearer(ws.ownerKey)).send(body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('validation_failed');
    }
  });

  test('members are appended to the rotation; GET /v1/teams shows them in rotation order to a viewer', async () => {
    const teamId = await createTeam(ctx, ws, 'Rotation order');
    const [a, b, c] = [await addMember(ctx, ws, 'editor'), await addMember(ctx, ws, 'viewer'), await addMember(ctx, ws, 'admin')];
    for (const m of [c!, a!, b!]) await addToTeam(ctx, ws, teamId, m.userId);
    const viewer = await addMember(ctx, ws, 'viewer');
    const team = (await listTeams(ws, viewer.token)).find((t) => t.id === teamId)!;
    expect(team.members.map((m) => m.user_id)).toEqual([c!.userId, a!.userId, b!.userId]);
    expect(team.members.map((m) => m.position)).toEqual([1, 2, 3]);
    expect(team.members.map((m) => m.name)).toEqual(['admin person', 'editor person', 'viewer person']);
    for (const m of team.members) expect(Object.keys(m).sort()).toEqual(['name', 'position', 'user_id']);

    // Removing takes the member out; re-adding puts them at the end of the rotation.
    await ctx.http.delete(`/v1/teams/${teamId}/members/${c!.userId}`).set(bearer(ws.ownerKey)).expect(204);
    expect((await listTeams(ws)).find((t) => t.id === teamId)!.members.map((m) => m.user_id)).toEqual([a!.userId, b!.userId]);
    await addToTeam(ctx, ws, teamId, c!.userId);
    expect((await listTeams(ws)).find((t) => t.id === teamId)!.members.map((m) => m.user_id)).toEqual([a!.userId, b!.userId, c!.userId]);
    // Removing someone not in the team is 404.
    const gone = await ctx.http.delete(`/v1/teams/${teamId}/members/${viewer.userId}`).set(bearer(ws.ownerKey));
    expect(gone.status).toBe(404);
  });

  test('adding a user who is not a workspace member is 422 member_unknown; a duplicate is 409 team_member_exists', async () => {
    const teamId = await createTeam(ctx, ws, 'Dupes');
    const other = await createWorkspace(ctx);
    const outsider = await addMember(ctx, other, 'editor');
    for (const userId of [outsider.userId, randomUUID()]) {
      const res = await ctx.http.post(`/v1/teams/${teamId}/members`).set(bearer(ws.ownerKey)).send({ user_id: userId });
      expect(res.status).toBe(422);
      expect(res.body.code).toBe('member_unknown');
    }
    const m = await addMember(ctx, ws, 'editor');
    await addToTeam(ctx, ws, teamId, m.userId);
    const dup = await ctx.http.post(`/v1/teams/${teamId}/members`).set(bearer(ws.ownerKey)).send({ user_id: m.userId });
    expect(dup.status).toBe(409);
    expect(dup.body.code).toBe('team_member_exists');
    const team = (await listTeams(ws)).find((t) => t.id === teamId)!;
    expect(team.members.map((x) => x.user_id)).toEqual([m.userId]);
    const bad = await ctx.http.post(`/v1/teams/${teamId}/members`).set(bearer(ws.ownerKey)).send({ user_id: 'not-a-uuid' });
    expect(bad.status).toBe(400);
  });

  test('concurrent adds each get their own place at the end of the rotation', async () => {
    const teamId = await createTeam(ctx, ws, 'Concurrent adds');
    const people: Member[] = [];
    for (let i = 0; i < 10; i += 1) people.push(await addMember(ctx, ws, 'editor'));
    const results = await Promise.all(
      people.map((p) => ctx.http.post(`/v1/teams/${teamId}/members`).set(bearer(ws.ownerKey)).send({ user_id: p.userId })),
    );
    expect(results.map((r) => r.status)).toEqual(people.map(() => 204));
    const team = (await listTeams(ws)).find((t) => t.id === teamId)!;
    expect(team.members.map((m) => m.position)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(new Set(team.members.map((m) => m.user_id))).toEqual(new Set(people.map((p) => p.userId)));
  });

  test('team membership changes are admin only', async () => {
    const teamId = await createTeam(ctx, ws, 'Admin only');
    const editor = await addMember(ctx, ws, 'editor');
    const add = await ctx.http.post(`/v1/teams/${teamId}/members`).set(bearer(editor.token)).send({ user_id: editor.userId });
    expect(add.status).toBe(403);
    expect(add.body.code).toBe('insufficient_role');
    await addToTeam(ctx, ws, teamId, editor.userId);
    const del = await ctx.http.delete(`/v1/teams/${teamId}/members/${editor.userId}`).set(bearer(editor.token));
    expect(del.status).toBe(403);
    expect(del.body.code).toBe('insufficient_role');
  });

  test("another workspace's team is 404 everywhere and not listed", async () => {
    const other = await createWorkspace(ctx);
    const theirTeam = await createTeam(ctx, other, 'Theirs');
    const theirMember = await addMember(ctx, other, 'editor');
    await addToTeam(ctx, other, theirTeam, theirMember.userId);
    const mine = await addMember(ctx, ws, 'editor');
    const add = await ctx.http.post(`/v1/teams/${theirTeam}/members`).set(bearer(ws.ownerKey)).send({ user_id: mine.userId });
    expect(add.status).toBe(404);
    const del = await ctx.http.delete(`/v1/teams/${theirTeam}/members/${theirMember.userId}`).set(bearer(ws.ownerKey));
    expect(del.status).toBe(404);
    const t = await createTicket(ctx, ws);
    expect((await assign(ctx, ws, theirTeam, t.id)).status).toBe(404);
    expect((await listTeams(ws)).map((x) => x.id)).not.toContain(theirTeam);
    // Their rotation is intact.
    expect((await listTeams(other)).find((x) => x.id === theirTeam)!.members.map((m) => m.user_id)).toEqual([theirMember.userId]);
    expect(await cursor(theirTeam)).toBe(0);
  });
});

describe('PUT /v1/me/presence and PATCH /v1/me/preferences', () => {
  test('a viewer sets their own presence; the response is the presence as stored with refreshed_at', async () => {
    const viewer = await addMember(ctx, ws, 'viewer');
    const bystander = await addMember(ctx, ws, 'viewer');
    const before = Date.now();
    const res = await ctx.http.put('/v1/me/presence').set(bearer(viewer.token)).send({ presence: 'away' });
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['presence', 'refreshed_at']);
    expect(res.body.presence).toBe('away');
    expect(res.body.refreshed_at).toMatch(/^\d{4}-\d{2}-\d{2}T.*Z$/);
    expect(Date.parse(res.body.refreshed_at)).toBeGreaterThanOrEqual(before - 5000);
    const rows = await ctx.db
      .selectFrom('memberships')
      .select(['user_id', 'presence', 'presence_at'])
      .where('tenant_id', '=', ws.tenantId)
      .where('user_id', 'in', [viewer.userId, bystander.userId])
      .execute();
    expect(rows.find((r) => r.user_id === viewer.userId)).toMatchObject({ presence: 'away' });
    expect(rows.find((r) => r.user_id === bystander.userId)).toMatchObject({ presence: 'offline', presence_at: null });
  });

  test('refreshing presence (even to the same value) restarts the staleness clock', async () => {
    const m = await addMember(ctx, ws, 'editor');
    await setPresence(ctx, m, 'online');
    await sql`update memberships set presence_at = now() - interval '1 hour' where tenant_id = ${ws.tenantId} and user_id = ${m.userId}`.execute(ctx.db);
    const res = await ctx.http.put('/v1/me/presence').set(bearer(m.token)).send({ presence: 'online' });
    expect(res.status).toBe(200);
    expect(Date.now() - Date.parse(res.body.refreshed_at)).toBeLessThan(60_000);
  });

  test.each([[{ presence: 'busy' }], [{ presence: null }], [{}], [{ presence: 'online', extra: true }], [{ presence: 'ONLINE' }]])(
    'presence %p is 400 and nothing changes',
    async (body) => {
      const m = await addMember(ctx, ws, 'viewer');
      const res = await ctx.http.put('/v1/me/presence').set(bearer(m.token)).send(body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('validation_failed');
      const row = await ctx.db.selectFrom('memberships').select(['presence', 'presence_at']).where('tenant_id', '=', ws.tenantId).where('user_id', '=', m.userId).executeTakeFirstOrThrow();
      expect(row).toEqual({ presence: 'offline', presence_at: null });
    },
  );

  test('a viewer sets their own helpdesk_unavailable; the response is the preferences as stored', async () => {
    const viewer = await addMember(ctx, ws, 'viewer');
    const on = await ctx.http.patch('/v1/me/preferences').set(bearer(viewer.token)).send({ helpdesk_unavailable: true });
    expect(on.status).toBe(200);
    expect(on.body).toEqual({ helpdesk_unavailable: true });
    const off = await ctx.http.patch('/v1/me/preferences').set(bearer(viewer.token)).send({ helpdesk_unavailable: false });
    expect(off.body).toEqual({ helpdesk_unavailable: false });
  });

  test.each([[{ helpdesk_unavailable: 'yes' }], [{ helpdesk_unavailable: null }], [{}], [{ helpdesk_unavailable: true, other: 1 }]])(
    'preferences %p is 400 and nothing changes',
    async (body) => {
      const m = await addMember(ctx, ws, 'viewer');
      const res = await ctx.http.patch('/v1/me/preferences').set(bearer(m.token)).send(body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('validation_failed');
      const row = await ctx.db.selectFrom('memberships').select('helpdesk_unavailable').where('tenant_id', '=', ws.tenantId).where('user_id', '=', m.userId).executeTakeFirstOrThrow();
      expect(row.helpdesk_unavailable).toBe(false);
    },
  );
});

/**
 * A turn of the team in flight, as an assignment's transaction holds it: the team row locked (and the cursor
 * moved to `cursor`, when given) until `commit`.
 */
async function holdTurn(teamId: string, cursor?: number): Promise<{ commit: () => Promise<void> }> {
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let locked!: () => void;
  const isLocked = new Promise<void>((r) => (locked = r));
  const holder = ctx.db.transaction().execute(async (tx) => {
    await sql`SELECT 1 FROM teams WHERE tenant_id = ${ws.tenantId} AND id = ${teamId} FOR UPDATE`.execute(tx);
    if (cursor !== undefined) await sql`UPDATE teams SET rr_last_position = ${cursor} WHERE tenant_id = ${ws.tenantId} AND id = ${teamId}`.execute(tx);
    locked();
    await released;
  });
  await isLocked;
  return {
    commit: async () => {
      release();
      await holder;
    },
  };
}

describe('POST /v1/teams/{team_id}/assign (round robin)', () => {
  test("turns serialise per team, never across teams: with one team's row held, another team assigns at once", async () => {
    const a = await onlineTeam(ctx, ws, 2, 'Held');
    const b = await onlineTeam(ctx, ws, 2, 'Free');
    const ta = await createTicket(ctx, ws);
    const tb = await createTicket(ctx, ws);
    // Another assignment of team A in flight: its turn holds team A's row until it commits.
    const holder = await holdTurn(a.teamId);
    const waitingA = assign(ctx, ws, a.teamId, ta.id);
    let aDone = false;
    void waitingA.then(() => (aDone = true));
    const resB = await assign(ctx, ws, b.teamId, tb.id);
    expect(resB.status).toBe(200);
    // Team B's turn went through while team A's row was held; team A's own turn is still waiting for it.
    expect(aDone).toBe(false);
    await holder.commit();
    expect((await waitingA).status).toBe(200);
  });

  test('a call that waited for its turn continues from where the turn before it left the cursor', async () => {
    const { teamId, members } = await onlineTeam(ctx, ws, 3, 'Waited');
    const t = await createTicket(ctx, ws);
    // A turn in flight that has chosen the first two members (positions 1 and 2) but not yet committed.
    const holder = await holdTurn(teamId, 2);
    // Sent now (a supertest request goes out when it is first awaited or then-ed).
    const waiting = assign(ctx, ws, teamId, t.id).then((r) => r);
    // Long enough for the call to be queued on the team row (it cannot finish before the release).
    await new Promise((r) => setTimeout(r, 200));
    await holder.commit();
    const res = await waiting;
    expect(res.status).toBe(200);
    // Not the first member, which the cursor it could have read before waiting (0) would give.
    expect(res.body.assignee_id).toBe(members[2]!.userId);
    expect(await cursor(teamId)).toBe(3);
  });

  test('members take strict turns across calls, in rotation order, wrapping around', async () => {
    const { teamId, members } = await onlineTeam(ctx, ws, 3, 'Strict');
    const ids = members.map((m) => m.userId);
    const chosen: string[] = [];
    for (let i = 0; i < 7; i += 1) {
      const r = await nextAssignee(ws, teamId);
      expect(r.skipped).toEqual([]);
      chosen.push(r.assignee);
    }
    expect(chosen).toEqual([ids[0], ids[1], ids[2], ids[0], ids[1], ids[2], ids[0]]);
  });

  test('sets team and assignee, appends exactly one assigned event, and notifies the assignee once', async () => {
    const { teamId, members } = await onlineTeam(ctx, ws, 2, 'Effects');
    const t = await createTicket(ctx, ws);
    const res = await assign(ctx, ws, teamId, t.id);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(ASSIGNMENT_FIELDS);
    expect(res.body).toEqual({ assignee_id: members[0]!.userId, assignee_name: 'editor person', ticket_id: t.id, team_id: teamId, skipped: [] });

    const detail = await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey));
    expect(detail.body).toMatchObject({ assignee_id: members[0]!.userId, team_id: teamId, team_name: 'Effects', assignee_email: members[0]!.email });
    const kinds = await eventKinds(t.id);
    expect(kinds).toEqual(['ticket_created', 'assigned']);
    const ev = detail.body.events.at(-1);
    expect(ev).toMatchObject({ kind: 'assigned', actor_type: 'user', actor_user_id: ws.ownerId });
    expect(ev.meta).toMatchObject({ team_id: teamId, assignee_id: members[0]!.userId, from_assignee_id: null });
    expect(Date.parse(detail.body.updated_at)).toBeGreaterThanOrEqual(Date.parse(t.updated_at));

    const inbox = await notificationsOf(members[0]!);
    expect(inbox.filter((n) => n.ticket_id === t.id)).toHaveLength(1);
    expect(inbox.filter((n) => n.ticket_id === t.id)[0]).toMatchObject({ kind: 'assigned', ticket_id: t.id });
    expect(inbox).toHaveLength(1);
    // The member not chosen is not notified.
    expect(await notificationsOf(members[1]!)).toEqual([]);
    expect(await cursor(teamId)).toBe(1);
  });

  test('reassigning an already assigned ticket records the previous assignee and notifies only the new one', async () => {
    const { teamId, members } = await onlineTeam(ctx, ws, 2, 'Reassign');
    const t = await createTicket(ctx, ws);
    await assign(ctx, ws, teamId, t.id).expect(200);
    const again = await assign(ctx, ws, teamId, t.id);
    expect(again.status).toBe(200);
    expect(again.body.assignee_id).toBe(members[1]!.userId);
    expect(await eventKinds(t.id)).toEqual(['ticket_created', 'assigned', 'assigned']);
    const detail = await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey));
    expect(detail.body.events.at(-1).meta).toMatchObject({ assignee_id: members[1]!.userId, from_assignee_id: members[0]!.userId });
    expect(await notificationsOf(members[0]!)).toHaveLength(1);
    expect(await notificationsOf(members[1]!)).toHaveLength(1);
  });

  test('40 concurrent assigns on 8 eligible members choose each member exactly 5 times, in strict turns', async () => {
    const { teamId, members } = await onlineTeam(ctx, ws, 8, 'Concurrent');
    const ids = members.map((m) => m.userId);
    const tickets: string[] = [];
    for (let i = 0; i < 40; i += 1) tickets.push((await createTicket(ctx, ws)).id);

    const responses = await Promise.all(tickets.map((id) => assign(ctx, ws, teamId, id)));
    for (const r of responses) {
      expect(r.status).toBe(200);
      expect(r.body.skipped).toEqual([]);
    }
    const fromResponses = new Map<string, number>();
    for (const r of responses) fromResponses.set(r.body.assignee_id, (fromResponses.get(r.body.assignee_id) ?? 0) + 1);
    expect(Object.fromEntries(fromResponses)).toEqual(Object.fromEntries(ids.map((id) => [id, 5])));
    // Every response names its own ticket.
    expect(responses.map((r) => r.body.ticket_id).sort()).toEqual([...tickets].sort());

    const rows = await ctx.db.selectFrom('tickets').select(['id', 'assignee_id', 'team_id']).where('id', 'in', tickets).execute();
    expect(rows).toHaveLength(40);
    const fromDb = new Map<string, number>();
    for (const row of rows) {
      expect(row.team_id).toBe(teamId);
      fromDb.set(row.assignee_id!, (fromDb.get(row.assignee_id!) ?? 0) + 1);
    }
    expect(Object.fromEntries(fromDb)).toEqual(Object.fromEntries(ids.map((id) => [id, 5])));
    // The response for each ticket agrees with what was stored for it.
    const stored = new Map(rows.map((r) => [r.id, r.assignee_id]));
    for (const r of responses) expect(stored.get(r.body.ticket_id)).toBe(r.body.assignee_id);

    // In commit order (event sequence) the turns are the rotation repeated five times.
    const events = await ctx.db
      .selectFrom('ticket_events')
      .select(['ticket_id', 'meta'])
      .where('ticket_id', 'in', tickets)
      .where('kind', '=', 'assigned')
      .orderBy('seq')
      .execute();
    expect(events).toHaveLength(40);
    expect(new Set(events.map((e) => e.ticket_id)).size).toBe(40);
    const order = events.map((e) => (e.meta as { assignee_id: string }).assignee_id);
    expect(order).toEqual(Array.from({ length: 40 }, (_, i) => ids[i % 8]));
    expect(await cursor(teamId)).toBe(8);

    // Each member got five assigned notifications.
    for (const m of members) {
      const inbox = await notificationsOf(m);
      expect(inbox.filter((n) => n.kind === 'assigned')).toHaveLength(5);
    }
  });

  test('concurrent assigns with some members ineligible share the turns evenly among the eligible ones', async () => {
    const { teamId, members } = await onlineTeam(ctx, ws, 8, 'Concurrent mixed');
    await setPresence(ctx, members[2]!, 'offline');
    await setUnavailable(ctx, members[5]!, true);
    const eligible = members.filter((_, i) => i !== 2 && i !== 5).map((m) => m.userId);
    const tickets: string[] = [];
    for (let i = 0; i < 30; i += 1) tickets.push((await createTicket(ctx, ws)).id);
    const responses = await Promise.all(tickets.map((id) => assign(ctx, ws, teamId, id)));
    const counts = new Map<string, number>();
    for (const r of responses) {
      expect(r.status).toBe(200);
      counts.set(r.body.assignee_id, (counts.get(r.body.assignee_id) ?? 0) + 1);
      for (const s of r.body.skipped) {
        expect([members[2]!.userId, members[5]!.userId]).toContain(s.user_id);
        expect(s.reason).toBe(s.user_id === members[2]!.userId ? 'offline' : 'unavailable');
      }
    }
    expect(Object.fromEntries(counts)).toEqual(Object.fromEntries(eligible.map((id) => [id, 5])));
    const rows = await ctx.db
      .selectFrom('tickets')
      .select((eb) => ['assignee_id', eb.fn.countAll<string>().as('n')])
      .where('id', 'in', tickets)
      .groupBy('assignee_id')
      .execute();
    expect(Object.fromEntries(rows.map((r) => [r.assignee_id, Number(r.n)]))).toEqual(Object.fromEntries(eligible.map((id) => [id, 5])));
  });

  type Spoiler = (m: Member, w: Workspace) => Promise<void>;
  const spoilers: [string, Spoiler][] = [
    ['offline', (m) => setPresence(ctx, m, 'offline')],
    ['unavailable', (m) => setUnavailable(ctx, m, true)],
    [
      'deactivated',
      async (m, w) => {
        await ctx.http.patch(`/v1/members/${m.userId}`).set(bearer(w.ownerKey)).send({ status: 'deactivated' }).expect(200);
      },
    ],
    [
      'presence_stale',
      async (m, w) => {
        await sql`update memberships set presence_at = now() - interval '1 hour' where tenant_id = ${w.tenantId} and user_id = ${m.userId}`.execute(ctx.db);
      },
    ],
  ];

  test('a member removed from the workspace leaves the rotation at once and is never chosen again', async () => {
    const { teamId, members } = await onlineTeam(ctx, ws, 3, 'Skip removed');
    const [a, b, c] = members.map((m) => m.userId);
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: a, skipped: [] });
    await ctx.http.delete(`/v1/members/${b}`).set(bearer(ws.ownerKey)).expect(204);
    const teams = await ctx.http.get('/v1/teams').set(bearer(ws.ownerKey));
    const team = teams.body.teams.find((x: { id: string }) => x.id === teamId);
    expect(team.members.map((m: { user_id: string }) => m.user_id)).toEqual([a, c]);
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: c, skipped: [] });
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: a, skipped: [] });
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: c, skipped: [] });
  });

  test.each(spoilers)('a member who becomes %s between calls is skipped at the next call with that reason', async (reason, spoil) => {
    const { teamId, members } = await onlineTeam(ctx, ws, 3, `Skip ${reason}`);
    const [a, b, c] = members.map((m) => m.userId);
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: a, skipped: [] });
    await spoil(members[1]!, ws);
    // B's turn: B is passed over, with the reason, and C takes it.
    const t = await createTicket(ctx, ws);
    const res = await assign(ctx, ws, teamId, t.id);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ assignee_id: c, skipped: [{ user_id: b, reason }] });
    const row = await ticketRow(t.id);
    expect(row).toMatchObject({ assignee_id: c, team_id: teamId });
    // The skipped member is not notified.
    if (reason !== 'deactivated') expect(await notificationsOf(members[1]!)).toEqual([]);
    // The turn goes on: A next (nobody skipped, B is behind the cursor), then B is skipped again.
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: a, skipped: [] });
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: c, skipped: [{ user_id: b, reason }] });
  });

  test('an invited member who has not signed in yet is in the rotation but skipped with reason invited', async () => {
    const { teamId, members } = await onlineTeam(ctx, ws, 2, 'Skip invited');
    const [a, c] = members.map((m) => m.userId);
    const inv = await ctx.http.post('/v1/members').set(bearer(ws.ownerKey)).send({ email: `invited-${randomUUID()}@acme.test`, name: 'Not yet', role: 'editor' });
    expect(inv.status).toBe(201);
    await addToTeam(ctx, ws, teamId, inv.body.user_id);
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: a, skipped: [] });
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: c, skipped: [] });
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: a, skipped: [{ user_id: inv.body.user_id, reason: 'invited' }] });
  });

  test('presence goes stale after PRESENCE_TTL_SECONDS (default 300), not before', async () => {
    const { teamId, members } = await onlineTeam(ctx, ws, 2, 'TTL');
    const [a, b] = members.map((m) => m.userId);
    const age = (userId: string, seconds: number) =>
      sql`update memberships set presence_at = now() - make_interval(secs => ${seconds}) where tenant_id = ${ws.tenantId} and user_id = ${userId}`.execute(ctx.db);
    await age(a!, 240);
    await age(b!, 330);
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: a, skipped: [] });
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: a, skipped: [{ user_id: b, reason: 'presence_stale' }] });
    // B refreshes their presence and is back in the rotation at their turn.
    await setPresence(ctx, members[1]!, 'online');
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: b, skipped: [] });
  });

  test('PRESENCE_TTL_SECONDS is honoured when configured', async () => {
    const short = await startTestApp({ env: { PRESENCE_TTL_SECONDS: '60' } });
    try {
      const w = await createWorkspace(short);
      const teamRes = await short.http.post('/v1/teams').set(bearer(w.ownerKey)).send({ name: 'Short TTL' });
      const teamId = teamRes.body.id as string;
      const members: Member[] = [];
      for (let i = 0; i < 2; i += 1) {
        const m = await addMember(short, w, 'editor');
        await short.http.put('/v1/me/presence').set(bearer(m.token)).send({ presence: 'online' }).expect(200);
        await short.http.post(`/v1/teams/${teamId}/members`).set(bearer(w.ownerKey)).send({ user_id: m.userId }).expect(204);
        members.push(m);
      }
      // 90 seconds old: fresh under the default 300, stale under 60.
      await sql`update memberships set presence_at = now() - interval '90 seconds' where tenant_id = ${w.tenantId} and user_id = ${members[0]!.userId}`.execute(short.db);
      const t = await createTicket(short, w);
      const res = await short.http.post(`/v1/teams/${teamId}/assign`).set(bearer(w.ownerKey)).send({ ticket_id: t.id });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ assignee_id: members[1]!.userId, skipped: [{ user_id: members[0]!.userId, reason: 'presence_stale' }] });
    } finally {
      await short.close();
    }
  });

  test('away counts as available; a member coming back is chosen at their turn', async () => {
    const { teamId, members } = await onlineTeam(ctx, ws, 3, 'Away');
    const [a, b, c] = members.map((m) => m.userId);
    await setPresence(ctx, members[1]!, 'away');
    await setUnavailable(ctx, members[2]!, true);
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: a, skipped: [] });
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: b, skipped: [] });
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: a, skipped: [{ user_id: c, reason: 'unavailable' }] });
    await setUnavailable(ctx, members[2]!, false);
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: b, skipped: [] });
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: c, skipped: [] });
  });

  test('no eligible member is 409 no_eligible_member: the ticket is untouched and the turn does not advance', async () => {
    const { teamId, members } = await onlineTeam(ctx, ws, 2, 'Nobody');
    const [a, b] = members.map((m) => m.userId);
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: a, skipped: [] });
    expect(await cursor(teamId)).toBe(1);

    // A ticket that already has an assignee and no team, so "untouched" is visible on both columns.
    const previous = await addMember(ctx, ws, 'editor');
    const t = await createTicket(ctx, ws, { assignee_id: previous.userId });
    const before = await ticketRow(t.id);
    const kindsBefore = await eventKinds(t.id);
    const inboxBefore = await notificationsOf(previous);

    await setPresence(ctx, members[0]!, 'offline');
    await setUnavailable(ctx, members[1]!, true);
    await new Promise((r) => setTimeout(r, 20));
    const res = await assign(ctx, ws, teamId, t.id);
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('no_eligible_member');
    expect(res.body.errors).toEqual([
      { path: b, message: 'unavailable' },
      { path: a, message: 'offline' },
    ]);

    const after = await ticketRow(t.id);
    expect(after).toEqual(before);
    expect(after.team_id).toBeNull();
    expect(after.assignee_id).toBe(previous.userId);
    expect(await eventKinds(t.id)).toEqual(kindsBefore);
    expect(await cursor(teamId)).toBe(1);
    expect(await notificationsOf(previous)).toEqual(inboxBefore);
    for (const m of members) expect((await notificationsOf(m)).filter((n) => n.ticket_id === t.id)).toEqual([]);

    // Once B is back, B takes the turn the refused call did not use.
    await setUnavailable(ctx, members[1]!, false);
    expect(await nextAssignee(ws, teamId)).toEqual({ assignee: b, skipped: [] });
  });

  test('a team of never-online members, or an empty team, is 409 no_eligible_member', async () => {
    const teamId = await createTeam(ctx, ws, 'Fresh');
    const t = await createTicket(ctx, ws);
    const empty = await assign(ctx, ws, teamId, t.id);
    expect(empty.status).toBe(409);
    expect(empty.body.code).toBe('no_eligible_member');
    const m = await addMember(ctx, ws, 'editor');
    await addToTeam(ctx, ws, teamId, m.userId);
    const res = await assign(ctx, ws, teamId, t.id);
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('no_eligible_member');
    expect(res.body.errors).toEqual([{ path: m.userId, message: 'offline' }]);
    expect(await ticketRow(t.id)).toMatchObject({ assignee_id: null, team_id: null });
    expect(await eventKinds(t.id)).toEqual(['ticket_created']);
    expect(await cursor(teamId)).toBe(0);
  });

  test('a merged ticket is 409 ticket_merged and nothing changes', async () => {
    const { teamId } = await onlineTeam(ctx, ws, 2, 'Merged');
    const source = await createTicket(ctx, ws);
    const winner = await createTicket(ctx, ws);
    await ctx.http.post(`/v1/tickets/${source.id}/merge`).set(bearer(ws.ownerKey)).send({ target_ticket_id: winner.id }).expect(200);
    const before = await ticketRow(source.id);
    const kindsBefore = await eventKinds(source.id);
    const res = await assign(ctx, ws, teamId, source.id);
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('ticket_merged');
    expect(await ticketRow(source.id)).toEqual(before);
    expect(await eventKinds(source.id)).toEqual(kindsBefore);
    expect(await cursor(teamId)).toBe(0);
  });

  test('floor editor and scope helpdesk-ingress:write', async () => {
    const { teamId } = await onlineTeam(ctx, ws, 1, 'Access');
    const t = await createTicket(ctx, ws);
    const viewer = await addMember(ctx, ws, 'viewer');
    const byViewer = await assign(ctx, ws, teamId, t.id, viewer.token);
    expect(byViewer.status).toBe(403);
    expect(byViewer.body.code).toBe('insufficient_role');

    const readKey = await mintKey(ctx, ws.ownerKey, { scopes: ['helpdesk-ingress:read'] });
    const byReadKey = await assign(ctx, ws, teamId, t.id, readKey.secret);
    expect(byReadKey.status).toBe(403);
    expect(byReadKey.body.code).toBe('insufficient_scope');
    const opsKey = await mintKey(ctx, ws.ownerKey, { scopes: ['helpdesk-ops:write'] });
    const byOpsKey = await assign(ctx, ws, teamId, t.id, opsKey.secret);
    expect(byOpsKey.status).toBe(403);
    expect(byOpsKey.body.code).toBe('insufficient_scope');
    expect(await ticketRow(t.id)).toMatchObject({ assignee_id: null, team_id: null });
    expect(await cursor(teamId)).toBe(0);

    const writeKey = await mintKey(ctx, ws.ownerKey, { scopes: ['helpdesk-ingress:write'] });
    expect((await assign(ctx, ws, teamId, t.id, writeKey.secret)).status).toBe(200);
    const editor = await addMember(ctx, ws, 'editor');
    const t2 = await createTicket(ctx, ws);
    expect((await assign(ctx, ws, teamId, t2.id, editor.token)).status).toBe(200);
  });

  test('unknown team, unknown ticket, or a ticket of another workspace is 404 and the turn does not advance', async () => {
    const { teamId } = await onlineTeam(ctx, ws, 2, 'Not found');
    const t = await createTicket(ctx, ws);
    const unknownTeam = await assign(ctx, ws, randomUUID(), t.id);
    expect(unknownTeam.status).toBe(404);
    expect((await assign(ctx, ws, 'not-a-uuid', t.id)).status).toBe(404);
    expect((await assign(ctx, ws, teamId, randomUUID())).status).toBe(404);

    const other = await createWorkspace(ctx);
    const theirs = await createTicket(ctx, other);
    const res = await assign(ctx, ws, teamId, theirs.id);
    expect(res.status).toBe(404);
    expect(await ticketRow(theirs.id)).toMatchObject({ assignee_id: null, team_id: null });
    expect(await eventKinds(theirs.id)).toEqual(['ticket_created']);
    expect(await cursor(teamId)).toBe(0);
    expect(await ticketRow(t.id)).toMatchObject({ assignee_id: null, team_id: null });
  });

  test('a missing or malformed ticket_id is 400', async () => {
    const { teamId } = await onlineTeam(ctx, ws, 1, 'Bad body');
    for (const body of [{}, { ticket_id: 'nope' }, { ticket_id: randomUUID(), extra: 1 }]) {
      const res = await ctx.http.post(`/v1/teams/${teamId}/assign`).set(bearer(ws.ownerKey)).send(body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('validation_failed');
    }
    expect(await cursor(teamId)).toBe(0);
  });
});
