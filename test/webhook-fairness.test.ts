/**
 * Outbound webhooks fair across workspaces (issue 32, finding 3): workspace A pointed 40 endpoints at a
 * receiver that never answers, and workspace B's deliveries went from ~17 ms to a median of ~9.6 s: A's hung
 * sends held every delivery slot. Now A's endpoints send at most OUTBOUND_WEBHOOK_WORKSPACE_CONCURRENCY at a time (the
 * rest wait their turn), each endpoint is held back by its own circuit breaker, and a workspace holds at most
 * OUTBOUND_WEBHOOK_ENDPOINTS_PER_WORKSPACE endpoints. The measured version is `npm run bench:outbound-fairness`.
 */
import { sql } from 'kysely';
import { startTestApp, type TestContext } from './helpers/context';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { createTicket } from './helpers/tickets';
import { eventually, sleep } from './helpers/wait';
import { startReceiver } from './helpers/webhook-receiver';
import { useTestApp } from './helpers/use-test-app';

const receivers: { stop(): Promise<void> }[] = [];
async function receiver(...args: Parameters<typeof startReceiver>) {
  const r = await startReceiver(...args);
  receivers.push(r);
  return r;
}
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.stop().catch(() => {})));
});

async function endpoint(c: TestContext, w: Workspace, url: string) {
  const res = await c.http.post('/v1/webhook-endpoints').set(bearer(w.ownerKey)).send({ url, event_types: ['ticket.created'] });
  expect(res.status).toBe(201);
  return res.body as { id: string };
}

/** Live sender leases of a workspace's endpoints now. */
const liveSenders = async (c: TestContext, tenantId: string) =>
  Number((await sql<{ n: number }>`select count(*)::int as n from webhook_endpoints where tenant_id = ${tenantId} and sender_until >= now()`.execute(c.db)).rows[0]!.n);

const BASE = { OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true', OUTBOUND_WEBHOOK_RETRY_BASE_MS: '50', OUTBOUND_WEBHOOK_SWEEP_MS: '300' };

describe('endpoints per workspace are capped', () => {
  const { ctx } = useTestApp({ env: { ...BASE, OUTBOUND_WEBHOOK_ENDPOINTS_PER_WORKSPACE: '3' } });

  test('concurrent creations past OUTBOUND_WEBHOOK_ENDPOINTS_PER_WORKSPACE answer 409 endpoint_limit_reached and create nothing; a deletion frees a place; other workspaces are unaffected', async () => {
    const w = await createWorkspace(ctx);
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => ctx.http.post('/v1/webhook-endpoints').set(bearer(w.ownerKey)).send({ url: 'http://127.0.0.1:9/hook', event_types: ['ticket.created'] })),
    );
    expect(answers.map((r) => r.status).sort()).toEqual([201, 201, 201, 409, 409, 409]);
    expect(answers.find((r) => r.status === 409)!.body.code).toBe('endpoint_limit_reached');
    const list = (await ctx.http.get('/v1/webhook-endpoints').set(bearer(w.ownerKey))).body.webhook_endpoints as { id: string }[];
    expect(list).toHaveLength(3);
    await ctx.http.delete(`/v1/webhook-endpoints/${list[0]!.id}`).set(bearer(w.ownerKey)).expect(204);
    await endpoint(ctx, w, 'http://127.0.0.1:9/hook');
    await endpoint(ctx, await createWorkspace(ctx), 'http://127.0.0.1:9/hook');
  });
});

