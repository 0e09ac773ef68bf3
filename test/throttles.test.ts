/**
 * Throttles count what they protect (issue 15, item 3): refusals on the public intake routes are charged to
 * the sender's address and never to a workspace; ingest charges one point per message and refuses requests
 * above INGEST_MAX_MESSAGES_PER_REQUEST; integrations are capped per workspace; failed authentication is
 * throttled per client address. One app with small budgets; each test uses its own client address
 * (X-Forwarded-For, TRUST_PROXY=true) and its own workspaces, so budgets never leak between tests.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { createAuthFailureBudget } from '../src/limits/auth-failures';
import { statusOf } from '../src/http/errors';
import { unauthenticated } from '../src/lib/errors';
import type { Principal } from '../src/domains/identity/principal';
import { createLogger } from '../src/lib/logger';
import { createRealm, LogCapture, startTestApp, type TestContext } from './helpers/context';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { connect, countRows } from './helpers/ingest';
import { telegramUpdate, whatsappMessage, whatsappPayload } from './helpers/payloads';
import { rawOf, signedHeaders, zendeskEvent, zendeskUserEvent } from './helpers/webhooks';

const WORKSPACE_POINTS = 5;
const REFUSAL_POINTS = 10;
const AUTH_POINTS = 30;
const MAX_INTEGRATIONS = 3;

let ctx: TestContext;
beforeAll(async () => {
  ctx = await startTestApp({
    env: {
      TRUST_PROXY: 'true',
      INGEST_RATE_POINTS: String(WORKSPACE_POINTS),
      INGEST_RATE_WINDOW_SECONDS: '60',
      INBOUND_WEBHOOK_RATE_POINTS: String(WORKSPACE_POINTS),
      INBOUND_WEBHOOK_RATE_WINDOW_SECONDS: '60',
      INGEST_REFUSAL_RATE_POINTS: String(REFUSAL_POINTS),
      INGEST_REFUSAL_RATE_WINDOW_SECONDS: '60',
      INGEST_MAX_MESSAGES_PER_REQUEST: '100',
      MAX_INTEGRATIONS_PER_WORKSPACE: String(MAX_INTEGRATIONS),
      AUTH_FAILURE_RATE_POINTS: String(AUTH_POINTS),
      AUTH_FAILURE_WINDOW_SECONDS: '60',
      OPS_USER: 'ops',
      OPS_PASSWORD: 'ops-ops-ops-ops',
    },
  });
  await ctx.startWorkers();
});
afterAll(async () => {
  await ctx?.close();
});

const wrongKey = () => `hdk_${randomBytes(24).toString('base64url')}`;

/** A fresh client address per caller (random private 10/8 address). */
const newAddress = () => `10.${randomBytes(1)[0]}.${randomBytes(1)[0]}.${randomBytes(1)[0]}`;

const ingestFrom = (address: string, channel: string, body: unknown) =>
  ctx.http.post(`/v1/ingest/${channel}`).set('X-Forwarded-For', address).send(body as object);

function expectRetryAfter(res: { status: number; headers: Record<string, string>; body: { code?: string } }, windowSeconds = 60) {
  expect(res.status).toBe(429);
  expect(res.body.code).toBe('throttled');
  expect(res.headers['retry-after']).toMatch(/^\d+$/);
  expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(windowSeconds);
}

async function workspaceWith(channel: string): Promise<Workspace> {
  const ws = await createWorkspace(ctx);
  await connect(ctx, ws, channel);
  return ws;
}

/** A WhatsApp delivery carrying `n` distinct customer messages from `n` senders. */
const whatsappBatch = (n: number, prefix = String(Date.now() % 1_000_000)) =>
  whatsappPayload({ messages: Array.from({ length: n }, (_, i) => whatsappMessage({ from: `1555${prefix}${String(i).padStart(4, '0')}` })) });

