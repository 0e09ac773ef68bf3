import { sql } from 'kysely';
import { newId } from '../src/lib/ids';
import { addMember, bearer, createWorkspace, type Workspace } from './helpers/factories';
import { createTicket, setStatus } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ workspaces: 1 });

const DETAIL_FIELDS = [
  'id', 'subject', 'description', 'status', 'priority', 'source', 'customer_id', 'customer_name', 'customer_email', 'tags',
  'metadata', 'first_response_due', 'resolution_due', 'sla_breached', 'sla_policy_id', 'created_at', 'updated_at',
  'status_entered_at', 'legal_next_states', 'time_total_minutes', 'time_billable_minutes', 'todo_counts', 'events',
];

async function makeTeam(w: Workspace, name = 'Tier 1') {
  const id = newId();
  await ctx.db.insertInto('teams').values({ id, tenant_id: w.tenantId, name }).execute();
  return id;
}

describe('POST /v1/tickets', () => {
  test('creates an open ticket with defaults, a new customer by email, and a ticket_created event', async () => {
    const res = await ctx.http
      .post('/v1/tickets')
      .set(bearer(ws.ownerKey))
      .send({ subject: 'Login fails', description: 'Since Monday.', customer_email: 'Ada@Example.test' });
    expect(res.status).toBe(201);
    const t = res.body;
    expect(Object.keys(t).sort()).toEqual([...DETAIL_FIELDS].sort());
    expect(t).toMatchObject({ status: 'open', priority: 'normal', source: 'api', tags: [], metadata: {}, sla_breached: false });
    expect(t.customer_email).toBe('Ada@Example.test');
    expect(t.time_total_minutes).toBe(0);
    expect(t.time_billable_minutes).toBe(0);
    expect(t.todo_counts).toEqual({ open: 0, done: 0, overdue: 0 });
    expect(t.events).toHaveLength(1);
    expect(t.events[0]).toMatchObject({ kind: 'ticket_created', body: 'Since Monday.', actor_type: 'user', actor_user_id: ws.ownerId });
    // The same address in another case finds the same customer.
    const again = await createTicket(ctx, ws, { customer_email: 'ada@example.TEST' });
    expect(again.customer_id).toBe(t.customer_id);
  });

  test('shows assignee and team fields only when set', async () => {
    const agent = await addMember(ctx, ws, 'editor');
    const team = await makeTeam(ws);
    const t = await createTicket(ctx, ws, { assignee_id: agent.userId, team_id: team, priority: 'urgent', source: 'email', tags: ['vip', 'vip', 'billing'] });
    expect(t).toMatchObject({ assignee_id: agent.userId, assignee_name: 'editor person', assignee_email: agent.email, team_id: team, team_name: 'Tier 1' });
    expect(t.tags).toEqual(['vip', 'billing']);
    const bare = await createTicket(ctx, ws);
    for (const k of ['assignee_id', 'assignee_name', 'assignee_email', 'team_id', 'team_name', 'merged_into_id', 'reopened_at']) {
      expect(bare).not.toHaveProperty(k);
    }
  });

  test.each([
    [{ customer_id: undefined, customer_email: undefined }, 'neither customer'],
    [{ customer_id: '0190a3b4-0000-7000-8000-000000000001', customer_email: 'x@example.test' }, 'both customer fields'],
    [{ subject: 'x'.repeat(501) }, 'a subject over 500 characters'],
    [{ subject: '   ' }, 'a blank subject'],
    [{ description: 'x'.repeat(65_537) }, 'a description over 64 KiB'],
    [{ tags: Array.from({ length: 51 }, (_, i) => `t${i}`) }, 'more than 50 tags'],
    [{ priority: 'critical' }, 'an unknown priority'],
    [{ source: 'carrier-pigeon' }, 'an unknown source'],
    [{ status: 'solved' }, 'a status (not settable on create)'],
  ])('refuses %p (%s) with 400 and writes nothing', async (override, _why) => {
    const before = await sql<{ n: number }>`select count(*)::int as n from tickets`.execute(ctx.db);
    const res = await ctx.http
      .post('/v1/tickets')
      .set(bearer(ws.ownerKey))
      .send({ subject: 'ok', description: 'ok', customer_email: 'new-400@example.test', ...override });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    const after = await sql<{ n: number }>`select count(*)::int as n from tickets`.execute(ctx.db);
    expect(after.rows[0]!.n).toBe(before.rows[0]!.n);
  });

  test('an unknown assignee, team or customer is 422, and the customer found by email is not created either', async () => {
    const other = await createWorkspace(ctx);
    const outsider = await addMember(ctx, other, 'editor');
    const cases = [
      [{ assignee_id: outsider.userId }, 'assignee_unknown'],
      [{ team_id: await makeTeam(other) }, 'team_unknown'],
    ] as const;
    for (const [override, code] of cases) {
      const res = await ctx.http
        .post('/v1/tickets')
        .set(bearer(ws.ownerKey))
        .send({ subject: 's', description: 'd', customer_email: 'never-created@example.test', ...override });
      expect(res.status).toBe(422);
      expect(res.body.code).toBe(code);
    }
    const theirCustomer = await createTicket(ctx, other);
    const res = await ctx.http.post('/v1/tickets').set(bearer(ws.ownerKey)).send({ subject: 's', description: 'd', customer_id: theirCustomer.customer_id });
    expect(res.body.code).toBe('customer_unknown');
    const made = await sql`select id from customers where tenant_id = ${ws.tenantId} and email = 'never-created@example.test'`.execute(ctx.db);
    expect(made.rows).toHaveLength(0);
  });

  test('a deactivated member cannot be assigned', async () => {
    const m = await addMember(ctx, ws, 'editor');
    await ctx.http.patch(`/v1/members/${m.userId}`).set(bearer(ws.ownerKey)).send({ status: 'deactivated' }).expect(200);
    const res = await ctx.http.post('/v1/tickets').set(bearer(ws.ownerKey)).send({ subject: 's', description: 'd', customer_email: 'a@b.test', assignee_id: m.userId });
    expect(res.body.code).toBe('assignee_unknown');
  });

  test('a viewer cannot create tickets', async () => {
    const viewer = await addMember(ctx, ws, 'viewer');
    const res = await ctx.http.post('/v1/tickets').set(bearer(viewer.token)).send({ subject: 's', description: 'd', customer_email: 'a@b.test' });
    expect(res.body.code).toBe('insufficient_role');
  });
});

