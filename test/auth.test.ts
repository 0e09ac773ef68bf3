import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { buildOperationTable } from '../src/operations';
import { startTestApp, TEST_AUDIENCE, TEST_ISSUER, type TestContext } from './helpers/context';
import { addMember, bearer, createWorkspace, mintKey } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

const { ctx, ws } = useTestApp({ workspaces: 1 });

const SOME_ID = '0190a3b4-0000-7000-8000-0000000000aa';

describe('rule 1: Bearer credentials, told apart by their prefix', () => {
  test('refuses a request without Authorization with 401 and a Bearer challenge', async () => {
    const res = await ctx.http.get('/v1/members');
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('unauthenticated');
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
  });

  test('takes an sk_zr_ token as an API key and anything else as an access token', async () => {
    const owner = await ctx.realm.sign({ sub: ws.ownerSubject, tenant_id: ws.tenantId });
    expect((await ctx.http.get('/v1/members').set(bearer(ws.ownerKey))).status).toBe(200);
    expect((await ctx.http.get('/v1/members').set(bearer(owner))).status).toBe(200);
    // The owner's JWT with an sk_zr_ mark in front is judged as a key, and fails as one.
    const res = await ctx.http.get('/v1/members').set(bearer(`sk_zr_${owner}`));
    expect(res.status).toBe(401);
    expect(res.body.detail).toMatch(/API key/);
  });

  test('refuses an unknown key whose prefix looks real', async () => {
    const forged = ws.ownerKey.slice(0, -4) + 'AAAA';
    expect((await ctx.http.get('/v1/members').set(bearer(forged))).status).toBe(401);
  });
});

describe('rule 2: an access token acts as the signed-in person, role read live', () => {
  test('a demotion applies to the very next request', async () => {
    const admin = await addMember(ctx, ws, 'admin');
    expect((await ctx.http.get('/v1/api-keys').set(bearer(admin.token))).status).toBe(200);
    await ctx.http.patch(`/v1/members/${admin.userId}`).set(bearer(ws.ownerKey)).send({ role: 'viewer' }).expect(200);
    const res = await ctx.http.get('/v1/api-keys').set(bearer(admin.token));
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_role');
  });
});

describe('rule 3: an API key acts as its creator, bound to its workspace', () => {
  test('a demoted creator narrows the key: an admin operation answers 403', async () => {
    const admin = await addMember(ctx, ws, 'admin');
    const key = await mintKey(ctx, admin.token, { scopes: ['*'] });
    expect((await ctx.http.get('/v1/api-keys').set(bearer(key.secret))).status).toBe(200);
    await ctx.http.patch(`/v1/members/${admin.userId}`).set(bearer(ws.ownerKey)).send({ role: 'editor' }).expect(200);
    const res = await ctx.http.get('/v1/api-keys').set(bearer(key.secret));
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_role');
    // Still a valid credential for what an editor may do.
    expect((await ctx.http.get('/v1/members').set(bearer(key.secret))).status).toBe(200);
  });

  test('a removed creator kills the key: 401', async () => {
    const admin = await addMember(ctx, ws, 'admin');
    const key = await mintKey(ctx, admin.token, { scopes: ['*'] });
    await ctx.http.delete(`/v1/members/${admin.userId}`).set(bearer(ws.ownerKey)).expect(204);
    const res = await ctx.http.get('/v1/members').set(bearer(key.secret));
    expect(res.status).toBe(401);
    expect(res.body.code).toBe('unauthenticated');
  });

  test('a key cannot reach another workspace: its ids there are 404', async () => {
    const other = await createWorkspace(ctx);
    const res = await ctx.http.post(`/v1/api-keys/${other.ownerKeyId}/revoke`).set(bearer(ws.ownerKey));
    expect(res.status).toBe(404);
    const list = await ctx.http.get('/v1/api-keys').set(bearer(ws.ownerKey)).set('X-Tenant-Id', other.tenantId);
    expect(list.body.api_keys.map((k: { id: string }) => k.id)).not.toContain(other.ownerKeyId);
    expect((await ctx.http.get('/v1/members').set(bearer(other.ownerKey))).status).toBe(200);
  });
});

