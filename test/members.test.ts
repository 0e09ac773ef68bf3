import { randomBytes, randomUUID } from 'node:crypto';
import { addMember, bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

const { ctx } = useTestApp();

const tag = () => randomBytes(4).toString('hex');

interface MemberView {
  user_id: string;
  email: string;
  name: string;
  role: string;
  status: string;
  realm_subject: string | null;
  created_at: string;
  updated_at: string;
}

async function listMembers(ws: Workspace): Promise<MemberView[]> {
  const res = await ctx.http.get('/v1/members').set(bearer(ws.ownerKey));
  expect(res.status).toBe(200);
  return res.body.members as MemberView[];
}

async function activeOwners(tenantId: string): Promise<number> {
  const row = await ctx.db
    .selectFrom('memberships')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('tenant_id', '=', tenantId)
    .where('role', '=', 'owner')
    .where('status', '=', 'active')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

const patchMember = (token: string, userId: string, body: unknown) =>
  ctx.http.patch(`/v1/members/${userId}`).set(bearer(token)).send(body as object);

const newMemberBody = (role: string, extra: Record<string, unknown> = {}) => {
  const subject = `m-${tag()}`;
  return { email: `${subject}@acme.test`, name: 'New Person', role, realm_subject: subject, ...extra };
};

describe('GET /v1/members', () => {
  test('is open to a viewer and lists every member with its documented fields', async () => {
    const ws = await createWorkspace(ctx);
    const viewer = await addMember(ctx, ws, 'viewer');
    const res = await ctx.http.get('/v1/members').set(bearer(viewer.token));
    expect(res.status).toBe(200);
    expect(Object.keys(res.body)).toEqual(['members', 'next_cursor']);
    expect(res.body.next_cursor).toBeNull();
    expect(res.body.members).toHaveLength(2);
    for (const m of res.body.members) {
      expect(Object.keys(m).sort()).toEqual(
        ['created_at', 'email', 'name', 'realm_subject', 'role', 'status', 'updated_at', 'user_id'].sort(),
      );
    }
    const me = res.body.members.find((m: MemberView) => m.user_id === viewer.userId);
    expect(me).toMatchObject({ email: viewer.email, role: 'viewer', status: 'active', realm_subject: viewer.subject });
    expect(me.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T.*Z$/);
    const owner = res.body.members.find((m: MemberView) => m.user_id === ws.ownerId);
    expect(owner).toMatchObject({ role: 'owner', realm_subject: ws.ownerSubject });
  });
});

describe('POST /v1/members', () => {
  test('lets an admin add a member and returns the new membership with 201', async () => {
    const ws = await createWorkspace(ctx);
    const admin = await addMember(ctx, ws, 'admin');
    const body = newMemberBody('editor');
    const res = await ctx.http.post('/v1/members').set(bearer(admin.token)).send(body);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ email: body.email, name: body.name, role: 'editor', status: 'active', realm_subject: body.realm_subject });
    expect(res.body.user_id).toMatch(/^[0-9a-f-]{36}$/);
    expect((await listMembers(ws)).map((m) => m.user_id)).toContain(res.body.user_id);
  });

  test('refuses an editor with 403 insufficient_role and adds nobody', async () => {
    const ws = await createWorkspace(ctx);
    const editor = await addMember(ctx, ws, 'editor');
    const before = await listMembers(ws);
    const res = await ctx.http.post('/v1/members').set(bearer(editor.token)).send(newMemberBody('viewer'));
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_role');
    expect(await listMembers(ws)).toEqual(before);
  });

  test('refuses a duplicate membership with 409 member_exists', async () => {
    const ws = await createWorkspace(ctx);
    const member = await addMember(ctx, ws, 'viewer');
    const res = await ctx.http
      .post('/v1/members')
      .set(bearer(ws.ownerKey))
      .send({ email: member.email, name: 'Again', role: 'editor' });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('member_exists');
    const after = (await listMembers(ws)).find((m) => m.user_id === member.userId);
    expect(after?.role).toBe('viewer');
  });

  test('refuses an admin who grants the owner role with 403 insufficient_role and writes nothing', async () => {
    const ws = await createWorkspace(ctx);
    const admin = await addMember(ctx, ws, 'admin');
    const before = await listMembers(ws);
    const body = newMemberBody('owner');
    const res = await ctx.http.post('/v1/members').set(bearer(admin.token)).send(body);
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_role');
    expect(await listMembers(ws)).toEqual(before);
    const user = await ctx.db.selectFrom('users').select('id').where('email', '=', body.email).executeTakeFirst();
    expect(user).toBeUndefined();
  });

  test('lets an owner grant the owner role', async () => {
    const ws = await createWorkspace(ctx);
    const res = await ctx.http.post('/v1/members').set(bearer(ws.ownerKey)).send(newMemberBody('owner'));
    expect(res.status).toBe(201);
    expect(res.body.role).toBe('owner');
    expect(await activeOwners(ws.tenantId)).toBe(2);
  });

  test('an email another workspace knows becomes a new person of this workspace, named as typed here, invited and unbound', async () => {
    const wsA = await createWorkspace(ctx);
    const wsB = await createWorkspace(ctx);
    const person = await addMember(ctx, wsA, 'editor');
    const res = await ctx.http
      .post('/v1/members')
      .set(bearer(wsB.ownerKey))
      .send({ email: person.email.toUpperCase(), name: 'A Different Name', role: 'viewer' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ name: 'A Different Name', email: person.email.toUpperCase(), realm_subject: null, status: 'invited', role: 'viewer' });
    expect(res.body.user_id).not.toBe(person.userId);
    const inA = (await listMembers(wsA)).find((m) => m.user_id === person.userId);
    expect(inA).toMatchObject({ name: 'editor person', realm_subject: person.subject, status: 'active' });
    // The invitation binds only through the person's own sign-in with a verified email, then acts with B's role.
    const plain = await ctx.realm.sign({ sub: person.subject, tenant_id: wsB.tenantId });
    expect((await ctx.http.get('/v1/members').set(bearer(plain))).status).toBe(404);
    const verified = await ctx.realm.sign({ sub: person.subject, tenant_id: wsB.tenantId, email: person.email, email_verified: true });
    expect((await ctx.http.get('/v1/members').set(bearer(verified))).status).toBe(200);
    expect((await ctx.http.post('/v1/agents').set(bearer(plain)).send({ name: 'x' })).status).toBe(403);
    expect((await listMembers(wsB)).find((m) => m.user_id === res.body.user_id)).toMatchObject({ status: 'active', realm_subject: person.subject });
  });

  test('an admin-supplied realm subject binds in this workspace only: another workspace binds the same email to its own subject', async () => {
    const wsA = await createWorkspace(ctx);
    const wsB = await createWorkspace(ctx);
    const person = await addMember(ctx, wsA, 'editor');
    const other = `other-${tag()}`;
    const res = await ctx.http.post('/v1/members').set(bearer(wsB.ownerKey)).send({ email: person.email, name: 'Elsewhere', role: 'viewer', realm_subject: other });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ realm_subject: other, status: 'active', name: 'Elsewhere' });
    expect((await listMembers(wsA)).find((m) => m.user_id === person.userId)?.realm_subject).toBe(person.subject);
    // A's subject reaches nothing in B, and B's subject nothing in A.
    expect((await ctx.http.get('/v1/members').set(bearer(await ctx.realm.sign({ sub: person.subject, tenant_id: wsB.tenantId })))).status).toBe(404);
    expect((await ctx.http.get('/v1/members').set(bearer(await ctx.realm.sign({ sub: other, tenant_id: wsA.tenantId })))).status).toBe(404);
  });

  test('refuses a realm subject already bound to another member of this workspace with 409 realm_subject_taken and writes nothing', async () => {
    const ws = await createWorkspace(ctx);
    const member = await addMember(ctx, ws, 'viewer');
    const before = await listMembers(ws);
    const users = await ctx.db.selectFrom('users').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    const res = await ctx.http.post('/v1/members').set(bearer(ws.ownerKey)).send(newMemberBody('editor', { realm_subject: member.subject }));
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('realm_subject_taken');
    expect(await listMembers(ws)).toEqual(before);
    const after = await ctx.db.selectFrom('users').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    expect(Number(after.n)).toBe(Number(users.n));
  });

  test('refuses an email this workspace already has, in any letter case, with 409 member_exists', async () => {
    const ws = await createWorkspace(ctx);
    const invited = await ctx.http.post('/v1/members').set(bearer(ws.ownerKey)).send({ email: `Pat.${tag()}@Acme.test`, name: 'Pat', role: 'viewer' });
    expect(invited.status).toBe(201);
    const res = await ctx.http.post('/v1/members').set(bearer(ws.ownerKey)).send({ email: invited.body.email.toLowerCase(), name: 'Pat again', role: 'editor' });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('member_exists');
  });
});

