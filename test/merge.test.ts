import { sql } from 'kysely';
import { addMember, bearer, createWorkspace } from './helpers/factories';
import { createTicket, setStatus } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ workspaces: 1 });

const merge = (source: string, target: string, key = ws.ownerKey) =>
  ctx.http.post(`/v1/tickets/${source}/merge`).set(bearer(key)).send({ target_ticket_id: target });

type Ev = { id: string; kind: string; body: string; meta: Record<string, unknown>; actor_type: string; actor_user_id?: string; created_at: string };

describe('POST /v1/tickets/{id}/merge', () => {
  test('marks the source merged, names the winner, and copies every source event to it with the via_merge marker', async () => {
    const source = await createTicket(ctx, ws);
    const target = await createTicket(ctx, ws);
    await ctx.http.post(`/v1/tickets/${source.id}/replies`).set(bearer(ws.ownerKey)).send({ body: 'reply on source' }).expect(201);
    await ctx.http.post(`/v1/tickets/${source.id}/notes`).set(bearer(ws.ownerKey)).send({ body: 'note on source' }).expect(201);
    const sourceBefore = (await ctx.http.get(`/v1/tickets/${source.id}`).set(bearer(ws.ownerKey))).body;

    const res = await merge(source.id, target.id);
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(source.id);
    expect(res.body.status).toBe('merged');
    expect(res.body.merged_into_id).toBe(target.id);
    expect(res.body.legal_next_states).toEqual([]);

    const winner = (await ctx.http.get(`/v1/tickets/${target.id}`).set(bearer(ws.ownerKey))).body;
    const copies = winner.events.filter((e: Ev) => e.meta.via_merge === source.id);
    expect(copies).toHaveLength(sourceBefore.events.length);
    for (const original of sourceBefore.events as Ev[]) {
      const copy = copies.find((c: Ev) => c.kind === original.kind && c.body === original.body);
      expect(copy).toBeDefined();
      expect(copy.id).not.toBe(original.id);
      expect(copy.created_at).toBe(original.created_at);
      expect(copy.actor_type).toBe(original.actor_type);
      expect(copy.actor_user_id).toBe(original.actor_user_id);
      expect(copy.meta).toEqual({ ...original.meta, via_merge: source.id });
    }
    // Both tickets record the merge; the winner's timeline stays in time order.
    expect(winner.events.filter((e: Ev) => e.kind === 'merged' && e.meta.merged_from === source.id)).toHaveLength(1);
    const merged = (await ctx.http.get(`/v1/tickets/${source.id}`).set(bearer(ws.ownerKey))).body;
    expect(merged.events.filter((e: Ev) => e.kind === 'merged' && e.meta.merged_into === target.id)).toHaveLength(1);
    const times = winner.events.map((e: Ev) => Date.parse(e.created_at));
    expect([...times].sort((a, b) => a - b)).toEqual(times);
  });

  test('merging a ticket into itself is 400 merge_self', async () => {
    const t = await createTicket(ctx, ws);
    const res = await merge(t.id, t.id);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('merge_self');
  });

  test('a target in another workspace, or unknown, is 404 and nothing changes', async () => {
    const other = await createWorkspace(ctx);
    const theirs = await createTicket(ctx, other);
    const mine = await createTicket(ctx, ws);
    for (const target of [theirs.id, '0190a3b4-0000-7000-8000-0000000000ff']) {
      const res = await merge(mine.id, target);
      expect(res.status).toBe(404);
    }
    expect((await ctx.http.get(`/v1/tickets/${mine.id}`).set(bearer(ws.ownerKey))).body.status).toBe('open');
    expect((await ctx.http.get(`/v1/tickets/${theirs.id}`).set(bearer(other.ownerKey))).body.events).toHaveLength(1);
    // And the other way round: their source is not visible from here.
    expect((await merge(theirs.id, mine.id)).status).toBe(404);
  });

  test('a merged source or a merged target is 409 ticket_merged: merge is irreversible and merged is terminal', async () => {
    const a = await createTicket(ctx, ws);
    const b = await createTicket(ctx, ws);
    const c = await createTicket(ctx, ws);
    await merge(a.id, b.id).expect(200);
    const again = await merge(a.id, c.id);
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('ticket_merged');
    const intoMerged = await merge(c.id, a.id);
    expect(intoMerged.status).toBe(409);
    expect(intoMerged.body.code).toBe('ticket_merged');
    const reopen = await ctx.http.post(`/v1/tickets/${a.id}/reopen`).set(bearer(ws.ownerKey));
    expect(reopen.body.code).toBe('reopen_not_allowed');
  });

  test.each(['pending', 'on_hold', 'solved', 'closed', 'spam'])('a %s ticket can be merged', async (status) => {
    const t = await createTicket(ctx, ws);
    await setStatus(ctx, ws, t.id, status);
    const target = await createTicket(ctx, ws);
    expect((await merge(t.id, target.id)).status).toBe(200);
  });

  test('concurrent merges A→B and B→A never both succeed', async () => {
    for (let round = 0; round < 10; round++) {
      const a = await createTicket(ctx, ws);
      const b = await createTicket(ctx, ws);
      const [ab, ba] = await Promise.all([merge(a.id, b.id), merge(b.id, a.id)]);
      expect([ab.status, ba.status].sort()).toEqual([200, 409]);
      const rows = await sql<{ status: string }>`select status from tickets where id in (${a.id}, ${b.id})`.execute(ctx.db);
      expect(rows.rows.map((r) => r.status).sort()).toEqual(['merged', 'open']);
    }
  });

  test('a PATCH racing a merge never leaves a merged ticket with another status', async () => {
    for (let round = 0; round < 10; round++) {
      const a = await createTicket(ctx, ws);
      const b = await createTicket(ctx, ws);
      await Promise.all([merge(a.id, b.id), ctx.http.patch(`/v1/tickets/${a.id}`).set(bearer(ws.ownerKey)).send({ status: 'pending' })]);
      const row = await sql<{ status: string; merged_into_id: string | null }>`select status, merged_into_id from tickets where id = ${a.id}`.execute(ctx.db);
      const { status, merged_into_id } = row.rows[0]!;
      expect(status === 'merged').toBe(merged_into_id === b.id);
    }
  });

  test('requires the editor floor and tickets:write', async () => {
    const viewer = await addMember(ctx, ws, 'viewer');
    const a = await createTicket(ctx, ws);
    const b = await createTicket(ctx, ws);
    expect((await merge(a.id, b.id, viewer.token)).body.code).toBe('insufficient_role');
    const reader = await ctx.http.post('/v1/api-keys').set(bearer(ws.ownerKey)).send({ name: 'r', scopes: ['tickets:read'] });
    expect((await merge(a.id, b.id, reader.body.secret)).body.code).toBe('insufficient_scope');
  });

  test('an invalid or missing target_ticket_id is 400 and nothing is written', async () => {
    const t = await createTicket(ctx, ws);
    for (const body of [{}, { target_ticket_id: 'nope' }, { target_ticket_id: t.id, extra: 1 }]) {
      const res = await ctx.http.post(`/v1/tickets/${t.id}/merge`).set(bearer(ws.ownerKey)).send(body);
      expect(res.status).toBe(400);
    }
    expect((await ctx.http.get(`/v1/tickets/${t.id}`).set(bearer(ws.ownerKey))).body.events).toHaveLength(1);
  });
});