describe('ingest refusals never spend a workspace budget', () => {
  test('30 anonymous invalid Telegram bodies (more than the workspace budget) leave the workspace\'s next real message accepted; past the address\'s refusal budget they are 429 for that address only', async () => {
    const ws = await workspaceWith('telegram');
    const attacker = newAddress();
    const before = await countRows(ctx, ws.tenantId);
    const statuses: number[] = [];
    for (let i = 0; i < 30; i++) {
      // Unreadable payloads, an unknown workspace and a body without a payload: every kind of refusal.
      const body =
        i % 3 === 0
          ? { tenant_id: ws.tenantId, payload: { update_id: i, message: { text: 'no chat, no sender' } } }
          : i % 3 === 1
            ? { tenant_id: randomUUID(), payload: telegramUpdate() }
            : { tenant_id: ws.tenantId };
      const res = await ingestFrom(attacker, 'telegram', body);
      statuses.push(res.status);
      if (i >= REFUSAL_POINTS) expectRetryAfter(res);
    }
    expect(statuses.slice(0, REFUSAL_POINTS).every((s) => s === 400 || s === 404)).toBe(true);
    expect(statuses.slice(REFUSAL_POINTS).every((s) => s === 429)).toBe(true);
    expect(await countRows(ctx, ws.tenantId)).toEqual(before);

    // The workspace's budget is untouched: a real message from the provider is accepted, and so is one from
    // the attacker's own address (only its refusals are throttled).
    const real = await ingestFrom(newAddress(), 'telegram', { tenant_id: ws.tenantId, payload: telegramUpdate() });
    expect(real.status).toBe(200);
    expect(real.body).toMatchObject({ was_created: true });
    expect((await ingestFrom(attacker, 'telegram', { tenant_id: ws.tenantId, payload: telegramUpdate() })).status).toBe(200);
    // Another address's refusal is still a plain refusal.
    expect((await ingestFrom(newAddress(), 'telegram', { tenant_id: randomUUID(), payload: telegramUpdate() })).status).toBe(404);
  });
});

describe('ingest charges one point per message', () => {
  test('a WhatsApp request with 300 messages is refused with 400 payload_too_complex and writes nothing', async () => {
    const ws = await workspaceWith('whatsapp');
    const before = await countRows(ctx);
    const res = await ingestFrom(newAddress(), 'whatsapp', { tenant_id: ws.tenantId, payload: whatsappBatch(300) });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('payload_too_complex');
    expect(res.body.detail).toContain('100');
    expect(await countRows(ctx)).toEqual(before);
    // A refusal: the workspace budget is whole, so five single messages still fit.
    for (let i = 0; i < WORKSPACE_POINTS; i++) {
      expect((await ingestFrom(newAddress(), 'whatsapp', { tenant_id: ws.tenantId, payload: whatsappBatch(1, `9${i}`) })).status).toBe(200);
    }
  });

  test('a request carrying N messages costs N points: the budget is spent by messages, not requests', async () => {
    const ws = await workspaceWith('whatsapp');
    const from = newAddress();
    const send = (payload: unknown) => ingestFrom(from, 'whatsapp', { tenant_id: ws.tenantId, payload });
    const first = await send(whatsappBatch(3, '11'));
    expect(first.status).toBe(200);
    expect(first.body.messages).toHaveLength(3);
    const before = await countRows(ctx, ws.tenantId);
    // Two points left: a 3-message request is refused whole and writes nothing…
    expectRetryAfter(await send(whatsappBatch(3, '22')));
    expect(await countRows(ctx, ws.tenantId)).toEqual(before);
    // …and its refusal cost nothing: exactly two more messages fit, then the next request is 429.
    expect((await send(whatsappBatch(2, '33'))).status).toBe(200);
    expectRetryAfter(await send(whatsappBatch(1, '44')));
    expect((await countRows(ctx, ws.tenantId)).tickets).toBe(5);
  });

  test('exactly what was not written is refunded: a request repeating two delivered messages with one new one costs one point', async () => {
    const ws = await workspaceWith('whatsapp');
    const from = newAddress();
    const send = (payload: unknown) => ingestFrom(from, 'whatsapp', { tenant_id: ws.tenantId, payload });
    const a = whatsappMessage({ from: '15557770001' });
    const b = whatsappMessage({ from: '15557770002' });
    const c = whatsappMessage({ from: '15557770003' });
    expect((await send(whatsappPayload({ messages: [a, b] }))).status).toBe(200); // 2 points
    const again = await send(whatsappPayload({ messages: [a, b, c] })); // 3 charged, 2 refunded
    expect(again.status).toBe(200);
    expect(again.body.messages.map((m: { was_duplicate: boolean }) => m.was_duplicate)).toEqual([true, true, false]);
    expect((await send(whatsappBatch(2, '55'))).status).toBe(200); // 5 spent
    expectRetryAfter(await send(whatsappBatch(1, '66')));
  });
});

