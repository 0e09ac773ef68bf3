/**
 * Limits clients can see (issue 18, part 2; IETF httpapi RateLimit header fields draft): the authenticated
 * API's per-caller and per-workspace budgets, said on every authenticated answer (RateLimit-Policy,
 * RateLimit); past either, 429 throttled with an integer Retry-After and nothing written.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { startTestApp, type TestContext } from './helpers/context';
import { bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { inlineShared } from './helpers/openapi-doc';

let ctx: TestContext;

beforeAll(async () => {
  ctx = await startTestApp({ env: { API_RATE_POINTS: '4', WORKSPACE_RATE_POINTS: '6', API_RATE_WINDOW_SECONDS: '30' } });
});
afterAll(async () => {
  await ctx?.close();
});

/** `"caller";r=3;t=30, "workspace";r=5;t=30` → { caller: {r, t}, workspace: {r, t} }. */
function parseRateLimit(value: string | undefined): Record<string, { r: number; t: number }> {
  const out: Record<string, { r: number; t: number }> = {};
  for (const item of String(value ?? '').split(',')) {
    const [name, ...params] = item.trim().split(';');
    if (!name) continue;
    const p = Object.fromEntries(params.map((kv) => kv.split('=')).map(([k, v]) => [k, Number(v)]));
    out[name.replace(/"/g, '')] = { r: p.r!, t: p.t! };
  }
  return out;
}

const members = (token: string) => ctx.http.get('/v1/members').set(bearer(token));

test('every authenticated answer says the budgets and what is left of each', async () => {
  const ws = await createWorkspace(ctx);
  const first = await members(ws.ownerKey);
  expect(first.status).toBe(200);
  expect(first.headers['ratelimit-policy']).toBe('"caller";q=4;w=30, "workspace";q=6;w=30');
  const a = parseRateLimit(first.headers.ratelimit);
  const second = await members(ws.ownerKey);
  const b = parseRateLimit(second.headers.ratelimit);
  expect(b.caller!.r).toBe(a.caller!.r - 1);
  expect(b.workspace!.r).toBe(a.workspace!.r - 1);
  expect(b.caller!.t).toBeGreaterThanOrEqual(1);
  expect(b.caller!.t).toBeLessThanOrEqual(30);
  // An error answer after authentication says them too.
  const missing = await ctx.http.get(`/v1/tickets/${randomUUID()}`).set(bearer(ws.ownerKey));
  expect(missing.status).toBe(404);
  expect(missing.headers.ratelimit).toBeDefined();
});

test('past the caller\'s budget: 429 throttled with an integer Retry-After, and nothing written', async () => {
  const ws = await createWorkspace(ctx);
  const key = (await mintKey(ctx, ws.ownerKey, { scopes: ['*'] })).secret;
  for (let i = 0; i < 4; i++) expect((await members(key)).status).toBe(200);
  const subject = `Over budget ${randomUUID()}`;
  const res = await ctx.http.post('/v1/tickets').set(bearer(key)).send({ subject, description: 'x', customer_email: 'over@example.test' });
  expect(res.status).toBe(429);
  expect(res.body.code).toBe('throttled');
  expect(res.headers['retry-after']).toMatch(/^\d+$/);
  expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  expect(parseRateLimit(res.headers.ratelimit).caller!.r).toBe(0);
  const written = await sql<{ n: number }>`select count(*)::int as n from tickets where subject = ${subject}`.execute(ctx.db);
  expect(written.rows[0]!.n).toBe(0);
  // Another caller of the same workspace still has its own budget (the workspace's is not spent: 4 + 1 < 6).
  expect((await members(ws.ownerKey)).status).toBe(200);
});

test('past the workspace\'s budget: every caller of that workspace is throttled, another workspace is not', async () => {
  const ws = await createWorkspace(ctx);
  const other: Workspace = await createWorkspace(ctx);
  const second = (await mintKey(ctx, ws.ownerKey, { scopes: ['*'] })).secret;
  // The key was minted with the owner key: that request counts too (1). Three each → 7 > 6.
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++) statuses.push((await members(ws.ownerKey)).status, (await members(second)).status);
  expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(1);
  const throttled = await members(second);
  expect(throttled.status).toBe(429);
  expect(parseRateLimit(throttled.headers.ratelimit).workspace!.r).toBe(0);
  expect((await members(other.ownerKey)).status).toBe(200);
});

test('public routes carry no budget headers', async () => {
  const res = await ctx.http.get('/healthz');
  expect(res.headers['ratelimit-policy']).toBeUndefined();
  const intake = await ctx.http.post('/v1/ingest/sms').send({ tenant_id: randomUUID(), payload: {} });
  expect(intake.headers['ratelimit-policy']).toBeUndefined();
});

test('the OpenAPI document lists 429 with Retry-After, and the budget headers, on every authenticated operation', async () => {
  const doc = inlineShared((await ctx.http.get('/v1/openapi.json')).body) as {
    security: unknown[];
    paths: Record<string, Record<string, { security?: unknown[]; responses: Record<string, { headers?: Record<string, unknown> }> }>>;
  };
  let checked = 0;
  for (const ops of Object.values(doc.paths)) {
    for (const op of Object.values(ops)) {
      // Authenticated: a bearer credential is required, by the document's security unless the operation has its own
      // (a public one: none, or a provider's optional basic auth).
      if (!(op.security ?? doc.security).some((r) => typeof r === 'object' && r !== null && 'bearer' in r)) continue;
      const success = Object.entries(op.responses).find(([s]) => s.startsWith('2'))![1];
      expect(Object.keys(success.headers ?? {})).toEqual(expect.arrayContaining(['RateLimit-Policy', 'RateLimit']));
      expect(Object.keys(op.responses['429']?.headers ?? {})).toEqual(expect.arrayContaining(['Retry-After', 'RateLimit']));
      checked += 1;
    }
  }
  expect(checked).toBeGreaterThan(50);
});
