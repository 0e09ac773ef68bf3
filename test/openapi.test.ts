import { buildOperationTable } from '../src/operations';
import { startTestApp, type TestContext } from './helpers/context';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp();
});
afterAll(async () => {
  await ctx.close();
});

test('the OpenAPI document lists every operation of the table with its floor, scope and schemas', async () => {
  const res = await ctx.http.get('/v1/openapi.json');
  expect(res.status).toBe(200);
  expect(res.body.openapi).toBe('3.1.0');
  const ops = buildOperationTable();
  for (const op of ops) {
    const doc = res.body.paths[op.path]?.[op.method];
    expect(doc).toBeDefined();
    expect(doc.operationId).toBe(op.id);
    const access = op.access === 'public' ? null : op.access;
    expect(doc['x-floor']).toBe(access ? access.floor : 'public');
    expect(doc['x-scope']).toBe(access ? `${access.tag}:${access.action}` : null);
    expect(doc.responses[String(op.response.status)]).toBeDefined();
    if (access) expect(doc.responses['401']).toBeDefined();
    else expect(doc.security).toEqual([]);
  }
  const documented = Object.values(res.body.paths as Record<string, object>).flatMap((p) => Object.keys(p));
  expect(documented).toHaveLength(ops.length);
});

test('the create-key request schema comes from the zod schema (bounds included)', async () => {
  const res = await ctx.http.get('/v1/openapi.json');
  const schema = res.body.paths['/v1/api-keys'].post.requestBody.content['application/json'].schema;
  expect(schema.required).toEqual(['name']);
  expect(schema.properties.expires_in_days).toMatchObject({ minimum: 1, maximum: 3650 });
  expect(schema.additionalProperties).toBe(false);
  const resp = res.body.paths['/v1/api-keys'].get.responses['200'].content['application/json'].schema;
  expect(resp.properties.api_keys.items.properties).not.toHaveProperty('secret');
});

test('the operation table refuses two operations on one route', () => {
  const [first] = buildOperationTable();
  expect(() => buildOperationTable([first!, { ...first!, id: 'other' }])).toThrow(/two operations answer/);
  expect(() => buildOperationTable([first!, { ...first! }])).toThrow(/duplicate id/);
});

describe('API docs in a browser', () => {
  let dctx: TestContext;
  beforeAll(async () => {
    dctx = await startTestApp();
  });
  afterAll(async () => {
    await dctx.close();
  });

  test('GET /docs serves a Redoc page pointing at the generated OpenAPI document, with the viewer served locally (no CDN)', async () => {
    const page = await dctx.http.get('/docs');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.text).toContain('<redoc spec-url="/v1/openapi.json">');
    const scripts = [...page.text.matchAll(/<script[^>]*src="([^"]+)"/g)].map((m) => m[1]);
    expect(scripts).toEqual(['/docs/redoc.standalone.js']);
    const bundle = await dctx.http.get('/docs/redoc.standalone.js');
    expect(bundle.status).toBe(200);
    expect(bundle.headers['content-type']).toMatch(/javascript/);
    expect(bundle.text.length).toBeGreaterThan(100_000);
  });
});