describe('PATCH /v1/tickets/{id}', () => {
  test('changes priority, assignee, team and tags, and records them in one fields_changed event', async () => {
    const t = await createTicket(ctx, ws);
    const agent = await addMember(ctx, ws, 'editor');
    const team = await makeTeam(ws, 'Billing');
    const res = await ctx.http
      .patch(`/v1/tickets/${t.id}`)
      .set(bearer(ws.ownerKey))
      .send({ priority: 'high', assignee_id: agent.userId, team_id: team, tags: ['refund'] });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ priority: 'high', assignee_id: agent.userId, team_name: 'Billing', tags: ['refund'] });
    expect(res.body).not.toHaveProperty('events');
    expect(res.body.new_events).toHaveLength(1);
    const ev = res.body.new_events[0];
    expect(ev.kind).toBe('fields_changed');
    expect(Object.keys(ev.meta.changes).sort()).toEqual(['assignee_id', 'priority', 'tags', 'team_id']);
    const cleared = await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send({ assignee_id: null, team_id: null });
    expect(cleared.body).not.toHaveProperty('assignee_id');
    expect(cleared.body).not.toHaveProperty('team_id');
  });

  test('merges metadata: keys sent are set, keys sent as null are removed, others kept', async () => {
    const t = await createTicket(ctx, ws, { metadata: { plan: 'pro', region: 'eu' } });
    const res = await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send({ metadata: { plan: null, seats: 5 } });
    expect(res.body.metadata).toEqual({ region: 'eu', seats: 5 });
  });

  test('solving sets nothing a reader can patch back; an empty patch is 400', async () => {
    const t = await createTicket(ctx, ws);
    const solved = await setStatus(ctx, ws, t.id, 'solved');
    expect(solved.legal_next_states).toEqual([]);
    expect((await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send({})).status).toBe(400);
  });
});

