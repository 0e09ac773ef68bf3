import { newId } from '../src/lib/ids';
import { addMember, bearer, mintKey, type Member, type Workspace } from './helpers/factories';
import { createTicket } from './helpers/tickets';
import { useTestApp } from './helpers/use-test-app';

const { ctx, workspaces: [ws, other] } = useTestApp({ workspaces: 2 });

const NOTIFICATION_FIELDS = ['id', 'kind', 'ticket_id', 'body', 'meta', 'read_at', 'created_at'];

interface Note {
  id: string;
  kind: string;
  ticket_id: string | null;
  body: string;
  read_at: string | null;
  created_at: string;
}

/** What the database holds for a user in a workspace (oldest first). */
async function rowsFor(userId: string, tenantId = ws.tenantId) {
  return ctx.db
    .selectFrom('notifications')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('user_id', '=', userId)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
}

async function rowsForAnyTenant(userId: string) {
  return ctx.db.selectFrom('notifications').selectAll().where('user_id', '=', userId).execute();
}

async function unreadCount(userId: string, tenantId = ws.tenantId): Promise<number> {
  return (await rowsFor(userId, tenantId)).filter((r) => r.read_at === null).length;
}

async function inbox(token: string, query = ''): Promise<Note[]> {
  const res = await ctx.http.get(`/v1/notifications${query}`).set(bearer(token));
  if (res.status !== 200) throw new Error(`inbox failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.notifications;
}

const markRead = (token: string, body: unknown) => ctx.http.post('/v1/notifications/mark-read').set(bearer(token)).send(body as object);

async function ok(res: Promise<{ status: number; body: unknown }> | { status: number; body: unknown }, status: number) {
  const r = await res;
  if (r.status !== status) throw new Error(`expected ${status}, got ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as Record<string, unknown>;
}

const patch = (token: string, id: string, body: Record<string, unknown>) => ok(ctx.http.patch(`/v1/tickets/${id}`).set(bearer(token)).send(body), 200);
const reply = (token: string, id: string, body: string) => ok(ctx.http.post(`/v1/tickets/${id}/replies`).set(bearer(token)).send({ body }), 201);
const note = (token: string, id: string, body: string) => ok(ctx.http.post(`/v1/tickets/${id}/notes`).set(bearer(token)).send({ body }), 201);

async function deactivate(w: Workspace, m: Member) {
  await ok(ctx.http.patch(`/v1/members/${m.userId}`).set(bearer(w.ownerKey)).send({ status: 'deactivated' }), 200);
}

/** Gives `m` n unread `mentioned` notifications (by the owner), returning their ids oldest first. */
async function giveNotifications(m: Member, n: number): Promise<string[]> {
  const t = await createTicket(ctx, ws);
  for (let i = 0; i < n; i += 1) await note(ws.ownerKey, t.id, `@${m.userId} look ${i}`);
  return (await rowsFor(m.userId)).filter((r) => r.ticket_id === t.id).map((r) => r.id);
}

describe('notifications the system creates', () => {
  test('PATCH assignee_id notifies the new assignee (assigned), never the person who assigned', async () => {
    const a = await addMember(ctx, ws, 'editor');
    const t = await createTicket(ctx, ws);
    const ownerBefore = (await rowsFor(ws.ownerId)).length;
    await patch(ws.ownerKey, t.id, { assignee_id: a.userId });

    const rows = await rowsFor(a.userId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ kind: 'assigned', ticket_id: t.id, body: t.subject, read_at: null });
    expect((await rowsFor(ws.ownerId)).length).toBe(ownerBefore);

    // Through the API the assignee sees exactly this, with the documented fields.
    const [seen] = await inbox(a.token);
    expect(Object.keys(seen!).sort()).toEqual([...NOTIFICATION_FIELDS].sort());
    expect(seen).toMatchObject({ id: rows[0]!.id, kind: 'assigned', ticket_id: t.id, body: t.subject, read_at: null });

    // Re-sending the same assignee changes nothing and notifies nobody; unassigning notifies nobody.
    await patch(ws.ownerKey, t.id, { assignee_id: a.userId });
    await patch(ws.ownerKey, t.id, { assignee_id: null });
    expect(await rowsFor(a.userId)).toHaveLength(1);
  });

  test('assigning yourself by PATCH notifies nobody', async () => {
    const a = await addMember(ctx, ws, 'editor');
    const t = await createTicket(ctx, ws);
    await patch(a.token, t.id, { assignee_id: a.userId });
    expect(await rowsFor(a.userId)).toHaveLength(0);

    const ownerBefore = (await rowsFor(ws.ownerId)).length;
    await patch(ws.ownerKey, t.id, { assignee_id: ws.ownerId });
    expect((await rowsFor(ws.ownerId)).length).toBe(ownerBefore);
  });

  test('creating a ticket with assignee_id notifies the assignee; creating one assigned to yourself does not', async () => {
    const a = await addMember(ctx, ws, 'editor');
    const t = await createTicket(ctx, ws, { assignee_id: a.userId });
    const rows = await rowsFor(a.userId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ kind: 'assigned', ticket_id: t.id, body: t.subject });

    const ownerBefore = (await rowsFor(ws.ownerId)).length;
    const mine = await createTicket(ctx, ws, { assignee_id: ws.ownerId });
    expect(mine.assignee_id).toBe(ws.ownerId);
    expect((await rowsFor(ws.ownerId)).length).toBe(ownerBefore);

    // An editor creating a ticket for themselves through their own token: nothing either.
    const self = await ctx.http
      .post('/v1/tickets')
      .set(bearer(a.token))
      .send({ subject: 'self', description: 'd', customer_email: 'self@example.test', assignee_id: a.userId });
    expect(self.status).toBe(201);
    expect(await rowsFor(a.userId)).toHaveLength(1);
  });

  test('a reply by someone else on a ticket assigned to X notifies X (reply_on_assigned); X\'s own reply does not', async () => {
    const x = await addMember(ctx, ws, 'editor');
    const b = await addMember(ctx, ws, 'editor');
    const t = await createTicket(ctx, ws, { assignee_id: x.userId });
    const afterAssign = (await rowsFor(x.userId)).length;

    await reply(b.token, t.id, 'We are on it.');
    let rows = await rowsFor(x.userId);
    expect(rows).toHaveLength(afterAssign + 1);
    expect(rows.at(-1)).toMatchObject({ kind: 'reply_on_assigned', ticket_id: t.id, body: t.subject, read_at: null });
    expect(await rowsFor(b.userId)).toHaveLength(0);

    await reply(x.token, t.id, 'My own reply.');
    rows = await rowsFor(x.userId);
    expect(rows).toHaveLength(afterAssign + 1);

    // A reply through a key acts as its creator (the owner): X is notified again.
    await reply(ws.ownerKey, t.id, 'Owner here.');
    expect((await rowsFor(x.userId)).filter((r) => r.kind === 'reply_on_assigned')).toHaveLength(2);
  });

  test('a reply on an unassigned ticket notifies nobody; an internal note without mentions notifies nobody', async () => {
    const b = await addMember(ctx, ws, 'editor');
    const t = await createTicket(ctx, ws);
    await reply(b.token, t.id, 'Hello');
    await note(b.token, t.id, 'no mention here, not even @someone');
    const forTicket = await ctx.db.selectFrom('notifications').select('id').where('ticket_id', '=', t.id).execute();
    expect(forTicket).toHaveLength(0);
  });

  test('a reply on a ticket whose assignee has since been deactivated notifies nobody', async () => {
    const x = await addMember(ctx, ws, 'editor');
    const t = await createTicket(ctx, ws, { assignee_id: x.userId });
    await deactivate(ws, x);
    await reply(ws.ownerKey, t.id, 'Anyone?');
    expect((await rowsFor(x.userId)).filter((r) => r.kind === 'reply_on_assigned')).toHaveLength(0);
  });

  test('a note mentioning @<uuid> notifies each mentioned member once (mentioned)', async () => {
    const a = await addMember(ctx, ws, 'editor');
    const b = await addMember(ctx, ws, 'viewer');
    const t = await createTicket(ctx, ws);
    await note(ws.ownerKey, t.id, `@${a.userId} and @${b.userId}, please look. Again @${a.userId.toUpperCase()}.`);
    for (const m of [a, b]) {
      const rows = await rowsFor(m.userId);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ kind: 'mentioned', ticket_id: t.id, body: t.subject, read_at: null });
    }
  });

  test('mentions of yourself, of non-members, of deactivated members and of unknown ids notify nobody', async () => {
    const author = await addMember(ctx, ws, 'editor');
    const gone = await addMember(ctx, ws, 'editor');
    await deactivate(ws, gone);
    const outsider = await addMember(ctx, other, 'editor');
    const ghost = newId();
    const t = await createTicket(ctx, ws);

    await note(author.token, t.id, `@${author.userId} @${gone.userId} @${outsider.userId} @${ghost}`);
    expect(await rowsFor(author.userId)).toHaveLength(0);
    expect(await rowsForAnyTenant(gone.userId)).toHaveLength(0);
    expect(await rowsForAnyTenant(outsider.userId)).toHaveLength(0);
    expect(await rowsForAnyTenant(ghost)).toHaveLength(0);
    const forTicket = await ctx.db.selectFrom('notifications').select('id').where('ticket_id', '=', t.id).execute();
    expect(forTicket).toHaveLength(0);
  });
});

