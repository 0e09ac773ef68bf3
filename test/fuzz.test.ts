import fc from 'fast-check';
import type { Response } from 'supertest';
import { buildOperationTable } from '../src/operations';
import type { Operation } from '../src/http/operation';
import { bearer, createWorkspace } from './helpers/factories';
import { useTestApp } from './helpers/use-test-app';

/**
 * Property-based fuzzing of every row of the operation table: random path ids, query strings, JSON bodies
 * and content types, each sent with the owner key and with no credential. The answers must never be a 5xx
 * (except 503 with Retry-After), never leak stack traces, SQL or the owner key, and every 4xx is a problem.
 */

const NUM_RUNS = 15;
const operations = buildOperationTable();

const { ctx } = useTestApp();

// ---- arbitraries ---------------------------------------------------------------------------------------

/** A path segment as it goes on the wire (already encoded, or deliberately raw). */
const pathId = fc.oneof(
  fc.uuid().map((u) => u),
  fc.string({ maxLength: 40 }).map(encodeURIComponent),
  fc.string({ unit: 'binary', maxLength: 20 }).map(encodeURIComponent),
  fc.constantFrom('..', '.', '%00', '%', '%zz', '%2e%2e', '%2F', 'null', 'undefined', '0', '-1', '1e309', 'NaN', '__proto__', 'constructor', "'", '%27%20OR%201%3D1--'),
  // Long, but the whole request line stays under Node's 16 KB header limit (see the oversized-URL test below).
  fc.integer({ min: 1000, max: 3000 }).map((n) => 'a'.repeat(n)),
  fc.integer().map(String),
);