describe('replies and notes', () => {
  test('only the first agent reply counts as the first response', async () => {
    const t = await createTicket(ctx, ws);
    await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(ws.ownerKey)).send({ body: 'one' }).expect(201);
    const res = await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(ws.ownerKey)).send({ body: 'two' });
    expect(res.body.new_events.map((e: { kind: string; body: string }) => [e.kind, e.body])).toEqual([['reply', 'two']]);
    const replies = (await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey))).body.events.filter((e: { kind: string }) => e.kind === 'reply');
    expect(replies.map((e: { body: string; meta: { first_response: boolean } }) => [e.body, e.meta.first_response])).toEqual([
      ['one', true],
      ['two', false],
    ]);
    const row = await sql<{ first_responded_at: Date | null }>`select first_responded_at from tickets where id = ${t.id}`.execute(ctx.db);
    expect(row.rows[0]!.first_responded_at).not.toBeNull();
  });

  test('a note is an internal_note event and is not a first response', async () => {
    const t = await createTicket(ctx, ws);
    const res = await ctx.http.post(`/v1/tickets/${t.id}/notes`).set(bearer(ws.ownerKey)).send({ body: 'customer is a VIP' });
    expect(res.status).toBe(201);
    expect(res.body.new_events).toEqual([expect.objectContaining({ kind: 'internal_note', body: 'customer is a VIP', actor_type: 'user', actor_name: 'Olive Owner' })]);
    const row = await sql<{ first_responded_at: Date | null }>`select first_responded_at from tickets where id = ${t.id}`.execute(ctx.db);
    expect(row.rows[0]!.first_responded_at).toBeNull();
  });

  test('a blank body is 400; a merged ticket takes no reply', async () => {
    const t = await createTicket(ctx, ws);
    expect((await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(ws.ownerKey)).send({ body: '  ' })).status).toBe(400);
    const winner = await createTicket(ctx, ws);
    await ctx.http.post(`/v1/tickets/${t.id}/merge`).set(bearer(ws.ownerKey)).send({ target_ticket_id: winner.id }).expect(200);
    const res = await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(ws.ownerKey)).send({ body: 'late' });
    expect(res.body.code).toBe('ticket_merged');
  });
});

describe('what a write on one ticket answers', () => {
  /** The ticket as GET shows it, split into its fields and its timeline, with the ETag. */
  async function read(id: string) {
    const res = await ctx.http.get(`/v1/tickets/${id}`).set(bearer(ws.ownerKey)).expect(200);
    const { events, ...fields } = res.body;
    return { fields, events, etag: res.headers.etag };
  }

  test('PATCH, reply and note answer the ticket exactly as the next GET shows it, and the events they appended', async () => {
    const agent = await addMember(ctx, ws, 'editor');
    const team = (await ctx.http.post('/v1/teams').set(bearer(ws.ownerKey)).send({ name: `Answers ${newId()}` }).expect(201)).body.id as string;
    const t = await createTicket(ctx, ws, { metadata: { plan: 'pro' } });
    const writes = [
      () => ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send({ priority: 'urgent', assignee_id: agent.userId, team_id: team, tags: ['vip'], metadata: { seats: 3 } }),
      () => ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(ws.ownerKey)).send({ body: 'On it.' }),
      () => ctx.http.post(`/v1/tickets/${t.id}/notes`).set(bearer(ws.ownerKey)).send({ body: 'Checked the plan.' }),
      () => ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send({ status: 'pending' }),
    ];
    for (const write of writes) {
      const before = await read(t.id);
      const res = await write();
      expect(res.status).toBeLessThan(300);
      const { new_events: appended, ...answered } = res.body;
      const after = await read(t.id);
      // Field for field what GET shows (assignee and team names, due times, work totals, updated_at included).
      expect(answered).toEqual(after.fields);
      expect(appended).toEqual(after.events.slice(before.events.length));
      expect(appended.length).toBeGreaterThan(0);
      if (res.headers.etag) expect(res.headers.etag).toBe(after.etag);
    }
  });
});

