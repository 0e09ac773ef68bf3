import { sql } from 'kysely';
import { newId } from '../src/lib/ids';
import { addMember, bearer, mintKey, type Member } from './helpers/factories';
import { createTicket } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

let editor: Member;
let editor2: Member;
let viewer: Member;
let admin: Member;

const { ctx, workspaces: [ws, other] } = useTestApp({ workspaces: 2 });
beforeAll(async () => {
  [editor, editor2, viewer, admin] = [
    await addMember(ctx, ws, 'editor'),
    await addMember(ctx, ws, 'editor'),
    await addMember(ctx, ws, 'viewer'),
    await addMember(ctx, ws, 'admin'),
  ];
});

const VIEW_FIELDS = ['id', 'name', 'filters', 'shared', 'owner_user_id', 'created_at', 'updated_at'];
const ISO_WITH_OFFSET = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

async function viewCount(tenantId?: string): Promise<number> {
  const q = tenantId
    ? sql<{ n: number }>`select count(*)::int as n from saved_views where tenant_id = ${tenantId}`
    : sql<{ n: number }>`select count(*)::int as n from saved_views`;
  return (await q.execute(ctx.db)).rows[0]!.n;
}

async function viewRow(id: string) {
  return ctx.db.selectFrom('saved_views').selectAll().where('id', '=', id).executeTakeFirst();
}

const post = (token: string, body: Record<string, unknown>) => ctx.http.post('/v1/saved-views').set(bearer(token)).send(body);

