import { randomUUID } from 'node:crypto';
import type { Response } from 'supertest';
import { z } from 'zod';
import { inspectJson, MAX_JSON_DEPTH, MAX_JSON_VALUES, scanJson } from '../src/lib/json-limits';
import type { Operation } from '../src/http/operation';
import { buildOperationTable } from '../src/operations';
import { bearer } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

/**
 * Edge rules on caller text, across the whole operation table: NUL characters, unpaired surrogates and
 * deeply nested JSON are refused with a 400 before any schema, handler or query sees them (they used to
 * reach PostgreSQL or a recursive serialiser and come back as 500 internal_error).
 */

const operations = buildOperationTable();
const withBody = operations.filter((op) => op.body);

let integrationId: string;
let emailToken: string;
let webChatToken: string;
const { ctx, ws } = useTestApp({ workspaces: 1 });
beforeAll(async () => {
  // An email connection without webhook credentials (Postmark's hook is then guarded by its URL's token alone),
  // so a native provider hook gets as far as reading the payload; a web chat one for its visitor sessions.
  emailToken = (await ctx.http.put('/v1/channels/email').set(bearer(ws.ownerKey)).send({ config: {} }).expect(200)).body.details.inbound_token;
  webChatToken = (await ctx.http.put('/v1/channels/web_chat').set(bearer(ws.ownerKey)).send({ config: {} }).expect(200)).body.details.inbound_token;
  // An unsigned integration, so deliveries to the public webhook route get as far as reading the payload.
  const res = await ctx.http.post('/v1/integrations').set(bearer(ws.ownerKey)).send({ provider: 'zendesk', name: 'Edge probe' });
  expect(res.status).toBe(201);
  integrationId = res.body.id;
});

/** A concrete URL for the row: enum params take their first option, the webhook its real integration, the mail provider google, ids a uuid. */
function urlOf(op: Operation, override: (name: string) => string | undefined = () => undefined): string {
  const shape = (op.params as unknown as { shape?: Record<string, unknown> } | undefined)?.shape ?? {};
  const query = op.id === 'create_web_chat_session' ? `?token=${webChatToken}` : '';
  return op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => {
    const forced = override(name);
    if (forced !== undefined) return forced;
    if (op.id === 'receive_webhook') return name === 'provider' ? 'zendesk' : integrationId;
    if (op.id === 'receive_provider_hook') return name === 'channel' ? 'email' : emailToken;
    if (name === 'mailprovider') return 'google';
    const schema = shape[name];
    if (schema instanceof z.ZodEnum) return String(schema.options[0]);
    return op.example?.params?.[name] ?? randomUUID();
  }) + query;
}

async function send(op: Operation, url: string, body?: string): Promise<Response> {
  let req = ctx.http[op.method](url).ok(() => true).timeout(20000).set(bearer(ws.ownerKey));
  if (body !== undefined) req = req.set('Content-Type', 'application/json').send(body);
  return await req;
}

const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
const label = (op: Operation) => `${op.id} ${op.method.toUpperCase()} ${op.path}`;

/** The text a row's body puts its probe in: its first declared field, so the schema would otherwise accept the key. */
function probeBody(op: Operation, text: string): string {
  const shape = (op.body as unknown as { shape?: Record<string, unknown> }).shape;
  const field = shape ? (Object.keys(shape)[0] ?? 'name') : 'name';
  return JSON.stringify({ [field]: text, nested: { list: ['fine', text] } });
}

