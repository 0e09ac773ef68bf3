/**
 * Replies reach the customer on the channel they wrote from (issue 33): for email through Postmark, SMS through
 * Twilio, WhatsApp Cloud API and the Telegram Bot API, a reply posted through the API is sent once by the worker
 * to the provider double, addressed to the customer's own handle, and its delivery is visible on the timeline,
 * in GET /v1/tickets/{id}/deliveries and in the outbound event log: queued → sent → delivered → read, failed
 * with the provider's code, retried with backoff on 429/5xx, `unknown` when the provider never answered (the
 * agent's retry sends it again). Status callbacks come back through the native hook, signed like the provider
 * signs. Email replies through a connected mailbox are covered by mailbox-flows.test.ts.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes, randomInt } from 'node:crypto';
import { startTestApp, type TestContext } from './helpers/context';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { connect, ingest, ticketDetail, type TicketEvent } from './helpers/ingest';
import { emailPayload, newEmailMessageId, smsPayload, telegramUpdate, whatsappPayload } from './helpers/payloads';
import { freePort } from './helpers/ports';
import { doublesEnv, startForwarder, stopForwarder } from './helpers/public-forwarder';
import { startProviderDoubles, type ProviderDoubles, type RecordedSend } from './helpers/provider-doubles';
import { eventually, sleep } from './helpers/wait';

const AC = `AC${'5e'.repeat(16)}`;
const TWILIO_TOKEN = 'twilio-outbound-auth-token-0001';
const OUR_SMS = '+15550001111';
/** A second number of ours, the one the SMS customers write to: the answer must come from it, not OUR_SMS. */
const THEIR_SMS_TARGET = '+15550002222';
const PM_TOKEN = 'pm-server-token-outbound-0001';
const FROM_ADDRESS = 'support@acme.test';
const WA_NUMBER = '106540352242922';
/** The number the WhatsApp customers write to (another number of the same business, same token). */
const WA_OTHER_NUMBER = '106540352249999';
const WA_KEY = 'EAAG-outbound-system-user-token';
const WA_SECRET = 'meta-app-secret-outbound';
const TG_TOKEN = '987654321:AAOutboundBotTokenForTheDouble01';

const hex = (n: number) => randomBytes(n).toString('hex');
const newPhone = () => `+1555${String(randomInt(0, 1e7)).padStart(7, '0')}`;
const newWaId = () => `1650${String(randomInt(0, 1e7)).padStart(7, '0')}`;
let telegramUser = randomInt(1, 900_000) * 1000 + 5_100_000_000;

let doubles: ProviderDoubles;
let ctx: TestContext;
let forwarder: Server;
let publicBase: string;
let apiBase: string;


beforeAll(async () => {
  doubles = await startProviderDoubles();
  doubles.addTwilioAccount(AC, TWILIO_TOKEN);
  doubles.addPostmarkServer(PM_TOKEN);
  doubles.addWhatsappNumber(WA_NUMBER, WA_KEY);
  doubles.addWhatsappNumber(WA_OTHER_NUMBER, WA_KEY);
  doubles.addTelegramBot(TG_TOKEN);
  const port = await freePort();
  publicBase = `http://127.0.0.1:${port}`;
  ctx = await startTestApp({
    env: {
      ...doublesEnv(doubles),
      PUBLIC_BASE_URL: publicBase,
      OUTBOUND_SEND_TIMEOUT_MS: '700',
      OUTBOUND_RETRY_BASE_MS: '50',
    },
  });
  apiBase = `http://127.0.0.1:${(ctx.server.address() as AddressInfo).port}`;
  forwarder = await startForwarder(port, () => (ctx.server.address() as AddressInfo).port);
  await ctx.startWorkers();
});
afterAll(async () => {
  await ctx?.close();
  await stopForwarder(forwarder);
  await doubles?.close();
});
beforeEach(() => doubles.reset());

// ------------------------------------------------------------------------------------------------ helpers

type Delivery = Record<string, any>;

async function reply(ws: Workspace, ticketId: string, body: string, extra: Record<string, unknown> = {}) {
  return ctx.http.post(`/v1/tickets/${ticketId}/replies`).set(bearer(ws.ownerKey)).send({ body, ...extra });
}

/** Posts a reply (expecting 201) and returns its event id; the reply's own first delivery event is `queued`. */
async function replyOk(ws: Workspace, ticketId: string, body: string, extra: Record<string, unknown> = {}): Promise<string> {
  const res = await reply(ws, ticketId, body, extra);
  if (res.status !== 201) throw new Error(`reply: ${res.status} ${JSON.stringify(res.body)}`);
  const events = res.body.new_events as TicketEvent[];
  const event = events.find((e) => e.kind === 'reply')!;
  expect(event.meta).toMatchObject({ delivery: 'queued' });
  const queued = events.find((e) => e.kind === 'delivery');
  expect(queued?.meta).toMatchObject({ reply_event_id: event.id, state: 'queued' });
  return event.id;
}

const outboundRow = (tenantId: string, eventId: string) =>
  ctx.db.selectFrom('outbound_messages').selectAll().where('tenant_id', '=', tenantId).where('event_id', '=', eventId).executeTakeFirst();

