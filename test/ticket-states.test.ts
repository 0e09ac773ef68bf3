import { addMember, bearer } from './helpers/factories';
import { createTicket, setStatus } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ workspaces: 1 });

const ALL = ['open', 'pending', 'on_hold', 'solved', 'closed', 'spam', 'merged'];
const ALLOWED: Record<string, string[]> = {
  open: ['closed', 'on_hold', 'pending', 'solved', 'spam'],
  pending: ['closed', 'on_hold', 'open', 'solved', 'spam'],
  on_hold: ['closed', 'open', 'pending', 'solved', 'spam'],
  spam: ['open'],
  closed: ['spam'],
  solved: [],
  merged: [],
};

/** Brings a fresh ticket into `status` by legal moves only. */
async function ticketIn(status: string) {
  const t = await createTicket(ctx, ws);
  if (status === 'open') return t;
  if (status === 'merged') {
    const winner = await createTicket(ctx, ws);
    const res = await ctx.http.post(`/v1/tickets/${t.id}/merge`).set(bearer(ws.ownerKey)).send({ target_ticket_id: winner.id });
    expect(res.status).toBe(200);
    return res.body;
  }
  await setStatus(ctx, ws, t.id, status);
  // The ticket as GET shows it, timeline included (a PATCH answers only the events it appended).
  return (await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).expect(200)).body;
}

describe('the PATCH status machine', () => {
  test.each(ALL)('legal_next_states of a %s ticket is its row of the table, sorted', async (from) => {
    const t = await ticketIn(from);
    expect(t.status).toBe(from);
    expect(t.legal_next_states).toEqual(ALLOWED[from]);
  });

  const pairs = ALL.filter((f) => f !== 'merged').flatMap((from) => ALL.filter((to) => to !== from).map((to) => [from, to] as const));
  test.each(pairs)('PATCH %s → %s follows the table', async (from, to) => {
    const t = await ticketIn(from);
    const res = await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send({ status: to });
    if (ALLOWED[from]!.includes(to)) {
      expect(res.status).toBe(200);
      expect(res.body.status).toBe(to);
      const changed = res.body.new_events.filter((e: { kind: string }) => e.kind === 'status_changed');
      expect(changed).toHaveLength(1);
      expect(changed[0].meta).toEqual({ from, to });
    } else {
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('illegal_transition');
      expect(res.body.detail).toContain(ALLOWED[from]!.length ? ALLOWED[from]!.join(', ') : 'none');
      const after = await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey));
      expect(after.body.status).toBe(from);
      expect(after.body.events).toHaveLength(t.events.length);
    }
  });

  test('rule 1: a merged ticket cannot be patched at all (409 ticket_merged), not even its tags', async () => {
    const t = await ticketIn('merged');
    for (const body of [{ status: 'open' }, { tags: ['x'] }, { priority: 'high' }]) {
      const res = await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send(body);
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('ticket_merged');
    }
  });

  test('rule 2: a patch cannot bring a solved or closed ticket back to open; the refusal points at reopen', async () => {
    for (const from of ['solved', 'closed']) {
      const t = await ticketIn(from);
      const res = await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send({ status: 'open' });
      expect(res.status).toBe(409);
      expect(res.body.detail).toMatch(/reopen/);
    }
  });

  test('patching to the current status is a no-op, not a refusal', async () => {
    const t = await ticketIn('pending');
    const res = await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey)).send({ status: 'pending' });
    expect(res.status).toBe(200);
    expect(res.body.new_events).toEqual([]);
    expect((await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey))).body.events).toHaveLength(t.events.length);
  });
});

describe('POST /v1/tickets/{id}/reopen', () => {
  test.each(['solved', 'closed'])('reopens a %s ticket exactly as the spec table says', async (from) => {
    const t = await ticketIn(from);
    await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(ws.ownerKey)).send({ body: 'we are on it' });
    const before = await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey));
    const started = Date.now();
    const res = await ctx.http.post(`/v1/tickets/${t.id}/reopen`).set(bearer(ws.ownerKey));
    expect(res.status).toBe(200);
    const r = res.body;
    expect(r.status).toBe('open');
    expect(Date.parse(r.reopened_at)).toBeGreaterThanOrEqual(started - 1000);
    expect(r.sla_breached).toBe(false);
    expect(r.legal_next_states).toEqual(['closed', 'on_hold', 'pending', 'solved', 'spam']);
    // Both SLA timers restart from now.
    expect(Date.parse(r.first_response_due)).toBeGreaterThan(Date.parse(before.body.first_response_due));
    expect(Date.parse(r.first_response_due)).toBeGreaterThanOrEqual(started);
    expect(Date.parse(r.resolution_due)).toBeGreaterThanOrEqual(started);
    // Exactly two events appended: reopen, then the status change.
    const added = r.events.slice(before.body.events.length);
    expect(added.map((e: { kind: string }) => e.kind)).toEqual(['reopen', 'status_changed']);
    expect(added[1].meta).toEqual({ from, to: 'open' });
    expect(added[0].actor_type).toBe('user');
    expect(added[0].actor_user_id).toBe(ws.ownerId);
  });

  test('the next reply after a reopen counts as a first response again', async () => {
    const t = await ticketIn('open');
    await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(ws.ownerKey)).send({ body: 'first' }).expect(201);
    await setStatus(ctx, ws, t.id, 'solved');
    await ctx.http.post(`/v1/tickets/${t.id}/reopen`).set(bearer(ws.ownerKey)).expect(200);
    await ctx.http.post(`/v1/tickets/${t.id}/replies`).set(bearer(ws.ownerKey)).send({ body: 'after reopen' }).expect(201);
    const replies = (await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey))).body.events.filter((e: { kind: string }) => e.kind === 'reply');
    expect(replies.map((e: { meta: { first_response: boolean } }) => e.meta.first_response)).toEqual([true, true]);
  });

  test.each(['open', 'pending', 'on_hold', 'spam', 'merged'])('rule 3: reopening a %s ticket is 409 reopen_not_allowed and changes nothing', async (from) => {
    const t = await ticketIn(from);
    const res = await ctx.http.post(`/v1/tickets/${t.id}/reopen`).set(bearer(ws.ownerKey));
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('reopen_not_allowed');
    const after = await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey));
    expect(after.body.status).toBe(from);
    expect(after.body.reopened_at).toBeUndefined();
  });

  test('requires the editor floor', async () => {
    const viewer = await addMember(ctx, ws, 'viewer');
    const t = await ticketIn('solved');
    const res = await ctx.http.post(`/v1/tickets/${t.id}/reopen`).set(bearer(viewer.token));
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_role');
  });
});