describe('text PostgreSQL cannot store, refused at the edge on every operation', () => {
  test.each([
    ['a NUL character', 'Printer \u0000 jammed'],
    ['a lone high surrogate', 'Printer jammed \ud800'],
    ['a lone low surrogate', '\udc00 Printer jammed'],
  ])('every operation with a body answers 400 to %s in a string, naming the path', async (_what, text) => {
    const failures: string[] = [];
    for (const op of withBody) {
      const body = probeBody(op, text);
      expect(body).toMatch(/\\u(0000|d800|dc00)/);
      const res = await send(op, urlOf(op), body);
      const expected = op.id === 'receive_webhook' ? 'webhook_payload_invalid' : op.id === 'receive_provider_hook' ? 'channel_payload_invalid' : 'validation_failed';
      const paths = ((res.body?.errors ?? []) as { path: string }[]).map((e) => e.path);
      if (res.status !== 400 || res.body?.code !== expected || !paths.includes('body.nested.list.1')) {
        failures.push(`${label(op)} -> ${res.status} ${String(res.text).slice(0, 200)}`);
      }
    }
    expect(failures).toEqual([]);
  }, 120000);

  test('every operation with a body answers 400 to NUL inside an object key', async () => {
    const failures: string[] = [];
    for (const op of withBody) {
      const res = await send(op, urlOf(op), JSON.stringify({ meta: { 'bad\u0000key': 1 } }));
      const expected = op.id === 'receive_webhook' ? 'webhook_payload_invalid' : op.id === 'receive_provider_hook' ? 'channel_payload_invalid' : 'validation_failed';
      if (res.status !== 400 || res.body?.code !== expected) failures.push(`${label(op)} -> ${res.status} ${String(res.text).slice(0, 200)}`);
    }
    expect(failures).toEqual([]);
  }, 120000);

  test('every operation answers 4xx (never 5xx) to a NUL in a query value or name', async () => {
    const failures: string[] = [];
    for (const op of operations) {
      for (const q of ['q=%00', 'limit=1%00', 'status=open%00x', 'x%00=1']) {
        const res = await send(op, `${urlOf(op)}?${q}`, op.body ? '{}' : undefined);
        if (res.status < 400 || res.status >= 500) failures.push(`${label(op)} ?${q} -> ${res.status} ${String(res.text).slice(0, 200)}`);
      }
    }
    expect(failures).toEqual([]);
  }, 120000);

  test('a NUL in a known query parameter is 400 validation_failed naming query.<name>', async () => {
    const res = await ctx.http.get('/v1/tickets?q=printer%00').set(bearer(ws.ownerKey));
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'validation_failed', errors: [{ path: 'query.q' }] });
  });

  test('every operation with a path parameter answers 404 to a NUL in it, never 5xx', async () => {
    const failures: string[] = [];
    for (const op of operations.filter((o) => o.path.includes('{'))) {
      const names = [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
      for (const target of names) {
        const url = urlOf(op, (name) => (name === target ? `web_chat%00${name === 'integration_id' ? '' : 'x'}` : undefined));
        const res = await send(op, url, op.body ? '{}' : undefined);
        if (res.status !== 404) failures.push(`${label(op)} {${target}}=NUL -> ${res.status} ${String(res.text).slice(0, 200)}`);
      }
    }
    expect(failures).toEqual([]);
  }, 120000);
});

describe('JSON nesting bounded at the edge on every operation', () => {
  test('every operation with a body answers 400 payload_too_complex to a 10,000-deep body', async () => {
    const failures: string[] = [];
    for (const op of withBody) {
      for (const body of [deep(10000), `{"name":${'{"a":'.repeat(10000)}1${'}'.repeat(10000)}}`]) {
        const res = await send(op, urlOf(op), body);
        if (res.status !== 400 || res.body?.code !== 'payload_too_complex') failures.push(`${label(op)} -> ${res.status} ${String(res.text).slice(0, 200)}`);
      }
    }
    expect(failures).toEqual([]);
  }, 120000);

  test(`${MAX_JSON_DEPTH} levels pass the edge (the schema answers), ${MAX_JSON_DEPTH + 1} are refused`, async () => {
    const atLimit = await ctx.http.post('/v1/tickets').set(bearer(ws.ownerKey)).set('Content-Type', 'application/json').send(`{"metadata":${deep(MAX_JSON_DEPTH - 1)}}`);
    expect(atLimit.status).toBe(400);
    expect(atLimit.body.code).toBe('validation_failed');
    const over = await ctx.http.post('/v1/tickets').set(bearer(ws.ownerKey)).set('Content-Type', 'application/json').send(`{"metadata":${deep(MAX_JSON_DEPTH)}}`);
    expect(over.status).toBe(400);
    expect(over.body.code).toBe('payload_too_complex');
  });

  test('a deep body in UTF-16 is refused the same way', async () => {
    const res = await ctx.http
      .post('/v1/tickets')
      .set(bearer(ws.ownerKey))
      .set('Content-Type', 'application/json; charset=utf-16le')
      .serialize((b: unknown) => b as string)
      .send(Buffer.from(`{"metadata":${deep(10000)}}`, 'utf16le'));
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('payload_too_complex');
  });

  test('brackets inside strings do not count as nesting', async () => {
    const res = await ctx.http
      .post('/v1/customers')
      .set(bearer(ws.ownerKey))
      .send({ display_name: `Curly ${'{['.repeat(90)}`, email: `curly-${randomUUID().slice(0, 8)}@acme.test` });
    expect(res.status).toBe(201);
  });

  test('a body of brackets at the size limit is refused before it is parsed', async () => {
    const n = Math.floor(ctx.config.BODY_LIMIT_BYTES / 2) - 1;
    const started = process.hrtime.bigint();
    const res = await ctx.http.post('/v1/tickets').set(bearer(ws.ownerKey)).set('Content-Type', 'application/json').send(deep(n));
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    // eslint-disable-next-line no-console
    console.log(`${n}-deep body (${(2 * n / 1024).toFixed(0)} KiB) answered in ${ms.toFixed(1)} ms`);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('payload_too_complex');
  });
});