const queryKey = fc.oneof(
  fc.string({ minLength: 1, maxLength: 12 }),
  fc.constantFrom('limit', 'offset', 'cursor', 'page', 'status', 'q', 'sort', 'include_revoked', 'from', 'to', '__proto__', 'constructor', 'a[b]', 'a[]'),
);
const queryValue = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.constantFrom('', '-1', '0', '1e309', 'NaN', 'true', 'false', 'null', '9999999999999999999999', "' or 1=1 --", '%00'),
  fc.uuid(),
  fc.integer().map(String),
  fc.integer({ min: 500, max: 1500 }).map((n) => 'q'.repeat(n)),
);
const queryString = fc.array(fc.tuple(queryKey, queryValue, fc.boolean()), { maxLength: 4 }).map((pairs) =>
  pairs.map(([k, v, raw]) => (raw && !/[\s#%&?\u0080-\uffff]/.test(k + v) ? `${k}=${v}` : `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)).join('&'),
);

const wrongType = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double(),
  fc.string({ maxLength: 20 }),
  fc.uuid(),
  fc.array(fc.string({ maxLength: 5 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 }), { maxKeys: 3 }),
  fc.integer({ min: 1000, max: 20000 }).map((n) => 'z'.repeat(n)),
);

/** JSON bodies: arbitrary JSON, objects with random keys, the operation's own keys with wrong types, huge strings. */
function bodyArb(op: Operation): fc.Arbitrary<unknown> {
  const shape = op.body && 'shape' in op.body ? Object.keys((op.body as unknown as { shape: object }).shape) : [];
  const own = shape.length
    ? fc.dictionary(fc.constantFrom(...shape), wrongType, { maxKeys: shape.length })
    : fc.dictionary(fc.string({ maxLength: 8 }), wrongType, { maxKeys: 4 });
  return fc.oneof(
    fc.jsonValue({ maxDepth: 3 }),
    fc.dictionary(fc.string({ maxLength: 12 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 6 }),
    own,
    fc.integer({ min: 1000, max: 20000 }).map((n) => ({ [shape[0] ?? 'name']: 'h'.repeat(n) })),
    fc.integer({ min: 1000, max: 20000 }).map((n) => 'x'.repeat(n)),
  );
}

/**
 * Headers nobody planned for: random token names (never ones that frame the request or carry the
 * credential, which the test sets itself) with random visible-ASCII values.
 */
const FRAMING = new Set(['authorization', 'content-length', 'transfer-encoding', 'host', 'connection', 'content-type', 'content-encoding', 'expect', 'upgrade', 'te', 'trailer']);
const headerName = fc
  .stringMatching(/^[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]{0,30}$/)
  .filter((n) => !FRAMING.has(n.toLowerCase()));
const headerValue = fc.stringMatching(/^[\x21-\x7e]([\x20-\x7e]{0,200}[\x21-\x7e])?$/);
const randomHeaders = fc.dictionary(headerName, headerValue, { maxKeys: 4 });

/** How the body goes on the wire: header set plus the exact text (or no body at all). */
const encoding = fc.record({
  contentType: fc.constantFrom(
    undefined,
    'application/json',
    'application/json; charset=utf-8',
    'application/json; charset=utf-16',
    'application/json; charset=latin1',
    'text/plain',
    'application/x-www-form-urlencoded',
    'multipart/form-data',
    'application/problem+json',
    'application/xml',
    '*/*',
    'garbage',
  ),
  mangle: fc.constantFrom('json', 'json', 'json', 'truncated', 'empty', 'notjson'),
  extra: fc.oneof(
    fc.constantFrom<Record<string, string>>(
      {},
      {},
      { 'Content-Encoding': 'gzip' },
      { 'Content-Encoding': 'br, identity' },
      { 'If-None-Match': '*' },
      { 'If-None-Match': '"abc"' },
      { Accept: 'text/html' },
      { 'X-Request-Id': 'x'.repeat(500) },
      { 'Idempotency-Key': 'k'.repeat(300) },
    ),
    randomHeaders,
  ),
});

interface FuzzRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
}

function requestArb(op: Operation): fc.Arbitrary<FuzzRequest> {
  const names = [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
  const sendsBody = op.method !== 'get' && op.method !== 'delete';
  return fc
    .record({
      ids: fc.tuple(...names.map(() => pathId)),
      query: queryString,
      body: sendsBody ? bodyArb(op) : fc.constant(undefined),
      enc: encoding,
    })
    .map(({ ids, query, body, enc }) => {
      let path = op.path;
      names.forEach((n, i) => (path = path.replace(`{${n}}`, ids[i] as string)));
      const headers: Record<string, string> = { ...enc.extra };
      if (!sendsBody) delete headers['Content-Encoding'];
      let text: string | undefined;
      if (sendsBody) {
        const json = JSON.stringify(body) ?? 'null';
        text = enc.mangle === 'truncated' ? json.slice(0, Math.max(1, Math.floor(json.length / 2))) : enc.mangle === 'empty' ? '' : enc.mangle === 'notjson' ? `{${json}` : json;
        if (enc.contentType) headers['Content-Type'] = enc.contentType;
      }
      return { method: op.method, url: query ? `${path}?${query}` : path, headers, body: text };
    });
}

// ---- checks --------------------------------------------------------------------------------------------

const STACK = /\bat\s+\S*?[\w/\\.-]+\.(?:ts|js|mjs|cjs):\d+/;
const SQL: RegExp[] = [/\bselect\b[\s\S]*\bfrom\b/i, /syntax error/i, /relation "/i, /\bviolates\b/i, /\binsert into\b/i, /\bduplicate key value\b/i, /invalid input syntax/i];

async function send(op: Operation, r: FuzzRequest, credential: string | null): Promise<Response> {
  let req = ctx.http[op.method](r.url).ok(() => true).timeout(15000);
  for (const [k, v] of Object.entries(r.headers)) req = req.set(k, v);
  if (credential) req = req.set(bearer(credential));
  if (r.body !== undefined) req = req.send(r.body);
  if (op.eventStream) {
    // A stream that opens never ends on its own: its head is what is checked, then the connection is closed.
    // Any other answer (a problem) is read whole, as for every operation.
    req = req.buffer(true).parse((res, done) => {
      const raw = res as unknown as NodeJS.ReadableStream & { headers: Record<string, string>; text?: string; destroy(): void };
      if (String(raw.headers['content-type']).startsWith('text/event-stream')) {
        raw.text = '';
        raw.destroy();
        return done(null, '');
      }
      let text = '';
      raw.setEncoding('utf8');
      raw.on('data', (c: string) => (text += c));
      raw.on('end', () => {
        raw.text = text;
        done(null, text);
      });
    });
  }
  return await req;
}

function check(op: Operation, r: FuzzRequest, res: Response, ownerKey: string, who: string): void {
  const where = `${op.id} ${op.method.toUpperCase()} ${r.url.slice(0, 300)} [${who}]`;
  const fail = (why: string) => {
    throw new Error(
      `${where}: ${why}\n  request headers: ${JSON.stringify(r.headers).slice(0, 300)}\n  request body: ${String(r.body).slice(0, 300)}\n` +
        `  -> ${res.status} ${String(res.headers['content-type'])}\n  ${String(res.text).slice(0, 800)}`,
    );
  };
  const text = res.text ?? '';
  const sent = `${decodeSafe(r.url)}\n${r.body ?? ''}\n${JSON.stringify(r.headers)}`;

  if (res.status >= 500) {
    if (!(res.status === 503 && res.headers['retry-after'])) fail(`server error ${res.status}`);
  }
  const stack = STACK.exec(text);
  if (stack && !sent.includes(stack[0])) fail(`stack trace in body: ${stack[0]}`);
  for (const re of SQL) {
    const m = re.exec(text);
    if (m && !sent.toLowerCase().includes(m[0].toLowerCase())) fail(`SQL fragment in body: ${m[0].slice(0, 80)}`);
  }
  if (text.includes(ownerKey)) fail('owner key in body');
  for (const [k, v] of Object.entries(res.headers)) if (String(v).includes(ownerKey)) fail(`owner key in header ${k}`);

  if (res.status >= 400 && res.status < 500) {
    if (!/^application\/problem\+json\b/.test(String(res.headers['content-type']))) fail('4xx is not application/problem+json');
    let problem: unknown;
    try {
      problem = JSON.parse(text);
    } catch {
      fail('problem body is not JSON');
    }
    const p = problem as { code?: unknown; status?: unknown };
    if (typeof p?.code !== 'string') fail('problem has no string code');
    if (p.status !== res.status) fail(`problem status ${String(p.status)} != HTTP ${res.status}`);
  }
}

function decodeSafe(s: string): string {
  try {
    return `${s}\n${decodeURIComponent(s)}`;
  } catch {
    return s;
  }
}

// ---- one property per operation ------------------------------------------------------------------------

describe('fuzz: every operation', () => {
  test.each(operations.map((op) => [`${op.id} ${op.method.toUpperCase()} ${op.path}`, op] as const))('%s', async (_name, op) => {
    // A fresh workspace per operation: a destructive random success (revoking a key, removing a member)
    // cannot starve the following operations of a working owner key.
    const ws = await createWorkspace(ctx);
    await fc.assert(
      fc.asyncProperty(requestArb(op), async (r) => {
        check(op, r, await send(op, r, ws.ownerKey), ws.ownerKey, 'owner key');
        check(op, r, await send(op, r, null), ws.ownerKey, 'no credential');
      }),
      { numRuns: NUM_RUNS, interruptAfterTimeLimit: 15000, markInterruptAsFailure: false },
    );
  }, 30000);
});

// ---- wrong methods: 405 is still a problem ------------------------------------------------------------

describe('fuzz: wrong method on a known path', () => {
  // Methods answered at a concrete URL: any row whose template matches it (literal segments such as
  // /v1/ingest/deliveries also match a {param} row like POST /v1/ingest/{channel}).
  const templates = operations.map((op) => ({ re: new RegExp(`^${op.path.replace(/\{[^}]+\}/g, '[^/]+')}$`), method: op.method }));
  const urls = [...new Set(operations.map((op) => op.path.replace(/\{[^}]+\}/g, '00000000-0000-4000-8000-000000000000')))];
  const cases = urls.flatMap((url) => {
    const methods = new Set(templates.filter((t) => t.re.test(url)).map((t) => t.method));
    return (['get', 'post', 'put', 'patch', 'delete'] as const).filter((m) => !methods.has(m)).map((m) => [m, url] as const);
  });

  test('every unregistered method on every operation path answers 405 problem+json with Allow', async () => {
    const ws = await createWorkspace(ctx);
    const failures: string[] = [];
    expect(cases.length).toBeGreaterThan(0);
    for (const [method, url] of cases) {
      for (const cred of [ws.ownerKey, null]) {
        let req = ctx.http[method](url).ok(() => true);
        if (cred) req = req.set(bearer(cred));
        const res = await req;
        const ct = String(res.headers['content-type']);
        let body: { code?: unknown; status?: unknown } = {};
        try {
          body = JSON.parse(res.text ?? '');
        } catch {
          /* reported below */
        }
        if (res.status !== 405 || !/^application\/problem\+json\b/.test(ct) || typeof body.code !== 'string' || body.status !== 405 || !res.headers.allow)
          failures.push(`${method.toUpperCase()} ${url} [${cred ? 'owner key' : 'no credential'}] -> ${res.status} ${ct} allow=${String(res.headers.allow)} ${String(res.text).slice(0, 200)}`);
      }
    }
    expect(failures).toEqual([]);
  });
});

// ---- requests node:http refuses itself ---------------------------------------------------------------------

/**
 * A request line over Node's 16 KB header limit is refused by node:http before Express runs; the server's
 * 'clientError' handler (src/http/client-errors.ts) still answers it as a problem document.
 */
describe('oversized request line', () => {
  test('a 20 KB path id answers 431 problem+json with a stable code (node:http refuses it before any handler)', async () => {
    const ws = await createWorkspace(ctx);
    const res = await ctx.http.get(`/v1/tickets/${'a'.repeat(20000)}`).set(bearer(ws.ownerKey)).ok(() => true);
    expect(res.status).toBe(431);
    expect(String(res.headers['content-type'])).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(res.text)).toMatchObject({ status: 431, code: 'request_header_too_large' });
  });
});