describe('GET /v1/notifications', () => {
  test('returns only the caller\'s notifications', async () => {
    const a = await addMember(ctx, ws, 'editor');
    const b = await addMember(ctx, ws, 'editor');
    const aIds = await giveNotifications(a, 2);
    const bIds = await giveNotifications(b, 1);

    const aSeen = (await inbox(a.token)).map((n) => n.id);
    expect(aSeen.sort()).toEqual([...aIds].sort());
    const bSeen = (await inbox(b.token)).map((n) => n.id);
    expect(bSeen).toEqual(bIds);
    // The owner, who caused them all, sees none of them.
    const ownerSeen = (await inbox(ws.ownerKey, '?limit=500')).map((n) => n.id);
    for (const id of [...aIds, ...bIds]) expect(ownerSeen).not.toContain(id);
  });

  test('newest first', async () => {
    const c = await addMember(ctx, ws, 'editor');
    const tickets: string[] = [];
    for (let i = 0; i < 3; i += 1) tickets.push((await createTicket(ctx, ws, { assignee_id: c.userId })).id);
    const seen = await inbox(c.token);
    expect(seen.map((n) => n.ticket_id)).toEqual([...tickets].reverse());
    const times = seen.map((n) => Date.parse(n.created_at));
    expect([...times].sort((x, y) => y - x)).toEqual(times);
  });

  test('unread_only=true lists only unread ones; false (and absent) lists all; anything else is 400', async () => {
    const a = await addMember(ctx, ws, 'editor');
    const ids = await giveNotifications(a, 3);
    expect((await ok(markRead(a.token, { ids: [ids[1]] }), 200)).updated).toBe(1);

    const unread = await inbox(a.token, '?unread_only=true');
    expect(unread.map((n) => n.id).sort()).toEqual([ids[0], ids[2]].sort());
    expect(unread.every((n) => n.read_at === null)).toBe(true);

    const all = await inbox(a.token, '?unread_only=false');
    expect(all).toHaveLength(3);
    expect(all.find((n) => n.id === ids[1])!.read_at).toEqual(expect.any(String));
    expect(await inbox(a.token)).toHaveLength(3);

    const bad = await ctx.http.get('/v1/notifications?unread_only=yes').set(bearer(a.token));
    expect(bad.status).toBe(400);
  });
});

