import { randomUUID } from 'node:crypto';
import { request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { gzipSync } from 'node:zlib';
import type { Response } from 'supertest';
import { createRealm, startTestApp, TEST_AUDIENCE, TEST_ISSUER, type TestContext } from './helpers/context';
import { addMember, bearer, createWorkspace, type Workspace } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

/** Every status any server in this file answered with, so the last test can prove none was a 500. */
const statuses: Array<{ status: number; method: string; url: string }> = [];
const recordStatuses = (c: TestContext) =>
  c.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    res.on('finish', () => statuses.push({ status: res.statusCode, method: String(req.method), url: String(req.url) }));
  });

let ws: Workspace;
const { ctx } = useTestApp();
beforeAll(async () => {
  recordStatuses(ctx);
  ws = await createWorkspace(ctx);
});

const b64url = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');

async function counts(c: TestContext, tenantId: string): Promise<{ keys: number; audit: number }> {
  const keys = await c.db
    .selectFrom('api_keys')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('tenant_id', '=', tenantId)
    .executeTakeFirstOrThrow();
  const audit = await c.db
    .selectFrom('audit_log')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('tenant_id', '=', tenantId)
    .executeTakeFirstOrThrow();
  return { keys: Number(keys.n), audit: Number(audit.n) };
}

/** The same counts as the API reports them (keys including revoked ones, and the audit total). */
async function apiCounts(c: TestContext, w: Workspace): Promise<{ keys: number; audit: number }> {
  const keys = await c.http.get('/v1/api-keys?include_revoked=true').set(bearer(w.ownerKey));
  const audit = await c.http.get('/v1/audit-log?limit=500').set(bearer(w.ownerKey));
  expect(keys.status).toBe(200);
  expect(audit.status).toBe(200);
  return { keys: keys.body.api_keys.length, audit: audit.body.audit_entries.length };
}

/** A raw request, for bodies supertest would re-encode (it JSON-serialises a Buffer sent as application/json). */
function rawRequest(
  c: TestContext,
  opts: { method: string; path: string; headers: Record<string, string | number>; body: Buffer },
): Promise<{ status: number; headers: IncomingMessage['headers']; body: Record<string, unknown> }> {
  const { port } = c.server.address() as AddressInfo;
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port, method: opts.method, path: opts.path, headers: { ...opts.headers, 'Content-Length': opts.body.length } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} });
        });
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

function expectProblem(res: Response, status: number, code?: string): void {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(res.body).toMatchObject({ type: expect.any(String), title: expect.any(String), status, detail: expect.any(String) });
  expect(typeof res.body.code).toBe('string');
  if (code) expect(res.body.code).toBe(code);
  expect(res.body.request_id).toBe(res.headers['x-request-id']);
}