describe('rule 4: roles in ascending order with a floor per operation', () => {
  test('below the floor answers 403 insufficient_role; viewer-floor operations are open to every member', async () => {
    const viewer = await addMember(ctx, ws, 'viewer');
    const editor = await addMember(ctx, ws, 'editor');
    for (const m of [viewer, editor]) {
      const res = await ctx.http.post('/v1/api-keys').set(bearer(m.token)).send({ name: 'x' });
      expect(res.status).toBe(403);
      expect(res.body.code).toBe('insufficient_role');
      expect((await ctx.http.get('/v1/members').set(bearer(m.token))).status).toBe(200);
      expect((await ctx.http.get('/v1/agents').set(bearer(m.token))).status).toBe(200);
    }
  });
});

describe('rule 5: the credential selects the workspace; no membership is 404', () => {
  test('a token for a workspace the person is not a member of answers exactly like a nonexistent one', async () => {
    const other = await createWorkspace(ctx);
    const notMember = await ctx.realm.sign({ sub: ws.ownerSubject, tenant_id: other.tenantId });
    const nowhere = await ctx.realm.sign({ sub: ws.ownerSubject, tenant_id: SOME_ID });
    const a = await ctx.http.get('/v1/members').set(bearer(notMember));
    const b = await ctx.http.get('/v1/members').set(bearer(nowhere));
    expect(a.status).toBe(404);
    expect(b.status).toBe(404);
    expect({ ...a.body, request_id: undefined }).toEqual({ ...b.body, request_id: undefined });
  });
});

describe('rule 6: scope coverage', () => {
  test('a write scope covers the reads of its tag', async () => {
    const key = await mintKey(ctx, ws.ownerKey, { scopes: ['admin-resources:write'] });
    expect((await ctx.http.get('/v1/api-keys').set(bearer(key.secret))).status).toBe(200);
  });

  test('a read scope does not cover a write: 403 insufficient_scope', async () => {
    const key = await mintKey(ctx, ws.ownerKey, { scopes: ['admin-resources:read'] });
    const res = await ctx.http.post('/v1/agents').set(bearer(key.secret)).send({ name: 'bot' });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_scope');
  });

  test('a scope of another tag reaches nothing here', async () => {
    const key = await mintKey(ctx, ws.ownerKey, { scopes: ['tickets:*'] });
    expect((await ctx.http.get('/v1/members').set(bearer(key.secret))).status).toBe(403);
  });

  test('<tag>:* covers reads and writes of its tag', async () => {
    const key = await mintKey(ctx, ws.ownerKey, { scopes: ['admin-resources:*'] });
    expect((await ctx.http.post('/v1/agents').set(bearer(key.secret)).send({ name: 'bot' })).status).toBe(201);
    expect((await ctx.http.get('/v1/agents').set(bearer(key.secret))).status).toBe(200);
  });

  test('a key with an empty scope set is refused at every operation', async () => {
    const key = await mintKey(ctx, ws.ownerKey, { scopes: [] });
    for (const op of buildOperationTable().filter((o) => o.access !== 'public')) {
      const path = op.path.replace(/\{[^}]+\}/g, SOME_ID);
      const res = await ctx.http[op.method](path).set(bearer(key.secret)).send({});
      expect({ op: op.id, status: res.status, code: res.body.code }).toEqual({ op: op.id, status: 403, code: 'insufficient_scope' });
    }
  });
});

describe('rule 7: scopes are validated at creation', () => {
  test.each([['tickets:delete'], ['nope'], [':read'], ['tickets:read', 'bogus:write']])(
    'refuses %s with 422 and stores nothing',
    async (...scopes: string[]) => {
      const before = await ctx.http.get('/v1/api-keys?include_revoked=true').set(bearer(ws.ownerKey));
      const res = await ctx.http.post('/v1/api-keys').set(bearer(ws.ownerKey)).send({ name: 'bad', scopes });
      expect(res.status).toBe(422);
      expect(res.body.code).toBe('scope_invalid');
      const after = await ctx.http.get('/v1/api-keys?include_revoked=true').set(bearer(ws.ownerKey));
      expect(after.body.api_keys).toHaveLength(before.body.api_keys.length);
    },
  );
});