/** Waits until the reply's outbox row is in one of `states`; returns the row. */
async function settledIn(tenantId: string, eventId: string, states: string[], timeoutMs = 10_000) {
  let last: string | undefined;
  return eventually(
    async () => {
      const row = await outboundRow(tenantId, eventId);
      last = row?.state;
      return row && states.includes(row.state) ? row : undefined;
    },
    timeoutMs,
    `reply ${eventId} to be ${states.join('/')} (last ${last})`,
    25,
  );
}

/** The reply's delivery moves on the timeline, in order. */
async function timeline(ws: Workspace, ticketId: string, eventId: string) {
  const t = await ticketDetail(ctx, ws, ticketId);
  return t.events.filter((e) => e.kind === 'delivery' && e.meta.reply_event_id === eventId);
}

async function deliveriesApi(ws: Workspace, ticketId: string): Promise<Delivery[]> {
  const res = await ctx.http.get(`/v1/tickets/${ticketId}/deliveries`).set(bearer(ws.ownerKey));
  expect(res.status).toBe(200);
  return res.body.deliveries;
}

/** The workspace's outbound event log entries of `type` about the reply. */
async function logged(ws: Workspace, type: string, eventId: string) {
  const res = await ctx.http.get(`/v1/events?types=${type}&limit=500`).set(bearer(ws.ownerKey));
  expect(res.status).toBe(200);
  return (res.body.events as { type: string; data: { event: { meta: Record<string, unknown> } } }[]).filter((e) => e.data.event.meta.reply_event_id === eventId);
}

async function retry(ws: Workspace, ticketId: string, eventId: string) {
  return ctx.http.post(`/v1/tickets/${ticketId}/deliveries/${eventId}/retry`).set(bearer(ws.ownerKey)).send();
}

const hookUrl = (base: string, channel: string, token: string) => `${base}/v1/hooks/${channel}/${token}`;

/** No job left for the outbox: the queue idle (so nothing is still on its way to the double). */
async function outboundIdle() {
  const q = ctx.runtime.queues.queue('outbound');
  await eventually(
    async () => {
      // The scheduled sweep always sits there delayed: only send jobs count.
      const jobs = await q.getJobs(['waiting', 'active', 'delayed', 'prioritized']);
      return jobs.every((j) => !j || j.name !== 'outbound.send') ? true : undefined;
    },
    10_000,
    'no send job left in the outbound queue',
    25,
  );
}

// ---------------------------------------------------------------------------------------------------- SMS