describe('GET /v1/tickets', () => {
  let w: Workspace;
  let agent: string;
  let team: string;
  beforeAll(async () => {
    w = await createWorkspace(ctx);
    agent = (await addMember(ctx, w, 'editor')).userId;
    team = await makeTeam(w);
    await createTicket(ctx, w, { priority: 'urgent', tags: ['vip'], source: 'email', assignee_id: agent });
    await createTicket(ctx, w, { priority: 'low', team_id: team, customer_email: 'same@example.test' });
    const pending = await createTicket(ctx, w, { customer_email: 'same@example.test' });
    await setStatus(ctx, w, pending.id, 'pending');
  });

  const list = (q: string) => ctx.http.get(`/v1/tickets${q}`).set(bearer(w.ownerKey));

  test('lists newest first in the {tickets, next_cursor} envelope, next_cursor null on the last page', async () => {
    const res = await list('');
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['next_cursor', 'tickets']);
    expect(res.body.tickets).toHaveLength(3);
    expect(res.body.next_cursor).toBeNull();
    const times = res.body.tickets.map((t: { created_at: string }) => Date.parse(t.created_at));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    expect(res.body.tickets[0]).not.toHaveProperty('events');
  });

  test.each([
    ['?status=pending', 1],
    ['?status=open,pending', 3],
    ['?status=solved,closed', 0],
    ['?priority=urgent', 1],
    ['?priority=urgent,low', 2],
    ['?tag=vip', 1],
    ['?source=email', 1],
    ['?source=email,api', 3],
    ['?sla_breached=false', 3],
    ['?sla_breached=true', 0],
    ['?status=open&priority=low', 1],
    ['?created_after=2000-01-01T00:00:00Z', 3],
    ['?created_before=2000-01-01T00:00:00Z', 0],
    ['?updated_after=2000-01-01T00:00:00Z', 3],
    ['?updated_before=2000-01-01T00:00:00Z', 0],
  ])('filter %s narrows to %i', async (q, n) => {
    const res = await list(q);
    expect(res.status).toBe(200);
    expect(res.body.tickets).toHaveLength(n);
  });

  test('filters by assignee, team and customer, each taking several ids', async () => {
    expect((await list(`?assignee_id=${agent}`)).body.tickets).toHaveLength(1);
    expect((await list(`?team_id=${team}`)).body.tickets).toHaveLength(1);
    const customer = (await list('?status=pending')).body.tickets[0].customer_id;
    expect((await list(`?customer_id=${customer}`)).body.tickets).toHaveLength(2);
    const urgent = (await list('?priority=urgent')).body.tickets[0].customer_id;
    expect((await list(`?customer_id=${customer},${urgent}`)).body.tickets).toHaveLength(3);
  });

  test.each([
    '?colour=red',
    '?status=closedish',
    '?status=open,closedish',
    '?status=',
    '?assignee_id=bob',
    '?sla_breached=yes',
    '?created_after=yesterday',
    '?updated_after=yesterday',
    '?limit=0',
    '?limit=501',
    '?offset=2',
    '?sort=newest',
    '?after=bm90IGEgY3Vyc29y',
  ])('refuses %s with 400 instead of ignoring it', async (q) => {
    const res = await list(q);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
  });

  test('pages with limit and the cursor of the previous page', async () => {
    const all = (await list('')).body.tickets.map((t: { id: string }) => t.id);
    const first = (await list('?limit=2')).body;
    expect(first.next_cursor).toEqual(expect.any(String));
    const second = (await list(`?limit=2&after=${first.next_cursor}`)).body;
    expect(second.next_cursor).toBeNull();
    expect([...first.tickets, ...second.tickets].map((t: { id: string }) => t.id)).toEqual(all);
  });
});

describe('tenancy', () => {
  test('every ticket route answers 404 for another workspace\'s ticket and changes nothing', async () => {
    const other = await createWorkspace(ctx);
    const theirs = await createTicket(ctx, other);
    const mine = await createTicket(ctx, ws);
    const k = bearer(ws.ownerKey);
    const responses = [
      await ctx.http.get(`/v1/tickets/${theirs.id}`).set(k),
      await ctx.http.patch(`/v1/tickets/${theirs.id}`).set(k).send({ priority: 'high' }),
      await ctx.http.post(`/v1/tickets/${theirs.id}/replies`).set(k).send({ body: 'x' }),
      await ctx.http.post(`/v1/tickets/${theirs.id}/notes`).set(k).send({ body: 'x' }),
      await ctx.http.post(`/v1/tickets/${theirs.id}/merge`).set(k).send({ target_ticket_id: mine.id }),
      await ctx.http.post(`/v1/tickets/${theirs.id}/reopen`).set(k),
    ];
    expect(responses.map((r) => r.status)).toEqual([404, 404, 404, 404, 404, 404]);
    const after = await ctx.http.get(`/v1/tickets/${theirs.id}`).set(bearer(other.ownerKey));
    expect(after.body.priority).toBe('normal');
    expect(after.body.events).toHaveLength(1);
    expect((await ctx.http.get('/v1/tickets').set(k)).body.tickets.map((t: { id: string }) => t.id)).not.toContain(theirs.id);
  });
});