async function createView(token: string, body: Record<string, unknown>) {
  const res = await post(token, { name: `view ${newId()}`, filters: {}, ...body });
  if (res.status !== 201) throw new Error(`createView failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; name: string; filters: Record<string, string>; shared: boolean; owner_user_id: string };
}

const listIds = async (token: string): Promise<string[]> => {
  const res = await ctx.http.get('/v1/saved-views').set(bearer(token));
  expect(res.status).toBe(200);
  return (res.body.saved_views as { id: string }[]).map((v) => v.id);
};

/** A stored view replayed as the request it stands for. */
const replay = (token: string, filters: Record<string, string>) =>
  ctx.http.get(`/v1/tickets?${new URLSearchParams(filters).toString()}`).set(bearer(token));

describe('POST /v1/saved-views', () => {
  test('an editor creates a view: 201 with exactly the documented fields, filters in query-string form', async () => {
    const before = await viewCount(ws.tenantId);
    const res = await post(editor.token, { name: 'Urgent, breached', filters: { priority: 'urgent', sla_breached: true }, shared: true });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual([...VIEW_FIELDS].sort());
    expect(res.body).toMatchObject({
      name: 'Urgent, breached',
      filters: { priority: 'urgent', sla_breached: 'true' },
      shared: true,
      owner_user_id: editor.userId,
    });
    expect(res.body.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.body.created_at).toMatch(ISO_WITH_OFFSET);
    expect(res.body.updated_at).toMatch(ISO_WITH_OFFSET);
    expect(await viewCount(ws.tenantId)).toBe(before + 1);
    const row = await viewRow(res.body.id);
    expect(row).toMatchObject({ tenant_id: ws.tenantId, owner_user_id: editor.userId, shared: true });
    expect(row!.filters).toEqual({ priority: 'urgent', sla_breached: 'true' });
  });

  test('shared defaults to false', async () => {
    const v = await createView(editor.token, { filters: { status: 'open' } });
    expect(v.shared).toBe(false);
  });

  test('numbers and booleans are stored as their query-string form', async () => {
    const v = await createView(editor.token, { filters: { sla_breached: false, tag: 'vip' } });
    expect(v.filters).toEqual({ sla_breached: 'false', tag: 'vip' });
  });

  test('a viewer is refused with 403 insufficient_role and nothing is stored', async () => {
    const before = await viewCount(ws.tenantId);
    const res = await post(viewer.token, { name: 'mine', filters: { status: 'open' } });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_role');
    expect(await viewCount(ws.tenantId)).toBe(before);
  });

  test('a key holding only helpdesk-ops:read is refused with 403 insufficient_scope; helpdesk-ops:write may create', async () => {
    const readKey = await mintKey(ctx, ws.ownerKey, { scopes: ['helpdesk-ops:read'] });
    const before = await viewCount(ws.tenantId);
    const res = await post(readKey.secret, { name: 'by key', filters: { status: 'open' } });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_scope');
    expect(await viewCount(ws.tenantId)).toBe(before);
    // The read key may still list (helpdesk-ops:read is what listing needs).
    expect((await ctx.http.get('/v1/saved-views').set(bearer(readKey.secret))).status).toBe(200);

    const writeKey = await mintKey(ctx, ws.ownerKey, { scopes: ['helpdesk-ops:write'] });
    const ok = await post(writeKey.secret, { name: 'by key', filters: { status: 'open' } });
    expect(ok.status).toBe(201);
    expect(ok.body.owner_user_id).toBe(ws.ownerId);
    const wrongTag = await mintKey(ctx, ws.ownerKey, { scopes: ['tickets:write'] });
    expect((await post(wrongTag.secret, { name: 'x', filters: {} })).body.code).toBe('insufficient_scope');
  });

  describe('every GET /v1/tickets filter key is accepted with a valid value, and the view replays as GET /v1/tickets', () => {
    const uuid = '0190a3b4-0000-7000-8000-000000000abc';
    test.each<[string, unknown, string]>([
      ['status', 'pending', 'pending'],
      ['priority', 'high', 'high'],
      ['assignee_id', uuid, uuid],
      ['team_id', uuid, uuid],
      ['customer_id', uuid, uuid],
      ['tag', 'billing', 'billing'],
      ['source', 'web', 'web'],
      ['sla_breached', true, 'true'],
      ['sla_breached', 'false', 'false'],
      ['created_after', '2024-01-01T00:00:00Z', '2024-01-01T00:00:00Z'],
      ['created_before', '2030-06-01T12:30:00+02:00', '2030-06-01T12:30:00+02:00'],
    ])('%s = %p', async (key, value, stored) => {
      const res = await post(editor.token, { name: `by ${key}`, filters: { [key]: value } });
      expect(res.status).toBe(201);
      expect(res.body.filters).toEqual({ [key]: stored });
      expect((await viewRow(res.body.id))!.filters).toEqual({ [key]: stored });
      const listed = await replay(editor.token, res.body.filters);
      expect(listed.status).toBe(200);
    });

    test('all keys together, and the replay really filters', async () => {
      const t = await createTicket(ctx, ws, { priority: 'low', tags: ['replay-marker'], assignee_id: editor.userId });
      const filters = {
        status: 'open',
        priority: 'low',
        assignee_id: editor.userId,
        customer_id: t.customer_id,
        tag: 'replay-marker',
        source: 'api',
        sla_breached: false,
        created_after: '2000-01-01T00:00:00Z',
        created_before: '2100-01-01T00:00:00Z',
      };
      const v = await createView(editor.token, { filters });
      const listed = await replay(editor.token, v.filters);
      expect(listed.status).toBe(200);
      expect(listed.body.tickets.map((x: { id: string }) => x.id)).toEqual([t.id]);
      // team_id is the one key left out above (the ticket has no team); it is accepted too.
      const withTeam = await post(editor.token, { name: 'team', filters: { ...filters, team_id: newId() } });
      expect(withTeam.status).toBe(201);
      expect((await replay(editor.token, withTeam.body.filters)).status).toBe(200);
    });
  });

  test.each<[Record<string, unknown>, string[]]>([
    [{ colour: 'red' }, ['colour']],
    [{ limit: '10' }, ['limit']],
    [{ offset: 0 }, ['offset']],
    [{ status: 'open', assignee: 'bob' }, ['assignee']],
    [{ colour: 'red', limit: 5 }, ['colour', 'limit']],
  ])('an unknown key %p is 422 filter_unknown naming it, and nothing is stored', async (filters, unknown) => {
    const before = await viewCount();
    const res = await post(editor.token, { name: 'bad', filters });
    expect(res.status).toBe(422);
    expect(res.body.code).toBe('filter_unknown');
    for (const k of unknown) {
      expect(res.body.detail).toContain(k);
      expect(res.body.errors).toEqual(expect.arrayContaining([expect.objectContaining({ path: `body.filters.${k}` })]));
    }
    expect(await viewCount()).toBe(before);
  });

  test.each([
    ['{"__proto__":"red"}'],
    ['{"__proto__":{"colour":"red"}}'],
    ['{"status":"open","__proto__":{"status":"closedish"}}'],
  ])('a __proto__ filter key (%s) is an unknown filter too: 422 filter_unknown, never silently dropped', async (filtersJson) => {
    const before = await viewCount();
    const res = await ctx.http
      .post('/v1/saved-views')
      .set(bearer(editor.token))
      .set('Content-Type', 'application/json')
      .send(`{"name":"proto","filters":${filtersJson}}`);
    expect(res.status).toBe(422);
    expect(res.body.code).toBe('filter_unknown');
    expect(res.body.detail).toContain('__proto__');
    expect(await viewCount()).toBe(before);
  });

  test('constructor, toString and hasOwnProperty are unknown filters, not inherited names', async () => {
    const before = await viewCount();
    for (const k of ['constructor', 'toString', 'hasOwnProperty']) {
      const res = await post(editor.token, { name: 'bad', filters: { [k]: 'x' } });
      expect(res.status).toBe(422);
      expect(res.body.code).toBe('filter_unknown');
    }
    expect(await viewCount()).toBe(before);
  });

  test.each<[Record<string, unknown>, string]>([
    [{ status: 'closedish' }, 'status'],
    [{ priority: 'critical' }, 'priority'],
    [{ assignee_id: 'bob' }, 'assignee_id'],
    [{ team_id: 42 }, 'team_id'],
    [{ sla_breached: 'yes' }, 'sla_breached'],
    [{ sla_breached: 1 }, 'sla_breached'],
    [{ created_after: 'yesterday' }, 'created_after'],
    [{ created_before: '2024-01-01' }, 'created_before'],
    [{ source: 'carrier-pigeon' }, 'source'],
    [{ tag: '' }, 'tag'],
    [{ status: { in: ['open', 'pending'] } }, 'status'],
    [{ tag: ['a', 'b'] }, 'tag'],
    [{ priority: null }, 'priority'],
    [{ status: 'open', created_after: 'yesterday' }, 'created_after'],
  ])('a known key with an invalid value %p is 422 filter_invalid, and nothing is stored', async (filters, key) => {
    const before = await viewCount();
    const res = await post(editor.token, { name: 'bad', filters });
    expect(res.status).toBe(422);
    expect(res.body.code).toBe('filter_invalid');
    expect(res.body.errors).toEqual(expect.arrayContaining([expect.objectContaining({ path: `body.filters.${key}` })]));
    expect(await viewCount()).toBe(before);
  });

  test('GET /v1/tickets refuses the same invalid values (one schema for both)', async () => {
    for (const [k, v] of [['status', 'closedish'], ['assignee_id', 'bob'], ['sla_breached', 'yes'], ['created_after', 'yesterday']] as const) {
      const res = await replay(editor.token, { [k]: v });
      expect(res.status).toBe(400);
    }
    expect((await replay(editor.token, { colour: 'red' })).status).toBe(400);
  });

  test('a body that is not an object of filters is 400 and stores nothing', async () => {
    const before = await viewCount();
    for (const body of [{ name: 'x' }, { name: '', filters: {} }, { name: 'x', filters: [] }, { name: 'x', filters: {}, shared: 'yes' }, { name: 'x', filters: {}, extra: 1 }]) {
      const res = await post(editor.token, body);
      expect(res.status).toBe(400);
    }
    expect(await viewCount()).toBe(before);
  });
});

describe('GET /v1/saved-views', () => {
  test('shows the caller\'s own views and the shared ones: a private view only to its owner', async () => {
    const priv = await createView(editor.token, { name: 'private one', filters: { status: 'open' }, shared: false });
    const shared = await createView(editor.token, { name: 'shared one', filters: { status: 'pending' }, shared: true });
    const otherPriv = await createView(editor2.token, { name: 'editor2 private', filters: {} });

    const mine = await listIds(editor.token);
    expect(mine).toEqual(expect.arrayContaining([priv.id, shared.id]));
    expect(mine).not.toContain(otherPriv.id);

    for (const someoneElse of [editor2.token, viewer.token, admin.token, ws.ownerKey]) {
      const ids = await listIds(someoneElse);
      expect(ids).toContain(shared.id);
      expect(ids).not.toContain(priv.id);
    }
    expect(await listIds(editor2.token)).toContain(otherPriv.id);

    const res = await ctx.http.get('/v1/saved-views').set(bearer(viewer.token));
    const seen = res.body.saved_views.find((v: { id: string }) => v.id === shared.id);
    expect(Object.keys(seen).sort()).toEqual([...VIEW_FIELDS].sort());
    expect(seen).toMatchObject({ name: 'shared one', filters: { status: 'pending' }, shared: true, owner_user_id: editor.userId });
  });

  test('another workspace sees none of this workspace\'s views, shared or not', async () => {
    const shared = await createView(editor.token, { name: 'ws shared', filters: {}, shared: true });
    const ids = await listIds(other.ownerKey);
    expect(ids).not.toContain(shared.id);
    const all = (await ctx.db.selectFrom('saved_views').select('id').where('tenant_id', '=', ws.tenantId).execute()).map((r) => r.id);
    for (const id of all) expect(ids).not.toContain(id);
  });
});

describe('DELETE /v1/saved-views/{id}', () => {
  const del = (token: string, id: string) => ctx.http.delete(`/v1/saved-views/${id}`).set(bearer(token));

  test('the owner deletes their own view: 204, then 404', async () => {
    const v = await createView(editor.token, { filters: { status: 'open' } });
    const res = await del(editor.token, v.id);
    expect(res.status).toBe(204);
    expect(await viewRow(v.id)).toBeUndefined();
    expect(await listIds(editor.token)).not.toContain(v.id);
    const again = await del(editor.token, v.id);
    expect(again.status).toBe(404);
    expect(again.body.code).toBe('not_found');
  });

  test('the owner deletes their own shared view', async () => {
    const v = await createView(editor.token, { filters: {}, shared: true });
    expect((await del(editor.token, v.id)).status).toBe(204);
    expect(await viewRow(v.id)).toBeUndefined();
  });

  test('someone else\'s private view is 404 (it cannot be seen), for an editor and an admin alike, and stays', async () => {
    const v = await createView(editor.token, { filters: {}, shared: false });
    for (const token of [editor2.token, admin.token]) {
      const res = await del(token, v.id);
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    expect(await viewRow(v.id)).toBeDefined();
  });

  test('someone else\'s shared view: an editor gets 403 insufficient_role and it stays; an admin deletes it', async () => {
    const v = await createView(editor.token, { filters: {}, shared: true });
    const refused = await del(editor2.token, v.id);
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('insufficient_role');
    expect(await viewRow(v.id)).toBeDefined();
    expect(await listIds(editor.token)).toContain(v.id);

    const ok = await del(admin.token, v.id);
    expect(ok.status).toBe(204);
    expect(await viewRow(v.id)).toBeUndefined();
  });

  test('a viewer cannot delete (editor floor)', async () => {
    const v = await createView(editor.token, { filters: {}, shared: true });
    const res = await del(viewer.token, v.id);
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_role');
    expect(await viewRow(v.id)).toBeDefined();
  });

  test('another workspace\'s view id is 404 (even to this workspace\'s owner) and the view stays', async () => {
    const theirs = await createView(other.ownerKey, { filters: {}, shared: true });
    const res = await del(ws.ownerKey, theirs.id);
    expect(res.status).toBe(404);
    expect(await viewRow(theirs.id)).toBeDefined();
  });

  test('an unknown id and a non-uuid id are 404', async () => {
    expect((await del(editor.token, newId())).status).toBe(404);
    const res = await del(editor.token, 'not-a-uuid');
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('not_found');
  });
});