describe('wide JSON', () => {
  // 300,000 empty objects fit in 1 MiB and cost JSON.parse ~100 ms of the event loop: counted and refused first.
  const wide = (n: number) => `{"metadata":{"a":[${Array(n).fill('{}').join(',')}]}}`;

  test(`a body of more than ${MAX_JSON_VALUES} values is refused with 400 payload_too_complex, on the API and the public webhook route`, async () => {
    const body = wide(300_000);
    const api = await ctx.http.post('/v1/tickets').set(bearer(ws.ownerKey)).set('Content-Type', 'application/json').send(body);
    expect(api.status).toBe(400);
    expect(api.body.code).toBe('payload_too_complex');
    expect(api.body.errors[0].message).toContain(String(MAX_JSON_VALUES));
    const hook = await ctx.http.post(`/v1/webhooks/zendesk/${integrationId}`).set('Content-Type', 'application/json').send(body);
    expect(hook.status).toBe(400);
    expect(hook.body.code).toBe('payload_too_complex');
  });

  test('the value count stops at the limit, not before', () => {
    const scan = (text: string) => scanJson(Buffer.from(text));
    // n elements: n - 1 commas plus the two containers of the wrapper and the array.
    expect(scan(`[${Array(MAX_JSON_VALUES - 1).fill('1').join(',')}]`)).toBe('clean');
    expect(scan(`[${Array(MAX_JSON_VALUES + 1).fill('1').join(',')}]`)).toBe('too_many');
    expect(scan(`["${','.repeat(MAX_JSON_VALUES * 2)}"]`)).toBe('clean');
  });
});

describe('the walk and the pre-scan', () => {
  test('walk a million-deep value without recursion', () => {
    let v: unknown = 'leaf';
    for (let i = 0; i < 1_000_000; i++) v = [v];
    expect(inspectJson(v, 'body').tooDeep).toBe(true);
  });

  test('name every offending path, keys included, and accept paired surrogates', () => {
    const { tooDeep, errors } = inspectJson({ ok: '😀 fine', a: ['x', 'y\u0000'], ['k\ud800']: 1, b: { c: '\udfff' } }, 'body');
    expect(tooDeep).toBe(false);
    expect(errors.map((e) => e.path).sort()).toEqual(['body', 'body.a.1', 'body.b.c']);
  });

  test('the pre-scan honours escapes inside strings', () => {
    const scan = (text: string) => scanJson(Buffer.from(text), 64);
    expect(scan(`{"a":"\\"${'['.repeat(100)}"}`)).toBe('clean');
    expect(scan(`{"a":"\\\\",${'"b":['.repeat(64)}]}`)).toBe('too_deep');
    expect(scan(deep(65))).toBe('too_deep');
    expect(scan(deep(64))).toBe('clean');
  });

  test('the pre-scan flags NUL and surrogate escapes (any case) for the walk, and nothing else', () => {
    const scan = (text: string) => scanJson(Buffer.from(text), 64);
    for (const s of ['{"a":"x\\u0000"}', '{"\\u0000":1}', '["\\uD800"]', '["\\udfff"]', '["\\uDbFf"]', '["😀 \\ud83d\\ude00"]']) expect(scan(s)).toBe('suspect_text');
    for (const s of ['{"a":"\\\\u0000"}', '["\\u0041"]', '["\\uD7FF", "\\uE000"]', '["😀"]', '{"u0000":"ud800"}']) expect(scan(s)).toBe('clean');
  });
});