describe('webhook refusals are charged to the sender\'s address, never to the integration', () => {
  test('bad signatures, an unknown integration and unreadable bodies turn 429 past the address\'s refusal budget; the integration\'s next signed delivery is accepted', async () => {
    const ws = await createWorkspace(ctx);
    const secret = `whsec_${randomBytes(16).toString('hex')}`;
    const created = await ctx.http.post('/v1/integrations').set(bearer(ws.ownerKey)).send({ provider: 'zendesk', name: 'Zendesk', signing_secret: secret });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    const attacker = newAddress();
    const post = (path: string, raw: string, headers: Record<string, string>, address = attacker) =>
      ctx.http.post(path).set({ ...headers, 'X-Forwarded-For': address }).send(raw);
    const wrong = (raw: string) => signedHeaders('zendesk', 'whsec_not-the-right-secret-000000', raw);
    const statuses: number[] = [];
    for (let i = 0; i < REFUSAL_POINTS + 5; i++) {
      const raw = rawOf(zendeskEvent());
      const res =
        i % 3 === 0
          ? await post(`/v1/webhooks/zendesk/${id}`, raw, wrong(raw))
          : i % 3 === 1
            ? await post(`/v1/webhooks/zendesk/${randomUUID()}`, raw, signedHeaders('zendesk', secret, raw))
            : await post(`/v1/webhooks/zendesk/${id}`, '{"not json', signedHeaders('zendesk', secret, '{"not json'));
      statuses.push(res.status);
      if (i >= REFUSAL_POINTS) expectRetryAfter(res);
    }
    expect(statuses.slice(0, REFUSAL_POINTS).every((s) => [400, 401, 404].includes(s))).toBe(true);
    // More refusals than the integration's own budget, yet its deliveries pass, from any address.
    for (let i = 0; i < WORKSPACE_POINTS; i++) {
      const raw = rawOf(zendeskEvent());
      const res = await post(`/v1/webhooks/zendesk/${id}`, raw, signedHeaders('zendesk', secret, raw), i === 0 ? attacker : newAddress());
      expect(res.status).toBe(200);
      expect(res.body.status).toBe('ok');
    }
  });
});

describe('webhooks follow the intake refund rule (src/limits/intake.ts): points bound writes', () => {
  test('redeliveries are refunded and non-ticket events cost nothing: one event, five redeliveries and ten ignored events, then exactly four more distinct fit', async () => {
    const ws = await createWorkspace(ctx);
    const secret = `whsec_${randomBytes(16).toString('hex')}`;
    const created = await ctx.http.post('/v1/integrations').set(bearer(ws.ownerKey)).send({ provider: 'zendesk', name: 'Zendesk', signing_secret: secret });
    expect(created.status).toBe(201);
    const post = (raw: string) => ctx.http.post(`/v1/webhooks/zendesk/${created.body.id}`).set({ ...signedHeaders('zendesk', secret, raw), 'X-Forwarded-For': newAddress() }).send(raw);
    const raw = rawOf(zendeskEvent());
    const first = await post(raw);
    expect(first.status).toBe(200);
    expect(first.body.status).toBe('ok');
    for (let i = 0; i < WORKSPACE_POINTS; i++) expect((await post(raw)).status).toBe(200);
    for (let i = 0; i < 2 * WORKSPACE_POINTS; i++) {
      const ignored = await post(rawOf(zendeskUserEvent()));
      expect(ignored.status).toBe(200);
      expect(ignored.body).toEqual({ status: 'ignored' });
    }
    for (let i = 1; i < WORKSPACE_POINTS; i++) expect((await post(rawOf(zendeskEvent()))).status).toBe(200);
    expectRetryAfter(await post(rawOf(zendeskEvent())));
  });
});

