/**
 * Outbound webhook delivery (issue 19), end to end with real receivers on loopback and the workers in
 * process: every request is verified with the `standardwebhooks` package; retries carry the same
 * webhook-id; one ticket's events arrive in commit order while another ticket's flow past a failing one;
 * a rolled-back change sends nothing; rotation signs with both secrets; a failing endpoint is disabled.
 */
import { addressAllowed } from '../src/domains/webhook-endpoints/transport';
import { startTestApp, type TestContext } from './helpers/context';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { changeRolledBack, createTicket } from './helpers/tickets';
import { eventually, sleep } from './helpers/wait';
import { startReceiver, verify, type Received } from './helpers/webhook-receiver';
import { useTestApp } from './helpers/use-test-app';

/** Fast retries for tests: 50 ms first ceiling, a 20 s window, a 1 s request time-out, a sweep every 300 ms, a short-lived breaker. */
const FAST = {
  OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true',
  OUTBOUND_WEBHOOK_RETRY_BASE_MS: '50',
  // The circuit breaker opens for 0.1 s (at most 1.6 s) here, so retries of a receiver that comes back are quick.
  OUTBOUND_WEBHOOK_CIRCUIT_OPEN_SECONDS: '0.1',
  OUTBOUND_WEBHOOK_RETRY_HOURS: String(20 / 3600),
  OUTBOUND_WEBHOOK_DELIVERY_TIMEOUT_MS: '1000',
  OUTBOUND_WEBHOOK_SWEEP_MS: '300',
};

const receivers: { stop(): Promise<void> }[] = [];

const { ctx } = useTestApp({
  env: FAST,
  workers: true,
  teardown: async () => {
    await Promise.all(receivers.map((r) => r.stop().catch(() => {})));
  },
});

async function receiver(...args: Parameters<typeof startReceiver>) {
  const r = await startReceiver(...args);
  receivers.push(r);
  return r;
}

async function endpoint(c: TestContext, w: Workspace, url: string, eventTypes: string[] = ['ticket.created', 'ticket.updated', 'ticket.status_changed', 'message.created']) {
  const res = await c.http.post('/v1/webhook-endpoints').set(bearer(w.ownerKey)).send({ url, event_types: eventTypes });
  expect(res.status).toBe(201);
  return res.body as { id: string; secret: string };
}

const ticketOf = (r: Received) => (r.event.data.ticket as { id: string } | undefined)?.id;
const idsOf = (rs: Received[]) => rs.map((r) => String(r.headers['webhook-id']));
const until = <T>(probe: () => T | undefined, what: string, ms = 15_000) => eventually(async () => probe(), ms, what, 25);

type Attempt = { event_id: string; attempt: number; outcome: string; status_code: number | null; duration_ms: number; error: string | null; next_retry_at: string | null };
async function attempts(w: Workspace, endpointId: string): Promise<Attempt[]> {
  const res = await ctx.http.get(`/v1/webhook-endpoints/${endpointId}/deliveries?limit=500`).set(bearer(w.ownerKey)).expect(200);
  return res.body.deliveries as Attempt[];
}

test('an event is POSTed as the log shows it, signed per Standard Webhooks, with webhook-id = event id', async () => {
  const w = await createWorkspace(ctx);
  const rx = await receiver();
  const ep = await endpoint(ctx, w, rx.url, ['ticket.created']);
  const t = (await createTicket(ctx, w, { subject: 'Signed' })) as { id: string };
  const [got] = await until(() => (rx.received.length ? rx.received : undefined), 'the delivery');
  expect(verify(ep.secret, got!)).toMatchObject({ type: 'ticket.created' });
  expect(got!.headers['content-type']).toBe('application/json');
  expect(Number(got!.headers['webhook-timestamp'])).toBeGreaterThan(Date.now() / 1000 - 60);
  expect(String(got!.headers['webhook-signature'])).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
  const log = (await ctx.http.get('/v1/events').set(bearer(w.ownerKey))).body.events as { id: string }[];
  expect(got!.headers['webhook-id']).toBe(got!.event.id);
  expect(got!.event).toEqual(log.find((e) => e.id === got!.event.id));
  expect(ticketOf(got!)).toBe(t.id);
  // A tampered body fails verification.
  expect(() => verify(ep.secret, { ...got!, body: got!.body.replace('Signed', 'Forged') })).toThrow();
});