describe('SMS through Twilio', () => {
  let ws: Workspace;
  let token: string;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    const conn = await connect(ctx, ws, 'sms', { config: { account_sid: AC, auth_token: TWILIO_TOKEN, phone_number: OUR_SMS } });
    expect(conn).toMatchObject({ sendable: true });
    token = conn.details.inbound_token!;
  });

  async function smsTicket() {
    const customer = newPhone();
    const res = await ingest(ctx, 'sms', smsPayload({ from: customer, to: THEIR_SMS_TARGET, body: `Where is parcel ${hex(3)}?` }), ws.tenantId);
    expect(res.status).toBe(200);
    return { customer, ticketId: res.body.ticket_id as string };
  }
  const sendsTo = (customer: string) => doubles.sends('twilio').filter((s) => s.body.To === customer);

  test('a reply is sent once, to the number the customer wrote from and from the number they wrote to, whole, with its segment count on the timeline and in deliveries', async () => {
    const { customer, ticketId } = await smsTicket();
    // Longer than one GSM-7 segment: sent whole, Twilio splits it (2 segments).
    const text = `Your parcel left our warehouse this morning and should arrive tomorrow. ${'Thank you for your patience! '.repeat(4)}`.trim();
    expect(text.length).toBeGreaterThan(160);
    const eventId = await replyOk(ws, ticketId, text);
    const row = await settledIn(ws.tenantId, eventId, ['sent']);

    const sends = sendsTo(customer);
    expect(sends).toHaveLength(1);
    expect(sends[0]!.path).toBe(`/twilio/2010-04-01/Accounts/${AC}/Messages.json`);
    expect(sends[0]!.body).toEqual({ To: customer, From: THEIR_SMS_TARGET, Body: text, StatusCallback: hookUrl(publicBase, 'sms', token) });
    expect(sends[0]!.headers.authorization).toBe(`Basic ${Buffer.from(`${AC}:${TWILIO_TOKEN}`).toString('base64')}`);
    expect(row).toMatchObject({ provider_message_id: sends[0]!.providerMessageId, segments: 2, sender: 'twilio', attempts: 1 });

    const moves = await timeline(ws, ticketId, eventId);
    expect(moves.map((e) => e.meta.state)).toEqual(['queued', 'sent']);
    expect(moves[1]!.meta).toMatchObject({ channel: 'sms', provider_message_id: sends[0]!.providerMessageId, segments: 2, sender: 'twilio' });
    expect(moves[1]!.body).toMatch(/2 SMS segments/);
    const [d] = await deliveriesApi(ws, ticketId);
    expect(d).toMatchObject({ reply_event_id: eventId, ticket_id: ticketId, channel: 'sms', state: 'sent', sender: 'twilio', provider_message_id: sends[0]!.providerMessageId, segments: 2, attempts: 1, error_code: null });
    expect(d!.sent_at).not.toBeNull();
  });

  test('Twilio status callbacks on the StatusCallback URL, signed over PUBLIC_BASE_URL, move sent → delivered → read; message.delivered is logged; a late callback moves nothing back', async () => {
    const { ticketId } = await smsTicket();
    const eventId = await replyOk(ws, ticketId, 'On its way.');
    const row = await settledIn(ws.tenantId, eventId, ['sent']);
    const sid = row.provider_message_id!;

    // `sent` repeats what the send's answer said: accepted, nothing moves.
    let res = await doubles.twilioStatus(sid, 'sent');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/xml/);
    expect(await res.text()).toMatch(/<Response><\/Response>/);
    expect((await outboundRow(ws.tenantId, eventId))!.state).toBe('sent');

    expect((await doubles.twilioStatus(sid, 'delivered')).status).toBe(200);
    expect(await outboundRow(ws.tenantId, eventId)).toMatchObject({ state: 'delivered' });
    expect((await doubles.twilioStatus(sid, 'read')).status).toBe(200);
    const read = (await outboundRow(ws.tenantId, eventId))!;
    expect(read.state).toBe('read');
    expect(read.delivered_at).not.toBeNull();
    expect(read.read_at).not.toBeNull();
    // Out of order: a `delivered` arriving after `read` changes nothing.
    expect((await doubles.twilioStatus(sid, 'delivered')).status).toBe(200);
    expect((await outboundRow(ws.tenantId, eventId))!.state).toBe('read');

    expect((await timeline(ws, ticketId, eventId)).map((e) => e.meta.state)).toEqual(['queued', 'sent', 'delivered', 'read']);
    const [d] = await deliveriesApi(ws, ticketId);
    expect(d).toMatchObject({ state: 'read', delivered_at: expect.any(String), read_at: expect.any(String) });
    const delivered = await logged(ws, 'message.delivered', eventId);
    expect(delivered).toHaveLength(1);
    expect(delivered[0]!.data.event.meta).toMatchObject({ state: 'delivered', provider_message_id: sid });
  });

  test('a status callback saying undelivered fails the reply with Twilio\'s error code, and message.delivery_failed is logged', async () => {
    const { ticketId } = await smsTicket();
    const eventId = await replyOk(ws, ticketId, 'Can you confirm your address?');
    const sid = (await settledIn(ws.tenantId, eventId, ['sent'])).provider_message_id!;
    expect((await doubles.twilioStatus(sid, 'undelivered', { errorCode: '30003' })).status).toBe(200);
    expect(await outboundRow(ws.tenantId, eventId)).toMatchObject({ state: 'failed', error_code: '30003' });
    const moves = await timeline(ws, ticketId, eventId);
    expect(moves.at(-1)!.meta).toMatchObject({ state: 'failed', error_code: '30003' });
    const failed = await logged(ws, 'message.delivery_failed', eventId);
    expect(failed).toHaveLength(1);
    expect(failed[0]!.data.event.meta).toMatchObject({ state: 'failed', error_code: '30003' });
  });

  test('Twilio refusing the number (400, code 21211) fails the reply with that code, is not retried, and is logged as message.delivery_failed', async () => {
    const { customer, ticketId } = await smsTicket();
    doubles.failNext('twilio', { kind: 'rejected' });
    const eventId = await replyOk(ws, ticketId, 'Hello?');
    const row = await settledIn(ws.tenantId, eventId, ['failed']);
    expect(row).toMatchObject({ error_code: '21211', attempts: 1, provider_message_id: null });
    expect(row.last_error).toMatch(/not a valid phone number/);
    await outboundIdle();
    expect(sendsTo(customer)).toHaveLength(1);
    expect(sendsTo(customer)[0]!.answeredStatus).toBe(400);
    expect((await timeline(ws, ticketId, eventId)).map((e) => e.meta.state)).toEqual(['queued', 'failed']);
    expect((await deliveriesApi(ws, ticketId))[0]).toMatchObject({ state: 'failed', error_code: '21211' });
    expect(await logged(ws, 'message.delivery_failed', eventId)).toHaveLength(1);
  });

  test('a 429 with Retry-After is retried no sooner than the provider asked, then sent once; the timeline says retrying first', async () => {
    const { customer, ticketId } = await smsTicket();
    doubles.failNext('twilio', { kind: 'rate_limited', retryAfterSeconds: 1, retryAfterHeader: true });
    const eventId = await replyOk(ws, ticketId, 'Thanks for waiting.');
    const row = await settledIn(ws.tenantId, eventId, ['sent']);
    const sends = sendsTo(customer);
    expect(sends.map((s) => s.answeredStatus)).toEqual([429, 201]);
    // Backoff base is 50 ms here: only Retry-After explains a second or more between the two requests.
    expect(sends[1]!.at - sends[0]!.at).toBeGreaterThanOrEqual(950);
    expect(row).toMatchObject({ attempts: 2, provider_message_id: sends[1]!.providerMessageId });
    const states = (await timeline(ws, ticketId, eventId)).map((e) => e.meta.state);
    expect(states).toEqual(['queued', 'retrying', 'sent']);
  });

  test('a provider that answers 500 then 503 is retried with backoff and the reply is sent once', async () => {
    const { customer, ticketId } = await smsTicket();
    doubles.failNext('twilio', { kind: 'server_error' });
    doubles.failNext('twilio', { kind: 'server_error', status: 503 });
    const eventId = await replyOk(ws, ticketId, 'Sorry about the delay.');
    const row = await settledIn(ws.tenantId, eventId, ['sent']);
    expect(sendsTo(customer).map((s) => s.answeredStatus)).toEqual([500, 503, 201]);
    expect(row.attempts).toBe(3);
    expect((await timeline(ws, ticketId, eventId)).map((e) => e.meta.state)).toEqual(['queued', 'retrying', 'retrying', 'sent']);
  });

  test('no answer after the request left ends `unknown` and is never retried automatically; the agent\'s retry sends it again', async () => {
    const { customer, ticketId } = await smsTicket();
    doubles.failNext('twilio', { kind: 'hang' });
    const eventId = await replyOk(ws, ticketId, 'Did you get this?');
    const row = await settledIn(ws.tenantId, eventId, ['unknown']);
    expect(row.last_error).toMatch(/Unknown whether it was sent/);
    expect(row.attempts).toBe(1);
    // The provider has it (the double kept the message): nothing may send it again on its own.
    expect(sendsTo(customer)).toHaveLength(1);
    expect(sendsTo(customer)[0]!.providerMessageId).toBeDefined();
    await sleep(500);
    await ctx.services.outbound.sweep();
    expect(await ctx.services.outbound.send(ws.tenantId, eventId)).toEqual({ state: 'not_due' });
    await outboundIdle();
    expect(sendsTo(customer)).toHaveLength(1);
    expect((await outboundRow(ws.tenantId, eventId))!.state).toBe('unknown');
    expect((await timeline(ws, ticketId, eventId)).map((e) => e.meta.state)).toEqual(['queued', 'unknown']);
    expect((await deliveriesApi(ws, ticketId))[0]).toMatchObject({ state: 'unknown' });

    const again = await retry(ws, ticketId, eventId);
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({ reply_event_id: eventId, state: 'queued' });
    const sent = await settledIn(ws.tenantId, eventId, ['sent']);
    expect(sendsTo(customer)).toHaveLength(2);
    expect(sent.provider_message_id).toBe(sendsTo(customer)[1]!.providerMessageId);
    expect((await timeline(ws, ticketId, eventId)).map((e) => e.meta.state)).toEqual(['queued', 'unknown', 'queued', 'sent']);
    // A sent reply cannot be retried.
    const refused = await retry(ws, ticketId, eventId);
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('delivery_not_retryable');
  });

  test('a reply longer than 1600 characters is refused with reply_too_long and nothing is stored or sent', async () => {
    const { customer, ticketId } = await smsTicket();
    const before = (await ticketDetail(ctx, ws, ticketId)).events.length;
    const res = await reply(ws, ticketId, 'x'.repeat(1601));
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('reply_too_long');
    expect((await ticketDetail(ctx, ws, ticketId)).events).toHaveLength(before);
    expect(await deliveriesApi(ws, ticketId)).toEqual([]);
    await sleep(100);
    expect(sendsTo(customer)).toEqual([]);
  });

  test('a template reply on an SMS ticket is refused with template_not_allowed', async () => {
    const { ticketId } = await smsTicket();
    const res = await reply(ws, ticketId, 'Order update', { template: { name: 'order_update', language: 'en_US' } });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('template_not_allowed');
    expect(await deliveriesApi(ws, ticketId)).toEqual([]);
  });

  test('the send job delivered 20 times at once, and 20 jobs queued for one reply, send it exactly once', async () => {
    const q = ctx.runtime.queues.queue('outbound');
    // 20 concurrent runs of the job itself.
    const a = await smsTicket();
    await q.pause();
    let first: string;
    try {
      first = await replyOk(ws, a.ticketId, 'Redelivered twenty times.');
      const results = await Promise.all(Array.from({ length: 20 }, () => ctx.services.outbound.send(ws.tenantId, first)));
      expect(results.filter((r) => r.state === 'sent')).toHaveLength(1);
      expect(results.filter((r) => r.state === 'not_due')).toHaveLength(19);
    } finally {
      await q.resume();
    }
    // 20 more jobs through the queue for a second reply (distinct job ids, so BullMQ runs each).
    const b = await smsTicket();
    await q.pause();
    let second: string;
    try {
      second = await replyOk(ws, b.ticketId, 'Queued twenty times.');
      await Promise.all(Array.from({ length: 20 }, (_, i) => ctx.runtime.queues.enqueue('outbound.send', { tenant_id: ws.tenantId, event_id: second, attempt: 100 + i })));
    } finally {
      await q.resume();
    }
    await settledIn(ws.tenantId, second, ['sent']);
    await outboundIdle();
    // The first reply's own queued job ran too, after the pause: it found nothing to do.
    expect(sendsTo(a.customer)).toHaveLength(1);
    expect(sendsTo(b.customer)).toHaveLength(1);
    for (const id of [first, second]) {
      expect(await outboundRow(ws.tenantId, id)).toMatchObject({ state: 'sent', attempts: 1 });
      expect((await timeline(ws, id === first ? a.ticketId : b.ticketId, id)).map((e) => e.meta.state)).toEqual(['queued', 'sent']);
    }
  });
});