describe('integrations per workspace are capped (MAX_INTEGRATIONS_PER_WORKSPACE)', () => {
  test('concurrent creations beyond the cap answer 409 integration_limit_reached and create nothing; a deletion frees a place; other workspaces are unaffected', async () => {
    const [ws, other] = await Promise.all([createWorkspace(ctx), createWorkspace(ctx)]);
    const create = (w: Workspace, n: number) => ctx.http.post('/v1/integrations').set(bearer(w.ownerKey)).send({ provider: 'front', name: `Front ${n}` });
    const results = await Promise.all(Array.from({ length: MAX_INTEGRATIONS + 4 }, (_, n) => create(ws, n)));
    const created = results.filter((r) => r.status === 201);
    const refused = results.filter((r) => r.status === 409);
    expect(created).toHaveLength(MAX_INTEGRATIONS);
    expect(refused).toHaveLength(4);
    for (const r of refused) {
      expect(r.body.code).toBe('integration_limit_reached');
      expect(r.body.detail).toContain(String(MAX_INTEGRATIONS));
    }
    const rows = await ctx.db.selectFrom('integrations').select('id').where('tenant_id', '=', ws.tenantId).execute();
    expect(rows).toHaveLength(MAX_INTEGRATIONS);
    const audited = await ctx.db.selectFrom('audit_log').select('id').where('tenant_id', '=', ws.tenantId).where('action', '=', 'integration.created').execute();
    expect(audited).toHaveLength(MAX_INTEGRATIONS);

    expect((await create(other, 0)).status).toBe(201);
    expect((await ctx.http.delete(`/v1/integrations/${created[0]!.body.id}`).set(bearer(ws.ownerKey))).status).toBe(204);
    expect((await create(ws, 99)).status).toBe(201);
    expect((await create(ws, 100)).status).toBe(409);
  });
});