test('a receiver answering 500 twice then 200 gets the event three times with the same webhook-id; the list shows three attempts', async () => {
  const w = await createWorkspace(ctx);
  const rx = await receiver((_r, n) => (n <= 2 ? 500 : 200));
  const ep = await endpoint(ctx, w, rx.url, ['ticket.created']);
  await createTicket(ctx, w);
  await until(() => (rx.received.length >= 3 ? true : undefined), 'three requests');
  await sleep(300);
  expect(rx.received).toHaveLength(3);
  expect(new Set(idsOf(rx.received)).size).toBe(1);
  for (const r of rx.received) verify(ep.secret, r);
  const list = await eventually(async () => {
    const a = await attempts(w, ep.id);
    return a.length === 3 ? a : undefined;
  }, 5000, 'three attempts listed');
  // Newest first.
  expect(list.map((a) => [a.attempt, a.outcome, a.status_code])).toEqual([
    [3, 'delivered', 200],
    [2, 'retrying', 500],
    [1, 'retrying', 500],
  ]);
  expect(new Set(list.map((a) => a.event_id))).toEqual(new Set([rx.received[0]!.event.id]));
  expect(list[1]!.error).toBe('HTTP 500');
  expect(list[1]!.next_retry_at).toEqual(expect.any(String));
  expect(list[0]!.next_retry_at).toBeNull();
  for (const a of list) expect(a.duration_ms).toBeGreaterThanOrEqual(0);
  // The list pages with a cursor like every other list.
  const paged: Attempt[] = [];
  let after: string | null = null;
  do {
    const page: { body: { deliveries: Attempt[]; next_cursor: string | null } } = await ctx.http
      .get(`/v1/webhook-endpoints/${ep.id}/deliveries?limit=2${after ? `&after=${after}` : ''}`)
      .set(bearer(w.ownerKey))
      .expect(200);
    paged.push(...page.body.deliveries);
    after = page.body.next_cursor;
  } while (after);
  expect(paged).toEqual(list);
  expect((await ctx.http.get(`/v1/webhook-endpoints/${ep.id}/deliveries?after=bogus`).set(bearer(w.ownerKey))).status).toBe(400);
});

test('a receiver that does not answer within OUTBOUND_WEBHOOK_DELIVERY_TIMEOUT_MS counts as a failure and is retried', async () => {
  const w = await createWorkspace(ctx);
  const rx = await receiver((_r, n) => (n === 1 ? 'hang' : 200));
  const ep = await endpoint(ctx, w, rx.url, ['ticket.created']);
  await createTicket(ctx, w);
  await until(() => (rx.received.length === 2 ? true : undefined), 'the retry after the time-out');
  const list = await eventually(async () => {
    const a = await attempts(w, ep.id);
    return a.length === 2 ? a : undefined;
  }, 5000, 'two attempts listed');
  expect(list.map((a) => [a.attempt, a.outcome, a.status_code, a.error])).toEqual([
    [2, 'delivered', 200, null],
    [1, 'retrying', null, 'no answer within 1000 ms'],
  ]);
  expect(list[1]!.duration_ms).toBeGreaterThanOrEqual(990);
  expect(rx.received[0]!.headers['webhook-id']).toBe(rx.received[1]!.headers['webhook-id']);
});

test('20 concurrent writers on one ticket: the receiver gets its events in the order they committed', async () => {
  const w = await createWorkspace(ctx);
  const rx = await receiver((_r, n) => (n % 4 === 2 ? 500 : 200));
  await endpoint(ctx, w, rx.url, ['ticket.updated']);
  const t = (await createTicket(ctx, w)) as { id: string };
  const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(w.ownerKey)).send({ tags: [`t${i}`] })));
  for (const a of answers) expect(a.status).toBe(200);
  const log = ((await ctx.http.get('/v1/events?types=ticket.updated').set(bearer(w.ownerKey))).body.events as { id: string }[]).map((e) => e.id);
  expect(log).toHaveLength(20);
  await until(() => (new Set(idsOf(rx.received)).size === 20 ? true : undefined), 'all twenty');
  expect([...new Set(idsOf(rx.received))]).toEqual(log);
});