// ----------------------------------------------------------------------------------------------- WhatsApp

describe('WhatsApp Cloud API', () => {
  let ws: Workspace;
  let token: string;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    const conn = await connect(ctx, ws, 'whatsapp', { config: { phone_number_id: WA_NUMBER, api_key: WA_KEY, app_secret: WA_SECRET, verify_token: 'verify-me' } });
    expect(conn).toMatchObject({ sendable: true });
    token = conn.details.inbound_token!;
  });

  /** A customer writes to WA_OTHER_NUMBER (not the connection's phone_number_id): the answer must come from there. */
  async function waTicket(o: { timestamp?: number } = {}) {
    const waId = newWaId();
    const res = await ingest(ctx, 'whatsapp', whatsappPayload({ from: waId, phoneNumberId: WA_OTHER_NUMBER, text: `Order ${hex(3)}?`, ...o }), ws.tenantId);
    expect(res.status).toBe(200);
    return { waId, ticketId: res.body.ticket_id as string };
  }
  const sendsTo = (waId: string) => doubles.sends('whatsapp').filter((s) => s.body.to === waId);

  test('a reply is sent once as a text message to the wa_id, on the phone_number_id the customer wrote to, with the bearer token', async () => {
    const { waId, ticketId } = await waTicket();
    const eventId = await replyOk(ws, ticketId, 'It ships today.');
    const row = await settledIn(ws.tenantId, eventId, ['sent']);
    const sends = sendsTo(waId);
    expect(sends).toHaveLength(1);
    expect(sends[0]!.path).toBe(`/whatsapp/${ctx.config.WHATSAPP_API_VERSION}/${WA_OTHER_NUMBER}/messages`);
    expect(sends[0]!.headers.authorization).toBe(`Bearer ${WA_KEY}`);
    expect(sends[0]!.body).toMatchObject({ messaging_product: 'whatsapp', to: waId, type: 'text', text: { body: 'It ships today.' } });
    expect(row).toMatchObject({ provider_message_id: sends[0]!.providerMessageId, sender: 'whatsapp' });
    expect(row.provider_message_id).toMatch(/^wamid\./);
    const moves = await timeline(ws, ticketId, eventId);
    expect(moves.map((e) => e.meta.state)).toEqual(['queued', 'sent']);
    expect(moves[1]!.meta).toMatchObject({ channel: 'whatsapp', provider_message_id: row.provider_message_id });
    expect((await deliveriesApi(ws, ticketId))[0]).toMatchObject({ state: 'sent', channel: 'whatsapp', provider_message_id: row.provider_message_id });
  });

  test('signed `statuses` webhooks move sent → delivered → read, and a failed status fails another reply with Meta\'s code; both are in the event log', async () => {
    const hook = hookUrl(apiBase, 'whatsapp', token);
    const { ticketId } = await waTicket();
    const eventId = await replyOk(ws, ticketId, 'Here is your tracking link.');
    const wamid = (await settledIn(ws.tenantId, eventId, ['sent'])).provider_message_id!;
    expect((await doubles.whatsappStatus(hook, WA_SECRET, wamid, 'delivered')).status).toBe(200);
    expect((await outboundRow(ws.tenantId, eventId))!.state).toBe('delivered');
    expect((await doubles.whatsappStatus(hook, WA_SECRET, wamid, 'read')).status).toBe(200);
    expect((await outboundRow(ws.tenantId, eventId))!.state).toBe('read');
    expect((await timeline(ws, ticketId, eventId)).map((e) => e.meta.state)).toEqual(['queued', 'sent', 'delivered', 'read']);
    expect(await logged(ws, 'message.delivered', eventId)).toHaveLength(1);

    // A status signed with another secret is refused and moves nothing.
    const second = await replyOk(ws, ticketId, 'And your invoice.');
    const wamid2 = (await settledIn(ws.tenantId, second, ['sent'])).provider_message_id!;
    const forged = await doubles.whatsappStatus(hook, 'not-the-app-secret', wamid2, 'failed', { errors: [{ code: 131026, title: 'Message undeliverable' }] });
    expect(forged.status).toBe(401);
    expect((await outboundRow(ws.tenantId, second))!.state).toBe('sent');

    expect((await doubles.whatsappStatus(hook, WA_SECRET, wamid2, 'failed', { errors: [{ code: 131026, title: 'Message undeliverable' }] })).status).toBe(200);
    const failed = (await outboundRow(ws.tenantId, second))!;
    expect(failed).toMatchObject({ state: 'failed', error_code: '131026' });
    expect(failed.last_error).toMatch(/Message undeliverable/);
    expect((await logged(ws, 'message.delivery_failed', second))[0]!.data.event.meta).toMatchObject({ error_code: '131026' });
  });

  test('Meta refusing the send with re-engagement error 131047 fails the reply with that code, not retried', async () => {
    const { waId, ticketId } = await waTicket();
    doubles.failNext('whatsapp', { kind: 'rejected' });
    const eventId = await replyOk(ws, ticketId, 'Hello again.');
    const row = await settledIn(ws.tenantId, eventId, ['failed']);
    expect(row).toMatchObject({ error_code: '131047', attempts: 1 });
    expect(row.last_error).toMatch(/Re-engagement/);
    await outboundIdle();
    expect(sendsTo(waId)).toHaveLength(1);
    expect((await timeline(ws, ticketId, eventId)).at(-1)!.meta).toMatchObject({ state: 'failed', error_code: '131047' });
    expect(await logged(ws, 'message.delivery_failed', eventId)).toHaveLength(1);
  });

  test('Meta\'s rate limit (code 130429) is retried and then sent once', async () => {
    const { waId, ticketId } = await waTicket();
    doubles.failNext('whatsapp', { kind: 'rate_limited', retryAfterSeconds: 1 });
    const eventId = await replyOk(ws, ticketId, 'One moment.');
    await settledIn(ws.tenantId, eventId, ['sent']);
    expect(sendsTo(waId).map((s) => s.answeredStatus)).toEqual([400, 200]);
    expect((await timeline(ws, ticketId, eventId)).map((e) => e.meta.state)).toEqual(['queued', 'retrying', 'sent']);
  });

  test('more than 24 hours after the customer\'s message (by its WhatsApp timestamp) a free-form reply is 409 whatsapp_window_closed and stores nothing; a template reply is sent as type template', async () => {
    const { waId, ticketId } = await waTicket({ timestamp: Math.floor(Date.now() / 1000) - 25 * 3600 });
    const before = (await ticketDetail(ctx, ws, ticketId)).events.length;
    const res = await reply(ws, ticketId, 'Are you still there?');
    expect(res.status).toBe(409);
    expect(res.body.code).toBe('whatsapp_window_closed');
    expect((await ticketDetail(ctx, ws, ticketId)).events).toHaveLength(before);
    expect(await deliveriesApi(ws, ticketId)).toEqual([]);

    const template = { name: 'order_update', language: 'en_US', components: [{ type: 'body', parameters: [{ type: 'text', text: '1042' }] }] };
    const eventId = await replyOk(ws, ticketId, 'Order update (template)', { template });
    await settledIn(ws.tenantId, eventId, ['sent']);
    const sends = sendsTo(waId);
    expect(sends).toHaveLength(1);
    expect(sends[0]!.body).toMatchObject({ messaging_product: 'whatsapp', to: waId, type: 'template', template: { name: 'order_update', language: { code: 'en_US' }, components: template.components } });
    expect(sends[0]!.body.text).toBeUndefined();
  });

  test('within 24 hours of the customer\'s message a free-form reply is accepted (the window is the message\'s own timestamp)', async () => {
    const { waId, ticketId } = await waTicket({ timestamp: Math.floor(Date.now() / 1000) - 23 * 3600 });
    const eventId = await replyOk(ws, ticketId, 'Still within the window.');
    await settledIn(ws.tenantId, eventId, ['sent']);
    expect(sendsTo(waId)).toHaveLength(1);
  });

  test('a reply longer than 4096 characters is refused with reply_too_long', async () => {
    const { waId, ticketId } = await waTicket();
    const res = await reply(ws, ticketId, 'y'.repeat(4097));
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('reply_too_long');
    expect(await deliveriesApi(ws, ticketId)).toEqual([]);
    await sleep(100);
    expect(sendsTo(waId)).toEqual([]);
  });
});