describe('invited members', () => {
  async function invite(ws: Workspace, role = 'editor') {
    const res = await ctx.http.post('/v1/members').set(bearer(ws.ownerKey)).send({ email: `inv-${tag()}@acme.test`, name: 'Invited', role });
    expect(res.status).toBe(201);
    return res.body as MemberView;
  }

  test('an invited member\'s status cannot be patched (409 member_invited); their role can', async () => {
    const ws = await createWorkspace(ctx);
    const m = await invite(ws);
    for (const status of ['active', 'deactivated']) {
      const res = await patchMember(ws.ownerKey, m.user_id, { status });
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('member_invited');
    }
    const both = await patchMember(ws.ownerKey, m.user_id, { role: 'admin', status: 'active' });
    expect(both.status).toBe(409);
    const role = await patchMember(ws.ownerKey, m.user_id, { role: 'viewer' });
    expect(role.status).toBe(200);
    expect(role.body).toMatchObject({ role: 'viewer', status: 'invited' });
  });

  test('an invited member cannot be made a ticket assignee', async () => {
    const ws = await createWorkspace(ctx);
    const m = await invite(ws);
    const res = await ctx.http
      .post('/v1/tickets')
      .set(bearer(ws.ownerKey))
      .send({ subject: 'Help', description: 'x', customer_email: `c-${tag()}@cust.test`, assignee_id: m.user_id });
    expect(res.status).toBe(422);
    expect(res.body.code).toBe('assignee_unknown');
  });
});