test('receiver down for a while: every event is delivered once it is back, nothing lost', async () => {
  const w = await createWorkspace(ctx);
  const rx = await receiver();
  const ep = await endpoint(ctx, w, rx.url, ['ticket.created']);
  await rx.stop();
  const tickets = [];
  for (let i = 0; i < 4; i++) tickets.push(((await createTicket(ctx, w)) as { id: string }).id);
  // Refused connections are recorded as attempts while it is down.
  await eventually(async () => ((await attempts(w, ep.id)).some((a) => a.error === 'connection refused') ? true : undefined), 10_000, 'a refused attempt');
  await sleep(800);
  await rx.start();
  await until(() => (new Set(rx.received.map(ticketOf)).size === 4 ? true : undefined), 'all four after the return');
  expect(new Set(rx.received.map(ticketOf))).toEqual(new Set(tickets));
  const log = ((await ctx.http.get('/v1/events?types=ticket.created').set(bearer(w.ownerKey))).body.events as { id: string }[]).map((e) => e.id);
  expect(new Set(idsOf(rx.received))).toEqual(new Set(log));
});

test('one ticket\'s events arrive in commit order while its first is retried; another ticket\'s events are not held up', async () => {
  const w = await createWorkspace(ctx);
  // Ticket A's created event is refused until all three of ticket B's events have arrived: B must flow
  // past A's retries (were B held up behind A, this would never finish), and A's later events must wait.
  const fastSeen = new Set<string>();
  let failures = 0;
  const rx = await receiver((r) => {
    const subject = (r.event.data.ticket as { subject?: string }).subject;
    if (subject === 'Fast') fastSeen.add(r.event.id);
    if (subject === 'Slow' && r.event.type === 'ticket.created' && fastSeen.size < 3) {
      failures += 1;
      return 500;
    }
    return 200;
  });
  // The ticket events only (a new customer's customer.created has no ticket to order by).
  await endpoint(ctx, w, rx.url, ['ticket.created', 'ticket.updated']);
  const a = (await createTicket(ctx, w, { subject: 'Slow' })) as { id: string };
  for (const tags of [['a1'], ['a2'], ['a3']]) await ctx.http.patch(`/v1/tickets/${a.id}`).set(bearer(w.ownerKey)).send({ tags }).expect(200);
  const b = (await createTicket(ctx, w, { subject: 'Fast' })) as { id: string };
  for (const tags of [['b1'], ['b2']]) await ctx.http.patch(`/v1/tickets/${b.id}`).set(bearer(w.ownerKey)).send({ tags }).expect(200);

  const log = (await ctx.http.get('/v1/events?limit=500&types=ticket.created,ticket.updated').set(bearer(w.ownerKey))).body.events as { id: string; data: { ticket: { id: string } } }[];
  const inLog = (id: string) => log.filter((e) => e.data.ticket.id === id).map((e) => e.id);
  await until(() => (new Set(idsOf(rx.received)).size === log.length ? true : undefined), 'every event delivered');
  expect(failures).toBeGreaterThanOrEqual(1);

  // First arrival of each event id, per ticket: exactly the log's order.
  const firstSeen = (id: string) => [...new Set(rx.received.filter((r) => ticketOf(r) === id).map((r) => r.event.id))];
  expect(firstSeen(a.id)).toEqual(inLog(a.id));
  expect(firstSeen(b.id)).toEqual(inLog(b.id));
  // Nothing of ticket A after its created event went out before that event was accepted.
  const aRequests = rx.received.filter((r) => ticketOf(r) === a.id);
  expect(aRequests.slice(0, failures + 1).map((r) => r.event.type)).toEqual(Array(failures + 1).fill('ticket.created'));
  // Ticket B's events all arrived before A's first event was accepted.
  const aAccepted = aRequests[failures]!.at;
  const bLast = Math.max(...rx.received.filter((r) => ticketOf(r) === b.id).map((r) => r.at));
  expect(bLast).toBeLessThanOrEqual(aAccepted);
});