// ----------------------------------------------------------------------------------------------- Telegram

describe('Telegram Bot API', () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    const conn = await connect(ctx, ws, 'telegram', { config: { bot_token: TG_TOKEN, secret_token: 'tg-secret' } });
    expect(conn).toMatchObject({ sendable: true });
  });

  async function tgTicket() {
    const fromId = (telegramUser += 1);
    const messageId = randomInt(1000, 900_000);
    const res = await ingest(ctx, 'telegram', telegramUpdate({ fromId, messageId, text: `App crashes ${hex(3)}` }), ws.tenantId);
    expect(res.status).toBe(200);
    return { chatId: fromId, messageId, ticketId: res.body.ticket_id as string };
  }
  const sendsTo = (chatId: number) => doubles.sends('telegram').filter((s) => String(s.body.chat_id) === String(chatId));

  test('a reply is sent once to the customer\'s chat as a reply to their message, and is sent with the chat:message id', async () => {
    const { chatId, messageId, ticketId } = await tgTicket();
    const eventId = await replyOk(ws, ticketId, 'Please update the app.');
    const row = await settledIn(ws.tenantId, eventId, ['sent']);
    const sends = sendsTo(chatId);
    expect(sends).toHaveLength(1);
    expect(sends[0]!.path).toBe(`/telegram/bot${TG_TOKEN}/sendMessage`);
    expect(sends[0]!.body).toMatchObject({ text: 'Please update the app.', reply_parameters: { message_id: messageId } });
    expect(row).toMatchObject({ provider_message_id: sends[0]!.providerMessageId, sender: 'telegram' });
    expect(row.provider_message_id).toMatch(new RegExp(`^${chatId}:\\d+$`));
    expect((await timeline(ws, ticketId, eventId)).map((e) => e.meta.state)).toEqual(['queued', 'sent']);
    expect((await deliveriesApi(ws, ticketId))[0]).toMatchObject({ state: 'sent', channel: 'telegram', provider_message_id: row.provider_message_id });
  });

  test('403 "bot was blocked by the user" fails the reply with code 403 and marks the customer\'s Telegram handle unreachable', async () => {
    const { chatId, ticketId } = await tgTicket();
    const t = await ticketDetail(ctx, ws, ticketId);
    const handleOf = () =>
      ctx.db.selectFrom('customer_handles').selectAll().where('tenant_id', '=', ws.tenantId).where('customer_id', '=', t.customer_id).where('kind', '=', 'telegram_user').executeTakeFirstOrThrow();
    expect((await handleOf()).unreachable_at).toBeNull();
    doubles.failNext('telegram', { kind: 'rejected' });
    const eventId = await replyOk(ws, ticketId, 'Hello?');
    const row = await settledIn(ws.tenantId, eventId, ['failed']);
    expect(row).toMatchObject({ error_code: '403', attempts: 1 });
    expect(row.last_error).toMatch(/bot was blocked by the user/);
    const handle = await handleOf();
    expect(handle.unreachable_at).not.toBeNull();
    expect(handle.unreachable_reason).toMatch(/blocked/);
    await outboundIdle();
    expect(sendsTo(chatId)).toHaveLength(1);
    expect(await logged(ws, 'message.delivery_failed', eventId)).toHaveLength(1);
  });

  test('429 with retry_after in the body (no Retry-After header) waits that long, then sends once', async () => {
    const { chatId, ticketId } = await tgTicket();
    doubles.failNext('telegram', { kind: 'rate_limited', retryAfterSeconds: 1, retryAfterHeader: false });
    const eventId = await replyOk(ws, ticketId, 'Just a second.');
    await settledIn(ws.tenantId, eventId, ['sent']);
    const sends = sendsTo(chatId);
    expect(sends.map((s) => s.answeredStatus)).toEqual([429, 200]);
    expect(sends[0]!.headers['retry-after']).toBeUndefined();
    expect(sends[1]!.at - sends[0]!.at).toBeGreaterThanOrEqual(950);
    expect((await timeline(ws, ticketId, eventId)).map((e) => e.meta.state)).toEqual(['queued', 'retrying', 'sent']);
  });

  test('a connection cut after it opened (the request may have left) ends `unknown`, not retried; the agent\'s retry sends it', async () => {
    const { chatId, ticketId } = await tgTicket();
    doubles.failNext('telegram', { kind: 'reset' });
    const eventId = await replyOk(ws, ticketId, 'Did this arrive?');
    const row = await settledIn(ws.tenantId, eventId, ['unknown']);
    expect(row.last_error).toMatch(/connection lost/);
    await sleep(300);
    await ctx.services.outbound.sweep();
    await outboundIdle();
    // The cut request carries no readable body: it is the one Telegram request of this test so far.
    expect(doubles.sends('telegram')).toHaveLength(1);
    expect(doubles.sends('telegram')[0]!.received).toBe(false);
    expect((await timeline(ws, ticketId, eventId)).map((e) => e.meta.state)).toEqual(['queued', 'unknown']);
    expect((await retry(ws, ticketId, eventId)).status).toBe(202);
    await settledIn(ws.tenantId, eventId, ['sent']);
    expect(doubles.sends('telegram')).toHaveLength(2);
    expect(sendsTo(chatId)).toHaveLength(1);
  });
});