describe('POST /v1/notifications/mark-read', () => {
  test('ids: updated counts the rows changed; the same ids again count 0', async () => {
    const a = await addMember(ctx, ws, 'editor');
    const ids = await giveNotifications(a, 3);
    const res = await markRead(a.token, { ids: [ids[0], ids[1]] });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ updated: 2 });

    const rows = await rowsFor(a.userId);
    expect(rows.filter((r) => r.read_at !== null).map((r) => r.id).sort()).toEqual([ids[0], ids[1]].sort());
    const firstReadAt = rows.find((r) => r.id === ids[0])!.read_at!.getTime();

    const again = await markRead(a.token, { ids: [ids[0], ids[1]] });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ updated: 0 });
    // Already-read rows are not touched again (read_at keeps its first value).
    expect((await rowsFor(a.userId)).find((r) => r.id === ids[0])!.read_at!.getTime()).toBe(firstReadAt);
    expect(await unreadCount(a.userId)).toBe(1);
  });

  test('a duplicated id counts once; an unknown id counts 0', async () => {
    const a = await addMember(ctx, ws, 'editor');
    const [id] = await giveNotifications(a, 1);
    expect((await markRead(a.token, { ids: [id, id, newId()] })).body).toEqual({ updated: 1 });
  });

  test('another user\'s id is ignored: updated 0 and their notification stays unread', async () => {
    const a = await addMember(ctx, ws, 'editor');
    const b = await addMember(ctx, ws, 'editor');
    const [bId] = await giveNotifications(b, 1);
    const res = await markRead(a.token, { ids: [bId] });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ updated: 0 });
    expect((await rowsFor(b.userId))[0]!.read_at).toBeNull();
    expect((await inbox(b.token, '?unread_only=true')).map((n) => n.id)).toEqual([bId]);
  });

  test('a mix of own unread, own read and someone else\'s counts only the own unread ones', async () => {
    const a = await addMember(ctx, ws, 'editor');
    const b = await addMember(ctx, ws, 'editor');
    const [u1, u2, r1] = await giveNotifications(a, 3);
    await ok(markRead(a.token, { ids: [r1] }), 200);
    const [bId] = await giveNotifications(b, 1);

    const res = await markRead(a.token, { ids: [u1, r1, bId, u2] });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ updated: 2 });
    expect(await unreadCount(a.userId)).toBe(0);
    expect(await unreadCount(b.userId)).toBe(1);
  });

  test('all: true marks every unread notification of the caller, and only the caller\'s', async () => {
    const a = await addMember(ctx, ws, 'editor');
    const b = await addMember(ctx, ws, 'editor');
    const ids = await giveNotifications(a, 4);
    await ok(markRead(a.token, { ids: [ids[0]] }), 200);
    await giveNotifications(b, 2);
    const bBefore = await unreadCount(b.userId);
    const ownerBefore = await unreadCount(ws.ownerId);

    const res = await markRead(a.token, { all: true });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ updated: 3 });
    expect(await unreadCount(a.userId)).toBe(0);
    expect(await inbox(a.token, '?unread_only=true')).toHaveLength(0);
    expect(await unreadCount(b.userId)).toBe(bBefore);
    expect(bBefore).toBe(2);
    expect(await unreadCount(ws.ownerId)).toBe(ownerBefore);

    expect((await markRead(a.token, { all: true })).body).toEqual({ updated: 0 });
  });

  test.each<[string, unknown]>([
    ['neither ids nor all', {}],
    ['both ids and all', { ids: ['IDS'], all: true }],
    ['all: false', { all: false }],
    ['all: "true" (a string)', { all: 'true' }],
    ['ids: []', { ids: [] }],
    ['a non-uuid id', { ids: ['not-a-uuid'] }],
    ['ids not an array', { ids: 'IDS' }],
    ['an unknown field', { all: true, everything: true }],
  ])('%s is 400 and changes nothing', async (_why, body) => {
    const a = await addMember(ctx, ws, 'editor');
    const [id] = await giveNotifications(a, 1);
    const sent = JSON.parse(JSON.stringify(body).replaceAll('IDS', id!));
    const res = await markRead(a.token, sent);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect(await unreadCount(a.userId)).toBe(1);
  });

  test('an empty body is 400 too', async () => {
    const a = await addMember(ctx, ws, 'editor');
    await giveNotifications(a, 1);
    const res = await ctx.http.post('/v1/notifications/mark-read').set(bearer(a.token));
    expect(res.status).toBe(400);
    expect(await unreadCount(a.userId)).toBe(1);
  });
});