describe('PATCH /v1/members/{user_id}', () => {
  test('a demotion takes effect on the member\'s very next request', async () => {
    const ws = await createWorkspace(ctx);
    const admin = await addMember(ctx, ws, 'admin');
    expect((await ctx.http.post('/v1/agents').set(bearer(admin.token)).send({ name: 'before' })).status).toBe(201);
    const res = await patchMember(ws.ownerKey, admin.userId, { role: 'viewer' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ user_id: admin.userId, role: 'viewer', status: 'active' });
    const after = await ctx.http.post('/v1/agents').set(bearer(admin.token)).send({ name: 'after' });
    expect(after.status).toBe(403);
    expect(after.body.code).toBe('insufficient_role');
  });

  test('a demotion narrows the keys the member created on the very next request', async () => {
    const ws = await createWorkspace(ctx);
    const admin = await addMember(ctx, ws, 'admin');
    const key = await mintKey(ctx, admin.token, { scopes: ['*'] });
    expect((await ctx.http.post('/v1/agents').set(bearer(key.secret)).send({ name: 'before' })).status).toBe(201);
    expect((await patchMember(ws.ownerKey, admin.userId, { role: 'viewer' })).status).toBe(200);
    const after = await ctx.http.post('/v1/agents').set(bearer(key.secret)).send({ name: 'after' });
    expect(after.status).toBe(403);
    expect(after.body.code).toBe('insufficient_role');
    // Still a viewer: reads keep working.
    expect((await ctx.http.get('/v1/agents').set(bearer(key.secret))).status).toBe(200);
  });

  test('a promotion takes effect on the member\'s very next request', async () => {
    const ws = await createWorkspace(ctx);
    const viewer = await addMember(ctx, ws, 'viewer');
    expect((await ctx.http.post('/v1/agents').set(bearer(viewer.token)).send({ name: 'no' })).status).toBe(403);
    expect((await patchMember(ws.ownerKey, viewer.userId, { role: 'admin' })).status).toBe(200);
    expect((await ctx.http.post('/v1/agents').set(bearer(viewer.token)).send({ name: 'yes' })).status).toBe(201);
  });

  test('refuses an admin who demotes an owner with 403 insufficient_role', async () => {
    const ws = await createWorkspace(ctx);
    const owner2 = await addMember(ctx, ws, 'owner');
    const admin = await addMember(ctx, ws, 'admin');
    const res = await patchMember(admin.token, owner2.userId, { role: 'viewer' });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_role');
    expect((await listMembers(ws)).find((m) => m.user_id === owner2.userId)?.role).toBe('owner');
  });

  test('refuses an admin who promotes someone to owner with 403 insufficient_role', async () => {
    const ws = await createWorkspace(ctx);
    const admin = await addMember(ctx, ws, 'admin');
    const viewer = await addMember(ctx, ws, 'viewer');
    const res = await patchMember(admin.token, viewer.userId, { role: 'owner' });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_role');
    expect(await activeOwners(ws.tenantId)).toBe(1);
  });

  test('refuses to demote the last active owner with 409 last_owner', async () => {
    const ws = await createWorkspace(ctx);
    const res = await patchMember(ws.ownerKey, ws.ownerId, { role: 'admin' });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('last_owner');
    expect(await activeOwners(ws.tenantId)).toBe(1);
  });

  test('refuses to deactivate the last active owner with 409 last_owner', async () => {
    const ws = await createWorkspace(ctx);
    const res = await patchMember(ws.ownerKey, ws.ownerId, { status: 'deactivated' });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('last_owner');
    expect(await activeOwners(ws.tenantId)).toBe(1);
  });

  test('counts a deactivated owner as no owner when guarding the last one', async () => {
    const ws = await createWorkspace(ctx);
    const owner2 = await addMember(ctx, ws, 'owner');
    expect((await patchMember(ws.ownerKey, owner2.userId, { status: 'deactivated' })).status).toBe(200);
    const res = await patchMember(ws.ownerKey, ws.ownerId, { role: 'admin' });
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('last_owner');
  });

  test('with two owners lets one be demoted, then guards the remaining one', async () => {
    const ws = await createWorkspace(ctx);
    const owner2 = await addMember(ctx, ws, 'owner');
    const res = await patchMember(ws.ownerKey, owner2.userId, { role: 'admin' });
    expect(res.status).toBe(200);
    expect(res.body.role).toBe('admin');
    expect(await activeOwners(ws.tenantId)).toBe(1);
    const again = await patchMember(ws.ownerKey, ws.ownerId, { role: 'admin' });
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('last_owner');
  });

  test('a deactivated member\'s access token gets 403 member_deactivated', async () => {
    const ws = await createWorkspace(ctx);
    const editor = await addMember(ctx, ws, 'editor');
    expect((await ctx.http.get('/v1/members').set(bearer(editor.token))).status).toBe(200);
    const res = await patchMember(ws.ownerKey, editor.userId, { status: 'deactivated' });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('deactivated');
    const after = await ctx.http.get('/v1/members').set(bearer(editor.token));
    expect(after.status).toBe(403);
    expect(after.body.code).toBe('member_deactivated');
  });

  test('a key created by a member who is then deactivated gets 401 on the very next request', async () => {
    const ws = await createWorkspace(ctx);
    const admin = await addMember(ctx, ws, 'admin');
    const key = await mintKey(ctx, admin.token, { scopes: ['*'] });
    expect((await ctx.http.get('/v1/members').set(bearer(key.secret))).status).toBe(200);
    expect((await patchMember(ws.ownerKey, admin.userId, { status: 'deactivated' })).status).toBe(200);
    const after = await ctx.http.get('/v1/members').set(bearer(key.secret));
    expect(after.status).toBe(401);
    expect(after.body.code).toBe('unauthenticated');
    expect(after.headers['www-authenticate']).toMatch(/^Bearer/);
  });

  test('answers 404 for an unknown user id', async () => {
    const ws = await createWorkspace(ctx);
    const res = await patchMember(ws.ownerKey, randomUUID(), { role: 'viewer' });
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('not_found');
  });

  test('answers 404 for a user id that is not a uuid', async () => {
    const ws = await createWorkspace(ctx);
    const res = await patchMember(ws.ownerKey, 'not-a-uuid', { role: 'viewer' });
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('not_found');
  });

  test('refuses an empty body with 400 validation_failed and changes nothing', async () => {
    const ws = await createWorkspace(ctx);
    const viewer = await addMember(ctx, ws, 'viewer');
    const before = await listMembers(ws);
    const res = await patchMember(ws.ownerKey, viewer.userId, {});
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect(await listMembers(ws)).toEqual(before);
  });

  test('refuses an unknown field with 400 naming it and changes nothing', async () => {
    const ws = await createWorkspace(ctx);
    const viewer = await addMember(ctx, ws, 'viewer');
    const before = await listMembers(ws);
    const res = await patchMember(ws.ownerKey, viewer.userId, { role: 'editor', email: 'x@evil.test' });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('validation_failed');
    expect(JSON.stringify(res.body.errors)).toContain('email');
    expect(await listMembers(ws)).toEqual(before);
  });
});