test('a receiver that never answers holds only its own endpoint\'s slots: another workspace\'s events go out meanwhile', async () => {
  const slow = await createWorkspace(ctx);
  const hung = await receiver(() => 'hang');
  const slowEp = await endpoint(ctx, slow, hung.url, ['ticket.created']);
  const slots = ctx.config.OUTBOUND_WEBHOOK_ENDPOINT_CONCURRENCY;
  for (let i = 0; i < slots + 6; i++) await createTicket(ctx, slow);
  // At most OUTBOUND_WEBHOOK_ENDPOINT_CONCURRENCY requests of the stuck endpoint are open at once.
  await until(() => (hung.received.length >= slots ? true : undefined), 'the stuck endpoint to take its slots');
  const w = await createWorkspace(ctx);
  const rx = await receiver();
  await endpoint(ctx, w, rx.url, ['ticket.created']);
  const started = Date.now();
  await createTicket(ctx, w);
  await until(() => (rx.received.length === 1 ? true : undefined), 'the other workspace\'s event');
  expect(Date.now() - started).toBeLessThan(900);
  // Never more than its slots at once, and it did hold many at once (how many depends on how many events a
  // round found: tickets are created one by one while the first rounds run, and each hung send times out).
  expect(hung.maxOpen).toBeLessThanOrEqual(slots);
  expect(hung.maxOpen).toBeGreaterThanOrEqual(slots / 2);
  await ctx.http.patch(`/v1/webhook-endpoints/${slowEp.id}`).set(bearer(slow.ownerKey)).send({ enabled: false }).expect(200);
});

test('a change that rolls back sends nothing; the next committed change is delivered', async () => {
  const w = await createWorkspace(ctx);
  const rx = await receiver();
  await endpoint(ctx, w, rx.url);
  const t = (await createTicket(ctx, w)) as { id: string };
  await until(() => (rx.received.length === 1 ? true : undefined), 'the created event');
  await changeRolledBack(ctx, w, t.id);
  await ctx.http.patch(`/v1/tickets/${t.id}`).set(bearer(w.ownerKey)).send({ tags: ['after'] }).expect(200);
  await until(() => (rx.received.length === 2 ? true : undefined), 'the committed change');
  await sleep(500);
  expect(rx.received.map((r) => r.event.type)).toEqual(['ticket.created', 'ticket.updated']);
  expect(rx.received.map((r) => (r.event.data.ticket as { status: string }).status)).toEqual(['open', 'open']);
});

test('after a rotation both secrets sign (space-separated), each verifies on its own', async () => {
  const w = await createWorkspace(ctx);
  const rx = await receiver();
  const ep = await endpoint(ctx, w, rx.url, ['ticket.created']);
  const rotated = await ctx.http.post(`/v1/webhook-endpoints/${ep.id}/rotate-secret`).set(bearer(w.ownerKey)).expect(200);
  await createTicket(ctx, w);
  const [got] = await until(() => (rx.received.length ? rx.received : undefined), 'the delivery');
  const sigs = String(got!.headers['webhook-signature']).split(' ');
  expect(sigs).toHaveLength(2);
  expect(verify(rotated.body.secret, got!)).toBeTruthy();
  expect(verify(ep.secret, got!)).toBeTruthy();
  // Each signature alone is the one its secret makes.
  expect(() => verify(rotated.body.secret, { ...got!, headers: { ...got!.headers, 'webhook-signature': sigs[1] } })).toThrow();
  expect(verify(ep.secret, { ...got!, headers: { ...got!.headers, 'webhook-signature': sigs[1] } })).toBeTruthy();
  expect(verify(rotated.body.secret, { ...got!, headers: { ...got!.headers, 'webhook-signature': sigs[0] } })).toBeTruthy();
});

test('replay sends the endpoint\'s events since a time again: same ids, new attempts', async () => {
  const w = await createWorkspace(ctx);
  const rx = await receiver();
  const ep = await endpoint(ctx, w, rx.url, ['ticket.created']);
  const since = new Date(Date.now() - 1000).toISOString();
  await createTicket(ctx, w);
  await createTicket(ctx, w);
  await until(() => (rx.received.length === 2 ? true : undefined), 'both events');
  // Replay leaves a delivery still pending alone: wait until both are recorded as delivered.
  await eventually(async () => ((await attempts(w, ep.id)).filter((a) => a.outcome === 'delivered').length === 2 ? true : undefined), 5000, 'both settled');
  const res = await ctx.http.post(`/v1/webhook-endpoints/${ep.id}/replay`).set(bearer(w.ownerKey)).send({ since }).expect(202);
  expect(res.body).toEqual({ replayed: 2 });
  await until(() => (rx.received.length === 4 ? true : undefined), 'both again');
  const ids = idsOf(rx.received);
  expect(ids.slice(2).sort()).toEqual(ids.slice(0, 2).sort());
  expect((await attempts(w, ep.id)).filter((a) => a.outcome === 'delivered')).toHaveLength(4);
});