describe('request bodies', () => {
  test('refuses malformed JSON with a 400 validation_failed problem and writes nothing', async () => {
    const before = await counts(ctx, ws.tenantId);
    const beforeApi = await apiCounts(ctx, ws);
    const res = await ctx.http
      .post('/v1/api-keys')
      .set(bearer(ws.ownerKey))
      .set('Content-Type', 'application/json')
      .send('{"name": "half a key", ');
    expectProblem(res, 400, 'validation_failed');
    for (const field of ['type', 'title', 'status', 'detail', 'code', 'request_id']) expect(res.body).toHaveProperty(field);
    expect(res.text).not.toMatch(/SyntaxError|at .*\.js|node_modules/);
    expect(await counts(ctx, ws.tenantId)).toEqual(before);
    expect(await apiCounts(ctx, ws)).toEqual(beforeApi);
  });

  test('refuses a JSON body that is not an object with 400', async () => {
    const before = await counts(ctx, ws.tenantId);
    for (const raw of ['"a string"', 'null', '[]', '42']) {
      const res = await ctx.http.post('/v1/api-keys').set(bearer(ws.ownerKey)).set('Content-Type', 'application/json').send(raw);
      expectProblem(res, 400, 'validation_failed');
    }
    expect(await counts(ctx, ws.tenantId)).toEqual(before);
  });

  test('refuses a wrongly typed field with 400 and an errors[] entry naming body.name', async () => {
    const before = await counts(ctx, ws.tenantId);
    const res = await ctx.http.post('/v1/api-keys').set(bearer(ws.ownerKey)).send({ name: 5 });
    expectProblem(res, 400, 'validation_failed');
    expect(Array.isArray(res.body.errors)).toBe(true);
    expect(res.body.errors).toContainEqual(expect.objectContaining({ path: 'body.name', message: expect.any(String) }));
    expect(await counts(ctx, ws.tenantId)).toEqual(before);
  });

  test('refuses an unknown body field with 400 that names the field', async () => {
    const before = await counts(ctx, ws.tenantId);
    const res = await ctx.http.post('/v1/api-keys').set(bearer(ws.ownerKey)).send({ name: 'k', tenant_id: randomUUID() });
    expectProblem(res, 400, 'validation_failed');
    expect(JSON.stringify(res.body.errors)).toContain('tenant_id');
    expect(await counts(ctx, ws.tenantId)).toEqual(before);
  });

  test.each([0, 3651, 1.5, -1, '30'])('refuses expires_in_days %p with 400', async (days) => {
    const before = await counts(ctx, ws.tenantId);
    const res = await ctx.http.post('/v1/api-keys').set(bearer(ws.ownerKey)).send({ name: 'k', expires_in_days: days });
    expectProblem(res, 400, 'validation_failed');
    expect(res.body.errors).toContainEqual(expect.objectContaining({ path: 'body.expires_in_days' }));
    expect(await counts(ctx, ws.tenantId)).toEqual(before);
  });

  test('accepts expires_in_days at both bounds (1 and 3650)', async () => {
    for (const days of [1, 3650]) {
      const res = await ctx.http.post('/v1/api-keys').set(bearer(ws.ownerKey)).send({ name: `bound ${days}`, expires_in_days: days });
      expect(res.status).toBe(201);
      expect(res.body.expires_at).not.toBeNull();
    }
  });

  test('refuses a non-JSON content type with a body with 415 unsupported_media_type and writes nothing', async () => {
    const before = await counts(ctx, ws.tenantId);
    const text = await ctx.http.post('/v1/api-keys').set(bearer(ws.ownerKey)).set('Content-Type', 'text/plain').send('{"name":"k"}');
    expectProblem(text, 415, 'unsupported_media_type');
    const form = await ctx.http.post('/v1/api-keys').set(bearer(ws.ownerKey)).type('form').send({ name: 'k' });
    expectProblem(form, 415, 'unsupported_media_type');
    expect(await counts(ctx, ws.tenantId)).toEqual(before);
  });

  test('refuses an unsupported charset with 415 and writes nothing', async () => {
    const before = await counts(ctx, ws.tenantId);
    const res = await ctx.http
      .post('/v1/api-keys')
      .set(bearer(ws.ownerKey))
      .set('Content-Type', 'application/json; charset=latin1')
      .send('{"name":"k"}');
    expectProblem(res, 415, 'unsupported_media_type');
    expect(await counts(ctx, ws.tenantId)).toEqual(before);
  });

  test('refuses an unsupported content encoding with 415 and writes nothing', async () => {
    const before = await counts(ctx, ws.tenantId);
    const res = await ctx.http
      .post('/v1/api-keys')
      .set(bearer(ws.ownerKey))
      .set('Content-Type', 'application/json')
      .set('Content-Encoding', 'compress')
      .send('{"name":"k"}');
    expectProblem(res, 415, 'unsupported_media_type');
    expect(await counts(ctx, ws.tenantId)).toEqual(before);
  });

  test('refuses a __proto__ key as an unknown field and writes nothing', async () => {
    const before = await counts(ctx, ws.tenantId);
    const res = await ctx.http
      .post('/v1/api-keys')
      .set(bearer(ws.ownerKey))
      .set('Content-Type', 'application/json')
      .send('{"name":"k","__proto__":{"scopes":["*"]}}');
    expectProblem(res, 400, 'validation_failed');
    expect(JSON.stringify(res.body.errors)).toContain('__proto__');
    expect(await counts(ctx, ws.tenantId)).toEqual(before);
  });

  test('refuses a body whose content encoding does not decode with a 4xx problem, not a 500', async () => {
    const before = await counts(ctx, ws.tenantId);
    const res = await ctx.http
      .post('/v1/api-keys')
      .set(bearer(ws.ownerKey))
      .set('Content-Type', 'application/json')
      .set('Content-Encoding', 'gzip')
      .send('this is not gzip');
    expect(res.status).toBe(400);
    expectProblem(res, 400);
    expect(await counts(ctx, ws.tenantId)).toEqual(before);
  });

  test('accepts a gzip-encoded JSON body', async () => {
    const res = await rawRequest(ctx, {
      method: 'POST',
      path: '/v1/api-keys',
      headers: { ...bearer(ws.ownerKey), 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' },
      body: gzipSync(JSON.stringify({ name: 'zipped' })),
    });
    expect(res.status).toBe(201);
    expect(res.body.name).toBe('zipped');
  });
});

describe('body size limit', () => {
  let small: TestContext;
  let sws: Workspace;
  beforeAll(async () => {
    small = await startTestApp({ env: { BODY_LIMIT_BYTES: '2048' } });
    recordStatuses(small);
    sws = await createWorkspace(small);
  });
  afterAll(async () => {
    await small.close();
  });

  test('refuses a 10 KB body with 413 payload_too_large and writes nothing', async () => {
    const before = await counts(small, sws.tenantId);
    const body = JSON.stringify({ name: 'big', scopes: ['tickets:read'], note: 'x'.repeat(10 * 1024) });
    expect(body.length).toBeGreaterThan(10 * 1024);
    const res = await small.http.post('/v1/api-keys').set(bearer(sws.ownerKey)).set('Content-Type', 'application/json').send(body);
    expectProblem(res, 413, 'payload_too_large');
    expect(await counts(small, sws.tenantId)).toEqual(before);
    expect(await apiCounts(small, sws)).toEqual({ keys: 1, audit: before.audit });
  });

  test('still accepts a body under the configured limit', async () => {
    const body = JSON.stringify({ name: 'fits', scopes: Array.from({ length: 70 }, () => 'helpdesk-ingress:read') });
    expect(body.length).toBeGreaterThan(1024);
    expect(body.length).toBeLessThan(2048);
    const res = await small.http.post('/v1/api-keys').set(bearer(sws.ownerKey)).set('Content-Type', 'application/json').send(body);
    expect(res.status).toBe(201);
    expect(res.body.scopes).toEqual(['helpdesk-ingress:read']);
  });
});

describe('paths and methods', () => {
  test.each([
    ['post', '/v1/api-keys/not-a-uuid/revoke'],
    ['delete', '/v1/api-keys/123'],
    ['delete', '/v1/api-keys/%27%20OR%201%3D1--'],
    ['patch', '/v1/members/123'],
  ] as const)('answers %s %s with 404 not_found, not 500', async (method, path) => {
    const before = await counts(ctx, ws.tenantId);
    const req = ctx.http[method](path).set(bearer(ws.ownerKey));
    const res = method === 'patch' ? await req.send({ role: 'viewer' }) : await req;
    expectProblem(res, 404, 'not_found');
    expect(await counts(ctx, ws.tenantId)).toEqual(before);
  });

  test('answers a malformed percent-escape in a path id with a 4xx problem, not a 500', async () => {
    const res = await ctx.http.delete('/v1/api-keys/%E0%A4%A').set(bearer(ws.ownerKey));
    expect(res.status).not.toBe(500);
    expect([400, 404]).toContain(res.status);
    expectProblem(res, res.status);
  });

  test('answers an unknown route with a 404 problem', async () => {
    const res = await ctx.http.get('/v1/no-such-thing').set(bearer(ws.ownerKey));
    expectProblem(res, 404, 'not_found');
  });

  test('answers a known path with the wrong method with 405 and an Allow header', async () => {
    const res = await ctx.http.put('/v1/api-keys').set(bearer(ws.ownerKey)).send({ name: 'k' });
    expectProblem(res, 405);
    expect(res.headers['allow']).toBeDefined();
    expect(res.headers['allow']!.split(/,\s*/).sort()).toEqual(['GET', 'POST']);
  });

  test('answers the wrong method on a parameterised path with 405 and the right Allow header', async () => {
    const res = await ctx.http.get(`/v1/api-keys/${randomUUID()}/revoke`).set(bearer(ws.ownerKey));
    expectProblem(res, 405);
    expect(res.headers['allow']).toBe('POST');
  });
});

describe('query parameters', () => {
  test('refuses an unknown query parameter with 400 naming it', async () => {
    const res = await ctx.http.get('/v1/api-keys?foo=1').set(bearer(ws.ownerKey));
    expectProblem(res, 400, 'validation_failed');
    expect(JSON.stringify(res.body.errors)).toContain('foo');
  });

  test('refuses include_revoked=maybe with 400 naming query.include_revoked', async () => {
    const res = await ctx.http.get('/v1/api-keys?include_revoked=maybe').set(bearer(ws.ownerKey));
    expectProblem(res, 400, 'validation_failed');
    expect(res.body.errors).toContainEqual(expect.objectContaining({ path: 'query.include_revoked' }));
  });

  test('refuses a repeated include_revoked with 400', async () => {
    const res = await ctx.http.get('/v1/api-keys?include_revoked=true&include_revoked=false').set(bearer(ws.ownerKey));
    expectProblem(res, 400, 'validation_failed');
  });

  test('accepts include_revoked=true', async () => {
    const res = await ctx.http.get('/v1/api-keys?include_revoked=true').set(bearer(ws.ownerKey));
    expect(res.status).toBe(200);
  });
});

describe('garbage credentials', () => {
  const threePart = `${Buffer.from('garbage-head').toString('base64url')}.${Buffer.from('garbage-body').toString('base64url')}.c2ln`;
  test.each([
    ['no header at all', undefined],
    ['"Bearer" with no token', 'Bearer'],
    ['"Bearer " with a blank token', 'Bearer   '],
    ['two tokens', 'Bearer x y'],
    ['Basic credentials', 'Basic abc'],
    ['a too-short API key', 'Bearer sk_zr_short'],
    ['the bare API key mark', 'Bearer sk_zr_'],
    ['a random three-part string', `Bearer ${threePart}`],
    ['three dots', 'Bearer ..'],
    ['a very long token', `Bearer ${'a'.repeat(8000)}`],
  ])('refuses %s with 401 unauthenticated and WWW-Authenticate: Bearer', async (_label, header) => {
    const req = ctx.http.get('/v1/api-keys');
    const res = header === undefined ? await req : await req.set('Authorization', header);
    expectProblem(res, 401, 'unauthenticated');
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
  });

  test('refuses an API key whose prefix exists but whose secret is wrong with 401', async () => {
    const forged = ws.ownerKey.slice(0, -4) + (ws.ownerKey.endsWith('AAAA') ? 'BBBB' : 'AAAA');
    const res = await ctx.http.get('/v1/api-keys').set(bearer(forged));
    expectProblem(res, 401, 'unauthenticated');
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
  });

  test('never writes anything for an unauthenticated write', async () => {
    const before = await counts(ctx, ws.tenantId);
    const res = await ctx.http.post('/v1/api-keys').set('Authorization', 'Bearer sk_zr_short').send({ name: 'k' });
    expectProblem(res, 401, 'unauthenticated');
    expect(await counts(ctx, ws.tenantId)).toEqual(before);
  });
});

describe('access tokens (JWT)', () => {
  const claims = () => ({ sub: ws.ownerSubject, tenant_id: ws.tenantId });

  test('a well-formed token for a member is accepted (control)', async () => {
    const token = await ctx.realm.sign(claims());
    const res = await ctx.http.get('/v1/members').set(bearer(token));
    expect(res.status).toBe(200);
  });

  const refusals: Array<[string, () => Promise<string>]> = [
    ['a wrong issuer', () => ctx.realm.sign(claims(), { issuer: 'https://evil.test/' })],
    ['a wrong audience', () => ctx.realm.sign(claims(), { audience: 'some-other-api' })],
    ['a signature by a different key', async () => (await createRealm()).sign(claims())],
    ['an expiry in the past', () => ctx.realm.sign(claims(), { expiresIn: Math.floor(Date.now() / 1000) - 60 })],
    ['no tenant_id claim', () => ctx.realm.sign({ sub: ws.ownerSubject })],
    ['a tenant_id that is not a uuid', () => ctx.realm.sign({ sub: ws.ownerSubject, tenant_id: 'acme' })],
    ['a numeric tenant_id', () => ctx.realm.sign({ sub: ws.ownerSubject, tenant_id: 42 as unknown as string })],
    ['no subject', () => ctx.realm.sign({ tenant_id: ws.tenantId })],
    [
      'alg "none" and no signature',
      async () => {
        const now = Math.floor(Date.now() / 1000);
        return `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url({ ...claims(), iss: TEST_ISSUER, aud: TEST_AUDIENCE, iat: now, exp: now + 600 })}.`;
      },
    ],
    [
      'a signature stripped from an otherwise valid token',
      async () => {
        const [h, p] = (await ctx.realm.sign(claims())).split('.');
        return `${h}.${p}.`;
      },
    ],
    [
      'a payload swapped under a valid signature',
      async () => {
        const [h, , s] = (await ctx.realm.sign(claims())).split('.');
        const now = Math.floor(Date.now() / 1000);
        return `${h}.${b64url({ ...claims(), sub: 'someone-else', iss: TEST_ISSUER, aud: TEST_AUDIENCE, iat: now, exp: now + 600 })}.${s}`;
      },
    ],
  ];

  test.each(refusals)('refuses a token with %s: 401 unauthenticated', async (_label, make) => {
    const res = await ctx.http.get('/v1/members').set(bearer(await make()));
    expectProblem(res, 401, 'unauthenticated');
    expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
  });

  test('a valid token for a tenant that does not exist gets the same 404 as one for a workspace the user is not in', async () => {
    const other = await createWorkspace(ctx);
    const nowhere = await ctx.http.get('/v1/members').set(bearer(await ctx.realm.sign({ sub: ws.ownerSubject, tenant_id: randomUUID() })));
    const notMine = await ctx.http.get('/v1/members').set(bearer(await ctx.realm.sign({ sub: ws.ownerSubject, tenant_id: other.tenantId })));
    expectProblem(nowhere, 404, 'not_found');
    expectProblem(notMine, 404, 'not_found');
    const strip = (b: Record<string, unknown>) => ({ ...b, request_id: undefined });
    expect(strip(nowhere.body)).toEqual(strip(notMine.body));
    expect(nowhere.headers['www-authenticate']).toBeUndefined();
  });

  test('a valid token for an unknown subject gets the same 404 as a non-member', async () => {
    const res = await ctx.http.get('/v1/members').set(bearer(await ctx.realm.sign({ sub: `ghost-${randomUUID()}`, tenant_id: ws.tenantId })));
    expectProblem(res, 404, 'not_found');
  });

  test('a member\'s valid token cannot reach another workspace by swapping tenant_id', async () => {
    const editor = await addMember(ctx, ws, 'editor');
    const other = await createWorkspace(ctx);
    const res = await ctx.http.get('/v1/members').set(bearer(await ctx.realm.sign({ sub: editor.subject, tenant_id: other.tenantId })));
    expectProblem(res, 404, 'not_found');
  });
});

describe('X-Request-Id', () => {
  test('echoes a supplied valid X-Request-Id', async () => {
    const id = `req-${randomUUID()}`;
    const res = await ctx.http.get('/v1/api-keys').set(bearer(ws.ownerKey)).set('X-Request-Id', id);
    expect(res.status).toBe(200);
    expect(res.headers['x-request-id']).toBe(id);
  });

  test('generates one when none is supplied', async () => {
    const res = await ctx.http.get('/v1/api-keys').set(bearer(ws.ownerKey));
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const again = await ctx.http.get('/v1/api-keys').set(bearer(ws.ownerKey));
    expect(again.headers['x-request-id']).not.toBe(res.headers['x-request-id']);
  });

  test('replaces a supplied X-Request-Id that is not a safe token', async () => {
    for (const bad of ['has spaces in it', 'x'.repeat(129), '<script>']) {
      const res = await ctx.http.get('/v1/api-keys').set(bearer(ws.ownerKey)).set('X-Request-Id', bad);
      expect(res.headers['x-request-id']).not.toBe(bad);
      expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    }
  });

  test('problem bodies carry the request id as request_id', async () => {
    const id = `trace-${randomUUID()}`;
    const supplied = await ctx.http.get('/v1/api-keys').set('X-Request-Id', id);
    expectProblem(supplied, 401, 'unauthenticated');
    expect(supplied.body.request_id).toBe(id);
    const generated = await ctx.http.get('/v1/no-such-route');
    expectProblem(generated, 404);
    expect(generated.body.request_id).toBe(generated.headers['x-request-id']);
  });
});

describe('no 500 anywhere', () => {
  test('no request in this file was answered with a 500', async () => {
    // Proves the recorder sees traffic even when this test runs alone.
    expect((await ctx.http.get('/healthz')).status).toBe(200);
    expect(statuses.length).toBeGreaterThan(0);
    expect(statuses.filter((s) => s.status >= 500)).toEqual([]);
  });
});