describe('DELETE /v1/members/{user_id}', () => {
  test('removes a member with 204; their token then gets 404 and their keys 401', async () => {
    const ws = await createWorkspace(ctx);
    const admin = await addMember(ctx, ws, 'admin');
    const key = await mintKey(ctx, admin.token, { scopes: ['*'] });
    expect((await ctx.http.get('/v1/members').set(bearer(key.secret))).status).toBe(200);

    const res = await ctx.http.delete(`/v1/members/${admin.userId}`).set(bearer(ws.ownerKey));
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect((await listMembers(ws)).map((m) => m.user_id)).not.toContain(admin.userId);

    const viaToken = await ctx.http.get('/v1/members').set(bearer(admin.token));
    expect(viaToken.status).toBe(404);
    expect(viaToken.body.code).toBe('not_found');

    const viaKey = await ctx.http.get('/v1/members').set(bearer(key.secret));
    expect(viaKey.status).toBe(401);
    expect(viaKey.body.code).toBe('unauthenticated');
  });

  test('refuses to remove the last owner with 409 last_owner', async () => {
    const ws = await createWorkspace(ctx);
    const res = await ctx.http.delete(`/v1/members/${ws.ownerId}`).set(bearer(ws.ownerKey));
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('last_owner');
    expect(await activeOwners(ws.tenantId)).toBe(1);
  });

  test('refuses an admin who removes an owner with 403 insufficient_role', async () => {
    const ws = await createWorkspace(ctx);
    const owner2 = await addMember(ctx, ws, 'owner');
    const admin = await addMember(ctx, ws, 'admin');
    const res = await ctx.http.delete(`/v1/members/${owner2.userId}`).set(bearer(admin.token));
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_role');
    expect(await activeOwners(ws.tenantId)).toBe(2);
  });

  test('answers 404 when the member was already removed', async () => {
    const ws = await createWorkspace(ctx);
    const viewer = await addMember(ctx, ws, 'viewer');
    expect((await ctx.http.delete(`/v1/members/${viewer.userId}`).set(bearer(ws.ownerKey))).status).toBe(204);
    const again = await ctx.http.delete(`/v1/members/${viewer.userId}`).set(bearer(ws.ownerKey));
    expect(again.status).toBe(404);
    expect(again.body.code).toBe('not_found');
  });
});