describe('rule 8: agent:<uuid> narrows but grants nothing alone', () => {
  test('a key with only an agent scope is refused; with an action scope it sees only its agent', async () => {
    const a = await ctx.http.post('/v1/agents').set(bearer(ws.ownerKey)).send({ name: 'Alpha' });
    await ctx.http.post('/v1/agents').set(bearer(ws.ownerKey)).send({ name: 'Beta' }).expect(201);
    const alone = await mintKey(ctx, ws.ownerKey, { agent_id: a.body.id });
    expect(alone.scopes).toEqual([`agent:${a.body.id}`]);
    expect((await ctx.http.get('/v1/agents').set(bearer(alone.secret))).status).toBe(403);
    const narrowed = await mintKey(ctx, ws.ownerKey, { agent_id: a.body.id, scopes: ['admin-resources:read'] });
    const res = await ctx.http.get('/v1/agents').set(bearer(narrowed.secret));
    expect(res.status).toBe(200);
    expect(res.body.agents.map((x: { id: string }) => x.id)).toEqual([a.body.id]);
  });
});

describe('rule 10: key management is admin only', () => {
  test('an editor can neither list nor mint keys', async () => {
    const editor = await addMember(ctx, ws, 'editor');
    expect((await ctx.http.get('/v1/api-keys').set(bearer(editor.token))).status).toBe(403);
    expect((await ctx.http.post('/v1/api-keys').set(bearer(editor.token)).send({ name: 'x' })).status).toBe(403);
  });

  test('no key can mint a key that reaches further than itself', async () => {
    const limited = await mintKey(ctx, ws.ownerKey, { scopes: ['admin-resources:write'] });
    const res = await ctx.http.post('/v1/api-keys').set(bearer(limited.secret)).send({ name: 'wider', scopes: ['*'] });
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('insufficient_scope');
    const ok = await ctx.http.post('/v1/api-keys').set(bearer(limited.secret)).send({ name: 'same', scopes: ['admin-resources:read'] });
    expect(ok.status).toBe(201);
  });
});

describe('access tokens are verified strictly', () => {
  test('a deactivated member is refused with 403 member_deactivated', async () => {
    const m = await addMember(ctx, ws, 'editor');
    await ctx.http.patch(`/v1/members/${m.userId}`).set(bearer(ws.ownerKey)).send({ status: 'deactivated' }).expect(200);
    const res = await ctx.http.get('/v1/members').set(bearer(m.token));
    expect(res.status).toBe(403);
    expect(res.body.code).toBe('member_deactivated');
  });

  test('a token signed for another audience or issuer is refused', async () => {
    const wrongAud = await ctx.realm.sign({ sub: ws.ownerSubject, tenant_id: ws.tenantId }, { audience: 'someone-else' });
    const wrongIss = await ctx.realm.sign({ sub: ws.ownerSubject, tenant_id: ws.tenantId }, { issuer: 'https://evil.test/' });
    for (const t of [wrongAud, wrongIss]) expect((await ctx.http.get('/v1/members').set(bearer(t))).status).toBe(401);
  });
});

describe('realm keys from a JWKS endpoint', () => {
  let jwksServer: Server;
  let jwksCtx: TestContext;
  let sign: (claims: Record<string, unknown>) => Promise<string>;

  beforeAll(async () => {
    const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
    const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' };
    jwksServer = createServer((_req, res) => {
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((r) => jwksServer.listen(0, '127.0.0.1', () => r()));
    const port = (jwksServer.address() as AddressInfo).port;
    jwksCtx = await startTestApp({
      env: { REALM_PUBLIC_KEY: '', REALM_JWKS_URL: `http://127.0.0.1:${port}/jwks.json`, REALM_ALGORITHMS: 'RS256' },
    });
    sign = (claims) =>
      new SignJWT(claims)
        .setProtectedHeader({ alg: 'RS256', kid: 'k1' })
        .setIssuer(TEST_ISSUER)
        .setAudience(TEST_AUDIENCE)
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(privateKey);
  });
  afterAll(async () => {
    await jwksCtx.close();
    await new Promise((r) => jwksServer.close(r));
  });

  test('accepts a token whose key is published in the JWKS', async () => {
    const w = await createWorkspace(jwksCtx);
    const token = await sign({ sub: w.ownerSubject, tenant_id: w.tenantId });
    expect((await jwksCtx.http.get('/v1/members').set(bearer(token))).status).toBe(200);
  });
});