describe('access', () => {
  test('a viewer may list and mark read their own notifications', async () => {
    const v = await addMember(ctx, ws, 'viewer');
    const ids = await giveNotifications(v, 2);
    expect((await inbox(v.token)).map((n) => n.id).sort()).toEqual([...ids].sort());
    const res = await markRead(v.token, { ids: [ids[0]] });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ updated: 1 });
    expect((await markRead(v.token, { all: true })).body).toEqual({ updated: 1 });
  });

  test('a key holding notifications:read may list and mark read (as its creator); a key without it is 403 insufficient_scope', async () => {
    const a = await addMember(ctx, ws, 'editor');
    const t = await createTicket(ctx, ws);
    await patch(a.token, t.id, { assignee_id: ws.ownerId });
    const mine = (await rowsFor(ws.ownerId)).filter((r) => r.ticket_id === t.id);
    expect(mine).toHaveLength(1);
    expect(mine[0]!.kind).toBe('assigned');

    const key = await mintKey(ctx, ws.ownerKey, { scopes: ['notifications:read'] });
    expect((await inbox(key.secret, '?limit=500')).map((n) => n.id)).toContain(mine[0]!.id);
    const res = await markRead(key.secret, { ids: [mine[0]!.id] });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ updated: 1 });

    const wrong = await mintKey(ctx, ws.ownerKey, { scopes: ['tickets:write'] });
    for (const r of [await ctx.http.get('/v1/notifications').set(bearer(wrong.secret)), await markRead(wrong.secret, { all: true })]) {
      expect(r.status).toBe(403);
      expect(r.body.code).toBe('insufficient_scope');
    }
  });

  test('no credential is 401', async () => {
    expect((await ctx.http.get('/v1/notifications')).status).toBe(401);
    expect((await ctx.http.post('/v1/notifications/mark-read').send({ all: true })).status).toBe(401);
  });

  test('another workspace\'s notifications are invisible and untouchable, even for the same person', async () => {
    // One person (one realm identity), a member of both workspaces; each workspace has its own row for them.
    const x = await addMember(ctx, ws, 'editor');
    const addToOther = await ctx.http
      .post('/v1/members')
      .set(bearer(other.ownerKey))
      .send({ email: x.email, name: 'editor person', role: 'editor', realm_subject: x.subject });
    expect(addToOther.status).toBe(201);
    const xOther = addToOther.body.user_id as string;
    const xInOther = await ctx.realm.sign({ sub: x.subject, tenant_id: other.tenantId });

    const theirTicket = await createTicket(ctx, other);
    await note(other.ownerKey, theirTicket.id, `@${xOther} over here`);
    const [theirs] = await rowsFor(xOther, other.tenantId);
    expect(theirs).toBeDefined();
    const [ours] = await giveNotifications(x, 1);

    expect((await inbox(x.token)).map((n) => n.id)).toEqual([ours]);
    expect((await inbox(xInOther)).map((n) => n.id)).toEqual([theirs!.id]);

    expect((await markRead(x.token, { ids: [theirs!.id] })).body).toEqual({ updated: 0 });
    expect((await markRead(x.token, { all: true })).body).toEqual({ updated: 1 });
    expect(await unreadCount(xOther, other.tenantId)).toBe(1);

    // The other workspace's owner sees nothing of this workspace either.
    const otherOwnerSeen = (await inbox(other.ownerKey, '?limit=500')).map((n) => n.id);
    expect(otherOwnerSeen).not.toContain(ours);
    expect((await markRead(other.ownerKey, { ids: [ours] })).body).toEqual({ updated: 0 });
  });
});