// --------------------------------------------------------------------------------------- email (Postmark)

describe('email through Postmark (no mailbox connected)', () => {
  let ws: Workspace;
  let token: string;
  const HOOK_USER = 'postmark';
  const HOOK_PASS = 'hook-password-0001';
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    const conn = await connect(ctx, ws, 'email', {
      config: { inbound_address: 'support@acme.test', server_token: PM_TOKEN, from_address: FROM_ADDRESS, webhook_username: HOOK_USER, webhook_password: HOOK_PASS },
    });
    expect(conn).toMatchObject({ sendable: true });
    token = conn.details.inbound_token!;
  });

  async function emailTicket() {
    const customer = `cust.${hex(4)}@customer.test`;
    const messageId = newEmailMessageId();
    const res = await ingest(ctx, 'email', emailPayload({ from: customer, messageId, subject: 'Where is my order?' }), ws.tenantId);
    expect(res.status).toBe(200);
    return { customer, messageId, ticketId: res.body.ticket_id as string };
  }
  const sendsTo = (customer: string) => doubles.sends('postmark').filter((s) => String(s.body.To).includes(customer));
  const header = (s: RecordedSend, name: string) => (s.body.Headers as { Name: string; Value: string }[]).find((h) => h.Name === name)?.Value;

  test('a reply is sent once to the customer\'s address, threaded under their Message-ID (In-Reply-To, References) with our own Message-ID', async () => {
    const { customer, messageId, ticketId } = await emailTicket();
    const eventId = await replyOk(ws, ticketId, 'Your order ships Monday.');
    const row = await settledIn(ws.tenantId, eventId, ['sent']);
    const sends = sendsTo(customer);
    expect(sends).toHaveLength(1);
    const s = sends[0]!;
    expect(s.path).toBe('/postmark/email');
    expect(s.headers['x-postmark-server-token']).toBe(PM_TOKEN);
    expect(s.body).toMatchObject({ From: FROM_ADDRESS, To: customer, Subject: 'Re: Where is my order?', TextBody: 'Your order ships Monday.' });
    expect(header(s, 'In-Reply-To')).toBe(`<${messageId}>`);
    expect(header(s, 'References')).toContain(`<${messageId}>`);
    expect(header(s, 'Message-ID')).toBe(`<${eventId}@acme.test>`);
    expect(row).toMatchObject({ provider_message_id: s.providerMessageId, message_id: `${eventId}@acme.test`, sender: 'postmark' });
    expect((await timeline(ws, ticketId, eventId)).map((e) => e.meta.state)).toEqual(['queued', 'sent']);
    expect((await deliveriesApi(ws, ticketId))[0]).toMatchObject({ state: 'sent', channel: 'email', sender: 'postmark', provider_message_id: s.providerMessageId });

    // The customer's answer to our reply threads back into the ticket by our Message-ID.
    const answer = await ingest(ctx, 'email', emailPayload({ from: customer, inReplyTo: `${eventId}@acme.test`, references: [messageId, `${eventId}@acme.test`], subject: 'Re: Where is my order?' }), ws.tenantId);
    expect(answer.body.ticket_id).toBe(ticketId);
  });

  test('Postmark\'s Delivery webhook (basic auth) moves the reply to delivered and logs message.delivered; a Bounce fails another with its type', async () => {
    const hook = hookUrl(apiBase, 'email', token);
    const { ticketId } = await emailTicket();
    const eventId = await replyOk(ws, ticketId, 'First answer.');
    const pmId = (await settledIn(ws.tenantId, eventId, ['sent'])).provider_message_id!;

    // Without the hook's credentials: refused, nothing moves.
    expect((await doubles.postmarkDelivery(hook, pmId, 'Delivery', { basicAuth: `${HOOK_USER}:wrong` })).status).toBe(401);
    expect((await outboundRow(ws.tenantId, eventId))!.state).toBe('sent');

    expect((await doubles.postmarkDelivery(hook, pmId, 'Delivery', { basicAuth: `${HOOK_USER}:${HOOK_PASS}` })).status).toBe(200);
    expect(await outboundRow(ws.tenantId, eventId)).toMatchObject({ state: 'delivered' });
    expect((await timeline(ws, ticketId, eventId)).map((e) => e.meta.state)).toEqual(['queued', 'sent', 'delivered']);
    expect(await logged(ws, 'message.delivered', eventId)).toHaveLength(1);

    const second = await replyOk(ws, ticketId, 'Second answer.');
    const pmId2 = (await settledIn(ws.tenantId, second, ['sent'])).provider_message_id!;
    expect((await doubles.postmarkDelivery(hook, pmId2, 'Bounce', { basicAuth: `${HOOK_USER}:${HOOK_PASS}` })).status).toBe(200);
    const bounced = (await outboundRow(ws.tenantId, second))!;
    expect(bounced).toMatchObject({ state: 'failed', error_code: 'HardBounce' });
    expect(bounced.last_error).toMatch(/unable to deliver/);
    expect((await logged(ws, 'message.delivery_failed', second))[0]!.data.event.meta).toMatchObject({ state: 'failed', error_code: 'HardBounce' });
  });

  test('Postmark refusing an inactive recipient (422, ErrorCode 406) fails the reply with code 406, not retried', async () => {
    const { customer, ticketId } = await emailTicket();
    doubles.failNext('postmark', { kind: 'rejected' });
    const eventId = await replyOk(ws, ticketId, 'Hello?');
    const row = await settledIn(ws.tenantId, eventId, ['failed']);
    expect(row).toMatchObject({ error_code: '406', attempts: 1 });
    expect(row.last_error).toMatch(/inactive/);
    await outboundIdle();
    expect(sendsTo(customer)).toHaveLength(1);
    expect(await logged(ws, 'message.delivery_failed', eventId)).toHaveLength(1);
  });

  test('a Postmark 500 is retried with backoff and then sent once', async () => {
    const { customer, ticketId } = await emailTicket();
    doubles.failNext('postmark', { kind: 'server_error' });
    const eventId = await replyOk(ws, ticketId, 'Retry me.');
    await settledIn(ws.tenantId, eventId, ['sent']);
    expect(sendsTo(customer).map((s) => s.answeredStatus)).toEqual([500, 200]);
    expect((await timeline(ws, ticketId, eventId)).map((e) => e.meta.state)).toEqual(['queued', 'retrying', 'sent']);
  });
});