describe('failed authentication is throttled per client address', () => {
  const get = (address: string, token?: string) => {
    const req = ctx.http.get('/v1/tickets').set('X-Forwarded-For', address);
    return token === undefined ? req : req.set(bearer(token));
  };

  test('31 wrong keys from one address: 401 thirty times, then 429 with Retry-After; a valid key from that address is still served; another address is unaffected', async () => {
    const ws = await createWorkspace(ctx);
    const attacker = newAddress();
    for (let i = 0; i < AUTH_POINTS; i++) expect((await get(attacker, wrongKey())).status).toBe(401);
    expectRetryAfter(await get(attacker, wrongKey()));
    // An office behind one NAT address: its valid keys keep working while one client there fails.
    expect((await get(attacker, ws.ownerKey)).status).toBe(200);
    expectRetryAfter(await get(attacker, wrongKey()));
    const bystander = newAddress();
    expect((await get(bystander, ws.ownerKey)).status).toBe(200);
    expect((await get(bystander, wrongKey())).status).toBe(401);
  });

  test('past the budget, an access token already verified is served and a new valid one is verified within a bounded number of signature checks per address', async () => {
    const ws = await createWorkspace(ctx);
    const address = newAddress();
    const seen = await ctx.realm.sign({ sub: ws.ownerSubject, tenant_id: ws.tenantId });
    expect((await get(address, seen)).status).toBe(200);
    for (let i = 0; i < AUTH_POINTS; i++) expect((await get(address, wrongKey())).status).toBe(401);
    expectRetryAfter(await get(address, wrongKey()));
    // Verified before the lockout: no signature work, served.
    expect((await get(address, seen)).status).toBe(200);
    // A fresh valid token: verified (the address still has signature checks this window), served.
    expect((await get(address, await ctx.realm.sign({ sub: ws.ownerSubject, tenant_id: ws.tenantId, n: 1 }))).status).toBe(200);
    // Tokens with a forged signature use up the address's signature checks: 429 from there on, unverified.
    const forged = await ctx.realm.sign({ sub: ws.ownerSubject, tenant_id: ws.tenantId }, { privateKey: (await createRealm()).privateKey });
    const answers: number[] = [];
    for (let i = 0; i < AUTH_POINTS + 5; i++) answers.push((await get(address, `${forged}`.replace(/.$/, String(i % 10)))).status);
    expect(answers.every((s) => s === 429)).toBe(true);
    // Now even a new valid token waits (no signature work is left for this address), and the known one is served.
    expectRetryAfter(await get(address, await ctx.realm.sign({ sub: ws.ownerSubject, tenant_id: ws.tenantId, n: 2 })));
    expect((await get(address, seen)).status).toBe(200);
  });

  test('successful requests spend nothing: after 100 valid requests an address still has all 30 failures', async () => {
    const ws = await createWorkspace(ctx);
    const address = newAddress();
    for (let i = 0; i < 100; i++) expect((await get(address, ws.ownerKey)).status).toBe(200);
    for (let i = 0; i < AUTH_POINTS; i++) expect((await get(address, wrongKey())).status).toBe(401);
    expectRetryAfter(await get(address, wrongKey()));
  });

  test('tokens without a membership (404) count as failures too', async () => {
    const ws = await createWorkspace(ctx);
    const address = newAddress();
    for (let i = 0; i < AUTH_POINTS; i++) {
      const token = await ctx.realm.sign({ sub: `stranger-${i}`, tenant_id: ws.tenantId });
      expect((await get(address, token)).status).toBe(404);
    }
    expectRetryAfter(await get(address, await ctx.realm.sign({ sub: 'stranger-x', tenant_id: ws.tenantId })));
  });

  test('every new 429 is counted under the operation it answered (runs after the tests above)', async () => {
    const res = await ctx.http.get('/metrics').set('Authorization', `Basic ${Buffer.from('ops:ops-ops-ops-ops').toString('base64')}`);
    expect(res.status).toBe(200);
    for (const route of ['list_tickets', 'ingest_channel_message', 'receive_webhook']) {
      expect(res.text).toMatch(new RegExp(`helpdesk_throttle_rejections_total\\{route="${route}"\\} [1-9]`));
    }
  });
});

describe('the failed-authentication throttle with Redis unreachable', () => {
  test('fails open: valid credentials authenticate, wrong ones stay 401 (never 429), and a warning is logged without the credential', async () => {
    const redis = new Redis('redis://127.0.0.1:1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0 });
    const logs = new LogCapture();
    const logger = createLogger(ctx.config, logs);
    const throttle = createAuthFailureBudget({ redis, config: { ...ctx.config, AUTH_FAILURE_RATE_POINTS: 1 }, logger });
    const principal = { kind: 'user', tenantId: randomUUID() } as unknown as Principal;
    const secret = wrongKey();
    try {
      for (let i = 0; i < 3; i++) {
        await expect(throttle.authenticate('10.9.9.9', `Bearer ${secret}`, async () => principal)).resolves.toBe(principal);
        await expect(throttle.authenticate('10.9.9.9', `Bearer ${secret}`, async () => Promise.reject(unauthenticated()))).rejects.toMatchObject({ code: 'unauthenticated' });
        expect(statusOf('unauthenticated')).toBe(401);
      }
    } finally {
      redis.disconnect();
    }
    expect(logs.parsed().some((l) => l.level === 40 && l.err_code === 'auth_throttle_unavailable')).toBe(true);
    expect(logs.text).not.toContain(secret);
  });
});