describe('owner guard under concurrency', () => {
  test('two owners demoting or deactivating each other at once always leave exactly one active owner', async () => {
    for (let round = 0; round < 10; round++) {
      const ws = await createWorkspace(ctx);
      const owner2 = await addMember(ctx, ws, 'owner');
      const change = round % 2 === 0 ? { role: 'admin' } : { status: 'deactivated' };
      const [a, b] = await Promise.all([
        patchMember(ws.ownerKey, owner2.userId, change),
        patchMember(owner2.token, ws.ownerId, change),
      ]);
      const statuses = [a.status, b.status].sort();
      expect(statuses.filter((s) => s === 200)).toHaveLength(1);
      expect([403, 409]).toContain(statuses[1]);
      expect(await activeOwners(ws.tenantId)).toBe(1);
      // The API agrees with the database.
      const members = (await ctx.http.get('/v1/members').set(bearer(ws.ownerKey))).body.members as MemberView[] | undefined;
      const viaApi = members ?? (await ctx.http.get('/v1/members').set(bearer(owner2.token))).body.members;
      expect(viaApi.filter((m: MemberView) => m.role === 'owner' && m.status === 'active')).toHaveLength(1);
    }
  });
});

describe('owner rule under concurrency', () => {
  test('an owner demoted mid-flight cannot demote another owner after losing the role', async () => {
    // A demotes B while B demotes C. Either order is fine, but B's change may only land while B is still an owner:
    // if B's change is recorded after B's own demotion, a non-owner changed an owner's role.
    const violations: string[] = [];
    for (let round = 0; round < 5; round++) {
      const ws = await createWorkspace(ctx);
      const b = await addMember(ctx, ws, 'owner');
      const c = await addMember(ctx, ws, 'owner');
      const [aDemotesB, bDemotesC] = await Promise.all([
        patchMember(ws.ownerKey, b.userId, { role: 'admin' }),
        patchMember(b.token, c.userId, { role: 'admin' }),
      ]);
      expect(aDemotesB.status).toBe(200);
      expect([200, 403]).toContain(bDemotesC.status);
      if (bDemotesC.status !== 200) continue;
      const audit = (await ctx.http.get('/v1/audit-log').set(bearer(ws.ownerKey))).body.audit_entries as Array<Record<string, unknown>>;
      const oldestFirst = audit
        .filter((e) => e.action === 'member.updated')
        .reverse()
        .map((e) => (e.target_id === b.userId ? 'B demoted' : 'C demoted'));
      if (oldestFirst[0] !== 'C demoted') violations.push(`round ${round}: ${oldestFirst.join(' then ')}`);
    }
    expect(violations).toEqual([]);
  });
});