test('nothing of a secret reaches a log line', async () => {
  const w = await createWorkspace(ctx);
  const rx = await receiver((_r, n) => (n === 1 ? 500 : 200));
  const ep = await endpoint(ctx, w, rx.url, ['ticket.created']);
  const rotated = (await ctx.http.post(`/v1/webhook-endpoints/${ep.id}/rotate-secret`).set(bearer(w.ownerKey)).expect(200)).body.secret as string;
  await createTicket(ctx, w);
  await until(() => (rx.received.length === 2 ? true : undefined), 'the retried delivery');
  for (const s of [ep.secret, rotated]) {
    const key = s.slice('whsec_'.length);
    expect(ctx.logs.text).not.toContain(key.slice(0, 16));
    expect(ctx.logs.text).not.toContain(Buffer.from(key, 'base64').toString('hex').slice(0, 16));
  }
});

test('a disabled endpoint sends nothing; enabled again, it delivers what was pending and what comes next', async () => {
  const w = await createWorkspace(ctx);
  let accept = false;
  const rx = await receiver(() => (accept ? 200 : 500));
  const ep = await endpoint(ctx, w, rx.url, ['ticket.created']);
  await createTicket(ctx, w);
  await until(() => (rx.received.length >= 1 ? true : undefined), 'the first refused try');
  await ctx.http.patch(`/v1/webhook-endpoints/${ep.id}`).set(bearer(w.ownerKey)).send({ enabled: false }).expect(200);
  await sleep(400);
  const whileDisabled = rx.received.length;
  await createTicket(ctx, w);
  await sleep(600);
  // At most a request already in flight when it was disabled.
  expect(rx.received.length).toBeLessThanOrEqual(whileDisabled + 1);
  accept = true;
  await ctx.http.patch(`/v1/webhook-endpoints/${ep.id}`).set(bearer(w.ownerKey)).send({ enabled: true }).expect(200);
  const t3 = (await createTicket(ctx, w)) as { id: string };
  await until(() => (rx.received.some((r) => ticketOf(r) === t3.id) ? true : undefined), 'the event after enabling');
  const log = ((await ctx.http.get('/v1/events?types=ticket.created').set(bearer(w.ownerKey))).body.events as { id: string }[]).map((e) => e.id);
  const delivered = new Set(idsOf(rx.received));
  // The first ticket's event (pending while disabled) and the third's arrive; the second's, committed while
  // disabled, was never queued for it.
  expect(delivered.has(log[0]!)).toBe(true);
  expect(delivered.has(log[2]!)).toBe(true);
  expect(delivered.has(log[1]!)).toBe(false);
});

describe('an endpoint failing event after event', () => {
  let c: TestContext;
  beforeAll(async () => {
    // A retry window of about a second and three failed events in a row disable the endpoint.
    c = await startTestApp({ env: { ...FAST, OUTBOUND_WEBHOOK_RETRY_HOURS: String(1 / 3600), OUTBOUND_WEBHOOK_DISABLE_AFTER_FAILURES: '3' } });
    await c.startWorkers();
  });
  afterAll(async () => {
    await c?.close();
  });

  test('is disabled after OUTBOUND_WEBHOOK_DISABLE_AFTER_FAILURES consecutive failed events, with an endpoint.disabled audit entry', async () => {
    const w = await createWorkspace(c);
    const rx = await receiver(() => 503);
    const ep = await endpoint(c, w, rx.url, ['ticket.created']);
    for (let i = 0; i < 3; i++) await createTicket(c, w);
    const read = async () => ((await c.http.get('/v1/webhook-endpoints').set(bearer(w.ownerKey))).body.webhook_endpoints as { id: string; enabled: boolean; disabled_reason: string | null; consecutive_failures: number }[]).find((e) => e.id === ep.id)!;
    const disabled = await eventually(async () => {
      const e = await read();
      return e.enabled ? undefined : e;
    }, 20_000, 'the endpoint to be disabled');
    expect(disabled).toMatchObject({ enabled: false, disabled_reason: 'failures', consecutive_failures: 3 });
    const audit = (await c.http.get('/v1/audit-log?limit=100').set(bearer(w.ownerKey))).body.audit_entries as { action: string; target_id: string; actor_user_id: string | null; details: Record<string, unknown> }[];
    const entry = audit.find((e) => e.action === 'endpoint.disabled' && e.target_id === ep.id);
    expect(entry).toMatchObject({ actor_user_id: null, details: { reason: 'failures', consecutive_failures: 3 } });
    const list = (await c.http.get(`/v1/webhook-endpoints/${ep.id}/deliveries?limit=500`).set(bearer(w.ownerKey))).body.deliveries as Attempt[];
    expect(list.filter((a) => a.outcome === 'failed')).toHaveLength(3);
    // Disabled: later events are not sent to it.
    const before = rx.received.length;
    await createTicket(c, w);
    await sleep(700);
    expect(rx.received.length).toBe(before);
  });
});