describe('a workspace\'s senders share OUTBOUND_WEBHOOK_WORKSPACE_CONCURRENCY slots', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    // Two slots per workspace, four per worker process, a 3 s time-out; the breaker out of the way here.
    ctx = await startTestApp({
      env: { ...BASE, OUTBOUND_WEBHOOK_WORKSPACE_CONCURRENCY: '2', OUTBOUND_WEBHOOK_DELIVERY_CONCURRENCY: '4', OUTBOUND_WEBHOOK_DELIVERY_TIMEOUT_MS: '3000', OUTBOUND_WEBHOOK_CIRCUIT_FAILURES: '10000' },
    });
    await ctx.startWorkers();
  });
  afterAll(async () => {
    await ctx?.close();
  });

  test('12 endpoints on a receiver that never answers hold at most 2 senders; another workspace\'s event goes out at once', async () => {
    const a = await createWorkspace(ctx);
    const hung = await receiver(() => 'hang');
    for (let i = 0; i < 12; i += 1) await endpoint(ctx, a, hung.url);
    let most = 0;
    const sampling = (async () => {
      for (let i = 0; i < 40; i += 1) {
        most = Math.max(most, await liveSenders(ctx, a.tenantId));
        await sleep(50);
      }
    })();
    await createTicket(ctx, a);
    await eventually(async () => (hung.received.length >= 2 ? true : undefined), 5000, 'A\'s first sends to hang');
    const b = await createWorkspace(ctx);
    const rx = await receiver();
    await endpoint(ctx, b, rx.url);
    const started = Date.now();
    await createTicket(ctx, b);
    await eventually(async () => (rx.received.length === 1 ? true : undefined), 5000, 'B\'s event');
    // Without the workspace's cap A's twelve hung sends fill all four slots for 3 s.
    expect(Date.now() - started).toBeLessThan(1500);
    await sampling;
    expect(most).toBeLessThanOrEqual(2);
    expect(most).toBeGreaterThanOrEqual(1);
    expect(hung.maxOpen).toBeLessThanOrEqual(2);
  });

  test('endpoints waiting for a slot get their turn: five healthy endpoints sharing one slot each receive every event', async () => {
    const single = await startTestApp({ env: { ...BASE, OUTBOUND_WEBHOOK_WORKSPACE_CONCURRENCY: '1' } });
    try {
      await single.startWorkers();
      const w = await createWorkspace(single);
      const rx = await Promise.all(Array.from({ length: 5 }, () => receiver()));
      for (const r of rx) await endpoint(single, w, r.url);
      for (let i = 0; i < 4; i += 1) await createTicket(single, w);
      await eventually(async () => (rx.every((r) => r.received.length === 4) ? true : undefined), 15_000, 'every endpoint to receive every event');
      expect(Math.max(...rx.map((r) => r.maxOpen))).toBeGreaterThanOrEqual(1);
    } finally {
      await single.close();
    }
  });
});

describe('each endpoint has its own circuit breaker', () => {
  const { ctx } = useTestApp({ env: { ...BASE, OUTBOUND_WEBHOOK_CIRCUIT_FAILURES: '3', OUTBOUND_WEBHOOK_CIRCUIT_OPEN_SECONDS: '1.5', OUTBOUND_WEBHOOK_DELIVERY_TIMEOUT_MS: '500', OUTBOUND_WEBHOOK_RETRY_HOURS: String(60 / 3600) }, workers: true });

  test('3 failed attempts in a row open it: nothing is sent until one event probes it; a delivered probe closes it and every event arrives once, in order', async () => {
    const w = await createWorkspace(ctx);
    let down = true;
    const rx = await receiver(() => (down ? 503 : 200));
    const ep = await endpoint(ctx, w, rx.url);
    const t = (await createTicket(ctx, w)) as { id: string };
    await eventually(async () => {
      const e = (await ctx.http.get('/v1/webhook-endpoints').set(bearer(w.ownerKey))).body.webhook_endpoints.find((x: { id: string }) => x.id === ep.id);
      return e.circuit === 'open' ? e : undefined;
    }, 10_000, 'the circuit to open');
    const atOpen = rx.received.length;
    expect(atOpen).toBe(3);
    // Open: more events commit, nothing is sent.
    for (let i = 0; i < 3; i += 1) await createTicket(ctx, w);
    // The wait is 1.5 s ± 25 %: well inside it.
    await sleep(600);
    expect(rx.received.length).toBe(atOpen);
    // The probe fails too: one request, and the circuit opens again for longer.
    await eventually(async () => (rx.received.length === atOpen + 1 ? true : undefined), 5000, 'one probe');
    await sleep(300);
    expect(rx.received.length).toBe(atOpen + 1);
    down = false;
    await eventually(async () => (new Set(rx.received.filter((r) => r.at > 0).map((r) => r.event.id)).size === 4 && rx.received.slice(-3).every((r) => r.event.type === 'ticket.created') ? true : undefined), 15_000, 'every event once the receiver is back');
    const delivered = rx.received.slice(atOpen + 1).map((r) => (r.event.data.ticket as { id: string }).id);
    expect(delivered[0]).toBe(t.id);
    const shown = (await ctx.http.get('/v1/webhook-endpoints').set(bearer(w.ownerKey))).body.webhook_endpoints.find((x: { id: string }) => x.id === ep.id);
    expect(shown.circuit).toBe('closed');
  });

  test('a healthy endpoint never writes its breaker: its round costs what it cost before', async () => {
    const w = await createWorkspace(ctx);
    const rx = await receiver();
    const ep = await endpoint(ctx, w, rx.url);
    for (let i = 0; i < 3; i += 1) await createTicket(ctx, w);
    await eventually(async () => (rx.received.length === 3 ? true : undefined), 5000, 'three deliveries');
    const row = await ctx.db.selectFrom('webhook_endpoints').select(['circuit_failures', 'circuit_opens', 'circuit_open_until']).where('tenant_id', '=', w.tenantId).where('id', '=', ep.id).executeTakeFirstOrThrow();
    expect(row).toEqual({ circuit_failures: 0, circuit_opens: 0, circuit_open_until: null });
  });
});