describe('audit of membership changes', () => {
  test('writes member.added, member.updated and member.removed, listed newest first', async () => {
    const ws = await createWorkspace(ctx);
    const viewer = await addMember(ctx, ws, 'viewer');
    expect((await patchMember(ws.ownerKey, viewer.userId, { role: 'editor' })).status).toBe(200);
    expect((await ctx.http.delete(`/v1/members/${viewer.userId}`).set(bearer(ws.ownerKey))).status).toBe(204);

    const res = await ctx.http.get('/v1/audit-log').set(bearer(ws.ownerKey));
    expect(res.status).toBe(200);
    const entries = res.body.audit_entries as Array<Record<string, unknown>>;
    const mine = entries.filter((e) => e.target_id === viewer.userId);
    expect(mine.map((e) => e.action)).toEqual(['member.removed', 'member.updated', 'member.added']);
    expect(entries.slice(0, 3).map((e) => e.action)).toEqual(['member.removed', 'member.updated', 'member.added']);
    for (const e of mine) {
      expect(e).toMatchObject({ actor_user_id: ws.ownerId, actor_api_key_id: ws.ownerKeyId, target_type: 'user' });
    }
    expect(mine[1]!.details).toEqual({ before: { role: 'viewer', status: 'active' }, after: { role: 'editor', status: 'active' } });
    expect(mine[2]!.details).toMatchObject({ email: viewer.email, role: 'viewer' });
    const times = entries.map((e) => Date.parse(String(e.created_at)));
    expect([...times].sort((x, y) => y - x)).toEqual(times);
  });

  test('a refused change writes no audit entry', async () => {
    const ws = await createWorkspace(ctx);
    const before = (await ctx.http.get('/v1/audit-log?limit=500').set(bearer(ws.ownerKey))).body.audit_entries.length as number;
    expect((await patchMember(ws.ownerKey, ws.ownerId, { role: 'admin' })).status).toBe(409);
    expect((await ctx.http.delete(`/v1/members/${ws.ownerId}`).set(bearer(ws.ownerKey))).status).toBe(409);
    const after = (await ctx.http.get('/v1/audit-log?limit=500').set(bearer(ws.ownerKey))).body.audit_entries.length as number;
    expect(after).toBe(before);
  });
});