describe('the address guard (no loopback, no private networks: the default)', () => {
  const { ctx: c } = useTestApp({ env: { ...FAST, OUTBOUND_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'false', OUTBOUND_WEBHOOK_RETRY_HOURS: String(1 / 3600) }, workers: true });

  test('a name that resolves to loopback is refused at send, before connecting; the attempt says why', async () => {
    const w = await createWorkspace(c);
    const rx = await receiver();
    const port = new URL(rx.url).port;
    const res = await c.http.post('/v1/webhook-endpoints').set(bearer(w.ownerKey)).send({ url: `https://localhost:${port}/hooks`, event_types: ['ticket.created'] }).expect(201);
    await createTicket(c, w);
    const list = await eventually(async () => {
      const r = await c.http.get(`/v1/webhook-endpoints/${res.body.id}/deliveries`).set(bearer(w.ownerKey));
      return (r.body.deliveries as Attempt[]).length > 0 ? (r.body.deliveries as Attempt[]) : undefined;
    }, 10_000, 'an attempt');
    expect(list[list.length - 1]).toMatchObject({ status_code: null, error: 'refused by policy: the endpoint resolves to an address this deployment does not deliver to' });
    expect(rx.received).toHaveLength(0);
  });

  test('which addresses the guard lets through', () => {
    const strict = { allowLoopback: false, allowPrivate: false };
    for (const a of ['127.0.0.1', '127.5.6.7', '::1', '10.0.0.1', '172.16.5.4', '192.168.0.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', 'fd12::1', 'fe80::1', '::ffff:10.0.0.1', '::ffff:127.0.0.1', '::']) {
      expect([a, addressAllowed(a, strict)]).toEqual([a, false]);
    }
    for (const a of ['93.184.216.34', '1.1.1.1', '2606:4700:4700::1111', '172.32.0.1']) expect([a, addressAllowed(a, strict)]).toEqual([a, true]);
    expect(addressAllowed('127.0.0.1', { allowLoopback: true, allowPrivate: false })).toBe(true);
    expect(addressAllowed('10.0.0.1', { allowLoopback: true, allowPrivate: false })).toBe(false);
    expect(addressAllowed('10.0.0.1', { allowLoopback: false, allowPrivate: true })).toBe(true);
  });

  test('every IANA special-purpose range is refused, v4 and v6, whatever the deployment allows (issue 32)', () => {
    const open = { allowLoopback: true, allowPrivate: true };
    const special = [
      '0.1.2.3', '169.254.169.254', '192.0.0.8', '192.0.2.1', '192.31.196.1', '192.52.193.1', '192.88.99.1', '192.175.48.1', '198.18.0.1', '198.19.255.254',
      '198.51.100.7', '203.0.113.9', '224.0.0.1', '239.255.255.250', '240.0.0.1', '255.255.255.255',
      '::', '::7f00:1', '::ffff:0:a00:1', '64:ff9b::7f00:1', '64:ff9b::a9fe:a9fe', '64:ff9b:1::1', '100::1', '100:0:0:1::1',
      '2001::1', '2001:0:4136:e378:8000:63bf:3fff:fdd2', '2001:2::1', '2001:3::1', '2001:4:112::1', '2001:10::1', '2001:20::1', '2001:30::1', '2001:db8::1',
      '2002:7f00:1::1', '2002:a9fe:a9fe::1', '2620:4f:8000::1', '3fff::1', '5f00::1', 'fe80::1', 'fec0::1', 'ff02::1', '::ffff:169.254.169.254',
    ];
    for (const a of special) expect([a, addressAllowed(a, open)]).toEqual([a, false]);
    // Next to them, ordinary global addresses stay deliverable.
    for (const a of ['192.0.3.1', '192.88.100.1', '198.20.0.1', '2001:200::1', '2003::1', '2600::1', '2620:4f:8001::1']) expect([a, addressAllowed(a, open)]).toEqual([a, true]);
  });
});
