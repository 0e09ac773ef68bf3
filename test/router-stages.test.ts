/**
 * The router's stages one by one (src/http/stages/, issue 35), with a request and a response made here: each
 * stage's own rule, apart from the whole suite that drives them together through real routes.
 */
import type { Request, Response } from 'express';
import { z } from 'zod';
import type { Principal } from '../src/domains/identity/principal';
import type { Operation } from '../src/http/operation';
import { sendAnswer } from '../src/http/stages/answer';
import { PUBLIC_PRINCIPAL, type Exchange, type RouterServices } from '../src/http/stages/context';
import { guard } from '../src/http/stages/guard';
import { parseIfMatch, runHandler } from '../src/http/stages/handler';
import { beginIdempotency, takesIdempotencyKey, type Idempotency } from '../src/http/stages/idempotency';
import { bodyReaders, readInput, type Input } from '../src/http/stages/input';
import { chargeLimits } from '../src/http/stages/limits';

const agent = (over: Partial<Principal> = {}): Principal => ({ kind: 'user', tenantId: 't1', userId: 'u1', role: 'editor', apiKeyId: null, scopes: null, agentIds: [], ...over }) as unknown as Principal;

function fakeReq(o: { headers?: Record<string, string>; params?: Record<string, string>; query?: Record<string, unknown>; method?: string } = {}): Request {
  const headers = Object.fromEntries(Object.entries(o.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
  return { headers, params: o.params ?? {}, query: o.query ?? {}, method: o.method ?? 'GET', path: '/x', id: 'r1', ip: '127.0.0.1', complete: true, get: (h: string) => headers[h.toLowerCase()], log: { warn: () => {} } } as unknown as Request;
}
function fakeRes() {
  const sent: { status?: number; body?: unknown; ended?: boolean; headers: Record<string, unknown> } = { headers: {} };
  const res = {
    locals: {},
    setHeader: (k: string, v: unknown) => void (sent.headers[k.toLowerCase()] = v),
    status(s: number) {
      sent.status = s;
      return res;
    },
    type: () => res,
    send(b: unknown) {
      sent.body = b;
      return res;
    },
    json(b: unknown) {
      sent.body = b;
      return res;
    },
    end() {
      sent.ended = true;
      return res;
    },
  };
  return { res: res as unknown as Response, sent };
}

/** The budgets (src/limits/), each answering as if nothing were over. */
const limitsWith = (over: Record<string, unknown> = {}) => ({
  authFailures: { authenticate: async () => agent() },
  api: { take: async () => ({ 'RateLimit-Remaining': '9' }) },
  refusals: { charge: async (_ip: string, err: unknown) => err },
  ...over,
});

const services = (over: Partial<Record<keyof RouterServices, unknown>> = {}) =>
  ({
    limits: limitsWith(),
    identity: { authenticate: async () => agent() },
    idempotency: { check: () => {}, fingerprint: () => 'fp', start: async () => ({ run: true }), finish: async () => {}, release: async () => {}, maxStoredBytes: 1000 },
    reads: { wrote: async () => {} },
    ...over,
  }) as unknown as RouterServices;

const op = (o: Partial<Operation<RouterServices>>): Operation<RouterServices> =>
  ({ id: 'op', method: 'get', path: '/x', summary: 's', access: { floor: 'editor', tag: 'tickets', action: 'read' }, response: { status: 200, description: 'd', schema: z.object({ a: z.number() }) }, handler: async () => ({ body: { a: 1 } }), ...o }) as Operation<RouterServices>;

const exchange = (o: Operation<RouterServices>, s = services(), req = fakeReq(), principal = agent()) => {
  const { res, sent } = fakeRes();
  return { x: { op: o, services: s, req, res, principal } as Exchange, sent };
};
const noIdem: Idempotency = { key: undefined, replayed: false, keep: async () => {}, release: async () => {} };

describe('guard', () => {
  test('a public operation consults no credential', async () => {
    let asked = false;
    const s = services({ limits: limitsWith({ authFailures: { authenticate: async () => ((asked = true), agent()) } }) });
    const { x } = exchange(op({ access: 'public' }), s);
    expect(await guard(x)).toBe(PUBLIC_PRINCIPAL);
    expect(asked).toBe(false);
  });
  test('a role under the floor is 403 insufficient_role; a key without the scope is 403 insufficient_scope', async () => {
    const viewer = services({ limits: limitsWith({ authFailures: { authenticate: async () => agent({ role: 'viewer' }) } }) });
    await expect(guard(exchange(op({}), viewer).x)).rejects.toMatchObject({ code: 'insufficient_role' });
    const scoped = services({ limits: limitsWith({ authFailures: { authenticate: async () => agent({ scopes: ['customers:read'] as never }) } }) });
    await expect(guard(exchange(op({}), scoped).x)).rejects.toMatchObject({ code: 'insufficient_scope' });
  });
});

describe('limits', () => {
  test('authenticated answers carry the budgets\' headers; public ones are not charged here', async () => {
    const { x, sent } = exchange(op({}));
    await chargeLimits(x);
    expect(sent.headers['ratelimit-remaining']).toBe('9');
    const pub = exchange(op({ access: 'public' }));
    await chargeLimits(pub.x);
    expect(pub.sent.headers).toEqual({});
  });
});

describe('input', () => {
  const readers = bodyReaders({ bodyLimit: 1024 });
  test('a path id holding a NUL is the same 404 as an unknown id', async () => {
    const { x } = exchange(op({ params: z.object({ id: z.string() }) }), services(), fakeReq({ params: { id: 'a\u0000b' } }));
    await expect(readInput(x, readers)).rejects.toMatchObject({ code: 'not_found' });
  });
  test('a query the schema refuses is 400 validation_failed naming the field', async () => {
    const { x } = exchange(op({ query: z.strictObject({ limit: z.coerce.number().max(10) }) }), services(), fakeReq({ query: { limit: '99' } }));
    await expect(readInput(x, readers)).rejects.toMatchObject({ code: 'validation_failed' });
  });
  test('a streamed body with a Content-Encoding is 415 before a byte is read', async () => {
    const { x } = exchange(op({ method: 'post', streamBody: { mediaType: 'multipart/form-data', schema: {} } }), services(), fakeReq({ method: 'POST', headers: { 'content-encoding': 'gzip' } }));
    await expect(readInput(x, readers)).rejects.toMatchObject({ code: 'unsupported_media_type' });
  });
});

describe('idempotency', () => {
  const input: Input = { params: undefined, query: {}, body: { a: 1 }, sent: { a: 1 } };
  test('authenticated POST and PATCH take a key; GET, public and streamed bodies do not', () => {
    expect(takesIdempotencyKey(op({ method: 'post' }))).toBe(true);
    expect(takesIdempotencyKey(op({ method: 'patch' }))).toBe(true);
    expect(takesIdempotencyKey(op({ method: 'get' }))).toBe(false);
    expect(takesIdempotencyKey(op({ method: 'post', access: 'public' }))).toBe(false);
    expect(takesIdempotencyKey(op({ method: 'post', streamBody: { mediaType: 'x', schema: {} } }))).toBe(false);
  });
  test('a key seen before answers its first answer again, marked Idempotent-Replayed, and nothing runs', async () => {
    const s = services({ idempotency: { check: () => {}, fingerprint: () => 'fp', start: async () => ({ run: false, status: 201, body: '{"a":1}' }), finish: async () => {}, release: async () => {}, maxStoredBytes: 1000 } });
    const { x, sent } = exchange(op({ method: 'post' }), s, fakeReq({ method: 'POST', headers: { 'idempotency-key': 'k1' } }));
    const idem = await beginIdempotency(x, input);
    expect(idem.replayed).toBe(true);
    expect(sent).toMatchObject({ status: 201, body: '{"a":1}', headers: { 'idempotent-replayed': 'true' } });
  });
});

describe('handler', () => {
  test('If-Match: strong tags only, or *', () => {
    expect(parseIfMatch('"3", W/"4"')).toEqual(['3']);
    expect(parseIfMatch(' * ')).toBe('*');
  });
  test('a handler that throws frees the idempotency key; a write marks the caller for primary reads', async () => {
    let released = false;
    let wrote = false;
    const s = services({ reads: { wrote: async () => void (wrote = true) } });
    const failing = exchange(op({ method: 'post', handler: async () => Promise.reject(new Error('no')) }), s);
    await expect(runHandler(failing.x, { params: undefined, query: {}, body: {}, sent: {} }, { ...noIdem, key: 'k', release: async () => void (released = true) }, (async () => agent()) as never)).rejects.toThrow('no');
    expect(released).toBe(true);
    await runHandler(exchange(op({ method: 'post' }), s).x, { params: undefined, query: {}, body: {}, sent: {} }, noIdem, (async () => agent()) as never);
    expect(wrote).toBe(true);
  });
});

describe('answer', () => {
  test('a versioned GET whose If-None-Match names the version is 304 with the ETag', async () => {
    const { x, sent } = exchange(op({ versioned: true }), services(), fakeReq({ headers: { 'if-none-match': '"7"' } }));
    await sendAnswer(x, { body: { a: 1 }, version: 7 } as never, noIdem);
    expect(sent).toMatchObject({ status: 304, ended: true, headers: { etag: '"7"' } });
  });
  test('the response schema is the allowlist: unknown fields do not leave; an answer is kept under its key', async () => {
    let kept: unknown;
    const { x, sent } = exchange(op({ method: 'post' }));
    await sendAnswer(x, { body: { a: 1, secret: 'x' } } as never, { ...noIdem, key: 'k', keep: async (_s, a) => void (kept = a) });
    expect(sent.body).toBe('{"a":1}');
    expect(kept).toEqual({ body: '{"a":1}' });
  });
  test('204 answers nothing and keeps a null body for a replay', async () => {
    let kept: unknown;
    const { x, sent } = exchange(op({ method: 'post', response: { status: 204, description: 'd' } }));
    await sendAnswer(x, {} as never, { ...noIdem, key: 'k', keep: async (_s, a) => void (kept = a) });
    expect(sent).toMatchObject({ status: 204, ended: true });
    expect(kept).toEqual({ body: null });
  });
});