describe('agents', () => {
  test('an admin creates an agent with 201 {id, name, created_at}', async () => {
    const ws = await createWorkspace(ctx);
    const admin = await addMember(ctx, ws, 'admin');
    const res = await ctx.http.post('/v1/agents').set(bearer(admin.token)).send({ name: 'Triage bot' });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(['created_at', 'id', 'name']);
    expect(res.body.name).toBe('Triage bot');
    expect(res.body.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-/);
  });

  test('refuses a viewer creating an agent with 403 insufficient_role', async () => {
    const ws = await createWorkspace(ctx);
    const viewer = await addMember(ctx, ws, 'viewer');
    const res = await ctx.http.post('/v1/agents').set(bearer(viewer.token)).send({ name: 'Nope' });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_role');
    const list = await ctx.http.get('/v1/agents').set(bearer(ws.ownerKey));
    expect(list.body.agents).toEqual([]);
  });

  test('a viewer lists agents in an {agents: [...]} envelope', async () => {
    const ws = await createWorkspace(ctx);
    const viewer = await addMember(ctx, ws, 'viewer');
    const created = await ctx.http.post('/v1/agents').set(bearer(ws.ownerKey)).send({ name: 'Bot' });
    const res = await ctx.http.get('/v1/agents').set(bearer(viewer.token));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ agents: [created.body] });
  });

  test('a key bound to agent X with admin-resources:read sees only agent X', async () => {
    const ws = await createWorkspace(ctx);
    const x = (await ctx.http.post('/v1/agents').set(bearer(ws.ownerKey)).send({ name: 'X' })).body;
    const y = (await ctx.http.post('/v1/agents').set(bearer(ws.ownerKey)).send({ name: 'Y' })).body;
    expect(y.id).toBeDefined();
    const key = await mintKey(ctx, ws.ownerKey, { agent_id: x.id, scopes: ['admin-resources:read'] });
    expect(key.scopes).toEqual(expect.arrayContaining(['admin-resources:read', `agent:${x.id}`]));
    const res = await ctx.http.get('/v1/agents').set(bearer(key.secret));
    expect(res.status).toBe(200);
    expect(res.body.agents.map((a: { id: string }) => a.id)).toEqual([x.id]);
    // The unbound owner key still sees both.
    expect((await ctx.http.get('/v1/agents').set(bearer(ws.ownerKey))).body.agents).toHaveLength(2);
  });

  test('a key holding only an agent:<uuid> scope is refused with 403 insufficient_scope', async () => {
    const ws = await createWorkspace(ctx);
    const x = (await ctx.http.post('/v1/agents').set(bearer(ws.ownerKey)).send({ name: 'X' })).body;
    const key = await mintKey(ctx, ws.ownerKey, { agent_id: x.id });
    expect(key.scopes).toEqual([`agent:${x.id}`]);
    const res = await ctx.http.get('/v1/agents').set(bearer(key.secret));
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_scope');
  });
});

describe('tenancy', () => {
  test('another workspace\'s owner key cannot patch or remove a member here: 404, nothing changes', async () => {
    const wsA = await createWorkspace(ctx);
    const wsB = await createWorkspace(ctx);
    const victim = await addMember(ctx, wsA, 'admin');
    const before = await listMembers(wsA);

    const patch = await patchMember(wsB.ownerKey, victim.userId, { role: 'viewer' });
    expect(patch.status).toBe(404);
    expect(patch.body.code).toBe('not_found');

    const del = await ctx.http.delete(`/v1/members/${victim.userId}`).set(bearer(wsB.ownerKey));
    expect(del.status).toBe(404);
    expect(del.body.code).toBe('not_found');

    const ownerOfA = await patchMember(wsB.ownerKey, wsA.ownerId, { status: 'deactivated' });
    expect(ownerOfA.status).toBe(404);

    expect(await listMembers(wsA)).toEqual(before);
    expect((await listMembers(wsB)).map((m) => m.user_id)).toEqual([wsB.ownerId]);
  });
});

describe('removal kills keys for good', () => {
  test('a removed member re-added later does not bring their old keys back', async () => {
    const ws = await createWorkspace(ctx);
    const admin = await addMember(ctx, ws, 'admin');
    const key = await mintKey(ctx, admin.token, { scopes: ['*'] });
    await ctx.http.delete(`/v1/members/${admin.userId}`).set(bearer(ws.ownerKey)).expect(204);
    await ctx.http
      .post('/v1/members')
      .set(bearer(ws.ownerKey))
      .send({ email: admin.email, name: 'back again', role: 'admin', realm_subject: admin.subject })
      .expect(201);
    expect((await ctx.http.get('/v1/members').set(bearer(admin.token))).status).toBe(200);
    const res = await ctx.http.get('/v1/members').set(bearer(key.secret));
    expect(res.status).toBe(401);
    expect(res.body.detail).toMatch(/revoked/);
    const audit = await ctx.http.get('/v1/audit-log').set(bearer(ws.ownerKey));
    const entry = audit.body.audit_entries.find((e: { target_id: string; action: string }) => e.target_id === key.id && e.action === 'api_key.revoked');
    expect(entry.details.reason).toBe('creator_removed');
  });
});
