/**
 * Providers post straight to the service (issue 33, DESIGN.md §7): `POST /v1/hooks/{channel}/{inbound_token}`
 * takes each provider's documented example body (test/fixtures/, sources in each folder's SOURCES.md and in
 * test/fixtures/hooks/README.md) exactly as the provider sends it, signed at run time by this test with the
 * provider's scheme: Twilio's X-Twilio-Signature over the URL (PUBLIC_BASE_URL when set, else the request's own)
 * and the sorted form fields, Meta's X-Hub-Signature-256 over the raw bytes, Telegram's secret-token header and
 * Postmark's basic auth. A request that fails its check is 401 and writes nothing; delivery status callbacks
 * arrive on the same URL; Meta's subscription handshake is answered on GET.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { startTestApp, type TestContext } from './helpers/context';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { connect, countRows, ticketDetail } from './helpers/ingest';
import { metaSignature, startProviderDoubles, twilioSignature, type ProviderDoubles } from './helpers/provider-doubles';
import { eventually } from './helpers/wait';

const FIXTURES = path.join(__dirname, 'fixtures');
/** A fixture file's exact bytes, as the provider's documentation gives them. */
const rawFixture = (file: string) => readFileSync(path.join(FIXTURES, file), 'utf8');
/** A fixture as an object, without the `_source` note the hooks/ files carry. */
function fixture<T = Record<string, any>>(file: string): T {
  const { _source, ...body } = JSON.parse(rawFixture(file)) as Record<string, unknown>;
  return body as T;
}

const AC = `AC${'7d'.repeat(16)}`;
const TWILIO_TOKEN = 'twilio-hooks-auth-token-0001';
const WA_NUMBER = '106540352242922';
const WA_KEY = 'EAAG-hooks-system-user-token';
const WA_SECRET = 'meta-app-secret-hooks';
const WA_VERIFY = 'meta-verify-token-hooks';
const TG_TOKEN = '555555555:AAHooksBotTokenForTheDouble0001';
const TG_SECRET = 'tg_hooks_secret-0001';
const PM_TOKEN = 'pm-server-token-hooks-0001';
const PM_USER = 'postmark-hooks';
const PM_PASS = 'postmark-hooks-password';
const PUBLIC_BASE = 'https://help.example.test';

let doubles: ProviderDoubles;
/** PUBLIC_BASE_URL unset: signatures covering the URL are checked against the request's own. */
let ctx: TestContext;
/** PUBLIC_BASE_URL set (the service behind a proxy): signatures are checked against it. */
let pub: TestContext;

const providerEnv = () => ({
  POSTMARK_API_URL: doubles.urls.postmark,
  TWILIO_API_URL: doubles.urls.twilio,
  WHATSAPP_API_URL: doubles.urls.whatsapp,
  TELEGRAM_API_URL: doubles.urls.telegram,
  OUTBOUND_RETRY_BASE_MS: '50',
});

beforeAll(async () => {
  doubles = await startProviderDoubles();
  doubles.addTwilioAccount(AC, TWILIO_TOKEN);
  doubles.addWhatsappNumber(WA_NUMBER, WA_KEY);
  doubles.addTelegramBot(TG_TOKEN);
  doubles.addPostmarkServer(PM_TOKEN);
  [ctx, pub] = await Promise.all([startTestApp({ env: providerEnv() }), startTestApp({ env: { ...providerEnv(), PUBLIC_BASE_URL: PUBLIC_BASE } })]);
  await Promise.all([ctx.startWorkers(), pub.startWorkers()]);
});
afterAll(async () => {
  await Promise.all([ctx?.close(), pub?.close()]);
  await doubles?.close();
});

// ------------------------------------------------------------------------------------------------ helpers

const ownUrl = (c: TestContext, p: string) => `http://127.0.0.1:${(c.server.address() as AddressInfo).port}${p}`;
const hookPath = (channel: string, token: string) => `/v1/hooks/${channel}/${token}`;

async function workspaceWith(c: TestContext, channel: string, config: Record<string, unknown>): Promise<{ ws: Workspace; token: string }> {
  const ws = await createWorkspace(c);
  const conn = await connect(c, ws, channel, { config });
  return { ws, token: conn.details.inbound_token! };
}
const SMS_CONFIG = { account_sid: AC, auth_token: TWILIO_TOKEN, phone_number: '+15558675310' };
const WA_CONFIG = { phone_number_id: WA_NUMBER, api_key: WA_KEY, app_secret: WA_SECRET, verify_token: WA_VERIFY };
const TG_CONFIG = { bot_token: TG_TOKEN, secret_token: TG_SECRET };

/** A Twilio form post, signed over `signedUrl` with `authToken` unless a signature is given. */
function postTwilio(c: TestContext, p: string, fields: Record<string, string>, o: { signedUrl?: string; authToken?: string; signature?: string | null } = {}) {
  const req = c.http.post(p).set('content-type', 'application/x-www-form-urlencoded');
  const signature = o.signature === undefined ? twilioSignature(o.authToken ?? TWILIO_TOKEN, o.signedUrl ?? ownUrl(c, p), fields) : o.signature;
  if (signature !== null) req.set('x-twilio-signature', signature);
  return req.send(new URLSearchParams(fields).toString());
}

/** Raw JSON bytes, as the provider sends them, with the given headers. */
const postRaw = (c: TestContext, p: string, raw: string, headers: Record<string, string> = {}) => c.http.post(p).set({ 'content-type': 'application/json', ...headers }).send(raw);

const nothingWritten = { tickets: 0, ticket_events: 0, customers: 0, customer_handles: 0, email_message_ids: 0, ingest_deliveries: 0, duplicate_total: 0 };

async function onlyTicket(c: TestContext, ws: Workspace) {
  const tickets = await c.db.selectFrom('tickets').selectAll().where('tenant_id', '=', ws.tenantId).execute();
  expect(tickets).toHaveLength(1);
  return ticketDetail(c, ws, tickets[0]!.id);
}

async function replySent(c: TestContext, ws: Workspace, ticketId: string, body: Record<string, unknown>) {
  const res = await c.http.post(`/v1/tickets/${ticketId}/replies`).set(bearer(ws.ownerKey)).send(body);
  expect(res.status).toBe(201);
  const eventId = (res.body.new_events as { id: string; kind: string }[]).find((e) => e.kind === 'reply')!.id;
  return eventually(
    async () => {
      const row = await c.db.selectFrom('outbound_messages').selectAll().where('tenant_id', '=', ws.tenantId).where('event_id', '=', eventId).executeTakeFirst();
      return row?.state === 'sent' ? row : undefined;
    },
    10_000,
    'the reply to be sent',
    25,
  );
}
const stateOf = async (c: TestContext, tenantId: string, eventId: string) =>
  (await c.db.selectFrom('outbound_messages').select(['state', 'error_code']).where('tenant_id', '=', tenantId).where('event_id', '=', eventId).executeTakeFirstOrThrow());

// ------------------------------------------------------------------------------------------------- Twilio

describe('Twilio (sms): form posts with X-Twilio-Signature', () => {
  const inbound = fixture<Record<string, string>>('twilio/sms-inbound.json');

  test('the documented inbound SMS, signed over the request\'s own URL, is answered with empty TwiML and becomes a ticket', async () => {
    const { ws, token } = await workspaceWith(ctx, 'sms', SMS_CONFIG);
    const res = await postTwilio(ctx, hookPath('sms', token), inbound);
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/xml/);
    expect(res.text).toMatch(/^(<\?xml[^>]*\?>)?<Response><\/Response>$/);
    const t = await onlyTicket(ctx, ws);
    expect(t.source).toBe('sms');
    expect(t.events.find((e) => e.kind === 'inbound_sms')?.body).toBe(inbound.Body);
    const ledger = await ctx.db.selectFrom('ingest_deliveries').selectAll().where('tenant_id', '=', ws.tenantId).execute();
    expect(ledger.map((r) => r.provider_message_id)).toEqual([inbound.MessageSid]);
  });

  test('a wrong, missing or other-token signature is 401 hook_signature_invalid and writes nothing', async () => {
    const { ws, token } = await workspaceWith(ctx, 'sms', SMS_CONFIG);
    const p = hookPath('sms', token);
    const attempts = [
      await postTwilio(ctx, p, inbound, { signature: null }),
      await postTwilio(ctx, p, inbound, { signature: 'AAAAAAAAAAAAAAAAAAAAAAAAAAA=' }),
      await postTwilio(ctx, p, inbound, { authToken: 'another-accounts-token' }),
      // Signed, then a field changed on the way.
      await postTwilio(ctx, p, { ...inbound, Body: 'Tampered' }, { signature: twilioSignature(TWILIO_TOKEN, ownUrl(ctx, p), inbound) }),
      // Signed for another URL (what PUBLIC_BASE_URL would say, but it is not set here).
      await postTwilio(ctx, p, inbound, { signedUrl: `${PUBLIC_BASE}${p}` }),
    ];
    for (const res of attempts) {
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('hook_signature_invalid');
    }
    expect(await countRows(ctx, ws.tenantId)).toEqual(nothingWritten);
  });

  test('with PUBLIC_BASE_URL set the signature is checked over it, not over the URL the request reached', async () => {
    const { ws, token } = await workspaceWith(pub, 'sms', SMS_CONFIG);
    const p = hookPath('sms', token);
    const own = await postTwilio(pub, p, inbound, { signedUrl: ownUrl(pub, p) });
    expect(own.status).toBe(401);
    expect(own.body.code).toBe('hook_signature_invalid');
    expect(await countRows(pub, ws.tenantId)).toEqual(nothingWritten);

    const res = await postTwilio(pub, p, inbound, { signedUrl: `${PUBLIC_BASE}${p}` });
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/<Response><\/Response>/);
    expect((await onlyTicket(pub, ws)).source).toBe('sms');
  });

  test('the same inbound SMS posted again (Twilio retrying) is a duplicate: one ticket, one event, the ledger counts the repeat', async () => {
    const { ws, token } = await workspaceWith(ctx, 'sms', SMS_CONFIG);
    for (let i = 0; i < 3; i++) expect((await postTwilio(ctx, hookPath('sms', token), inbound)).status).toBe(200);
    const t = await onlyTicket(ctx, ws);
    expect(t.events.filter((e) => e.kind === 'inbound_sms')).toHaveLength(1);
    const ledger = await ctx.db.selectFrom('ingest_deliveries').selectAll().where('tenant_id', '=', ws.tenantId).execute();
    expect(ledger).toHaveLength(1);
    expect(ledger[0]!.duplicate_count).toBe(2);
  });

  test('the documented status callback, signed, on the same URL moves our reply to delivered; unsigned it moves nothing', async () => {
    const { ws, token } = await workspaceWith(ctx, 'sms', SMS_CONFIG);
    const p = hookPath('sms', token);
    expect((await postTwilio(ctx, p, inbound)).status).toBe(200);
    const t = await onlyTicket(ctx, ws);
    const row = await replySent(ctx, ws, t.id, { body: 'Ahoy! Your order ships today.' });
    const callback = { ...fixture<Record<string, string>>('twilio/status-callback-delivered.json'), MessageSid: row.provider_message_id!, SmsSid: row.provider_message_id! };

    const unsigned = await postTwilio(ctx, p, callback, { signature: null });
    expect(unsigned.status).toBe(401);
    expect(await stateOf(ctx, ws.tenantId, row.event_id)).toMatchObject({ state: 'sent' });

    const res = await postTwilio(ctx, p, callback);
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/<Response><\/Response>/);
    expect(await stateOf(ctx, ws.tenantId, row.event_id)).toMatchObject({ state: 'delivered' });
    // A callback is not a customer message: still one ticket, one inbound event.
    expect((await countRows(ctx, ws.tenantId)).tickets).toBe(1);
  });
});

// ----------------------------------------------------------------------------------------------- WhatsApp

describe('WhatsApp (Meta): JSON with X-Hub-Signature-256', () => {
  const raw = rawFixture('whatsapp/text.json');

  test('the documented text message, its exact bytes signed with the app secret, becomes a ticket', async () => {
    const { ws, token } = await workspaceWith(ctx, 'whatsapp', WA_CONFIG);
    const res = await postRaw(ctx, hookPath('whatsapp', token), raw, { 'x-hub-signature-256': metaSignature(WA_SECRET, raw) });
    expect(res.status).toBe(200);
    const t = await onlyTicket(ctx, ws);
    expect(res.body).toMatchObject({ status: 'ok', ticket_id: t.id });
    expect(t.source).toBe('whatsapp');
    expect(t.customer_name).toBe('Sheena Nelson');
    expect(t.events.find((e) => e.kind === 'inbound_whatsapp')?.body).toBe('Does it come in another color?');
  });

  test('a wrong or missing X-Hub-Signature-256, or a body changed after signing, is 401 and writes nothing', async () => {
    const { ws, token } = await workspaceWith(ctx, 'whatsapp', WA_CONFIG);
    const p = hookPath('whatsapp', token);
    const attempts = [
      await postRaw(ctx, p, raw),
      await postRaw(ctx, p, raw, { 'x-hub-signature-256': metaSignature('another-app-secret', raw) }),
      await postRaw(ctx, p, raw, { 'x-hub-signature-256': 'sha256=' }),
      // Re-serialised JSON is other bytes: Meta's signature covers the raw body.
      await postRaw(ctx, p, JSON.stringify(JSON.parse(raw)), { 'x-hub-signature-256': metaSignature(WA_SECRET, raw) }),
    ];
    for (const res of attempts) {
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('hook_signature_invalid');
    }
    expect(await countRows(ctx, ws.tenantId)).toEqual(nothingWritten);
  });

  test('the documented message posted twice (Meta retrying) is one ticket with one message', async () => {
    const { ws, token } = await workspaceWith(ctx, 'whatsapp', WA_CONFIG);
    for (let i = 0; i < 2; i++) expect((await postRaw(ctx, hookPath('whatsapp', token), raw, { 'x-hub-signature-256': metaSignature(WA_SECRET, raw) })).status).toBe(200);
    const t = await onlyTicket(ctx, ws);
    expect(t.events.filter((e) => e.kind === 'inbound_whatsapp')).toHaveLength(1);
    expect(await countRows(ctx, ws.tenantId)).toMatchObject({ ingest_deliveries: 1, duplicate_total: 1 });
  });

  test('the documented `statuses` receipt, signed, on the same URL moves our template reply to delivered', async () => {
    const { ws, token } = await workspaceWith(ctx, 'whatsapp', WA_CONFIG);
    const p = hookPath('whatsapp', token);
    expect((await postRaw(ctx, p, raw, { 'x-hub-signature-256': metaSignature(WA_SECRET, raw) })).status).toBe(200);
    const t = await onlyTicket(ctx, ws);
    // The documented message is from 2025: the 24-hour window is long closed, only a template goes.
    const row = await replySent(ctx, ws, t.id, { body: 'Colours: see our catalogue', template: { name: 'catalogue_link', language: 'en_US' } });
    const receipt = rawFixture('whatsapp/status-delivered.json').replace('wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI3MTE5MjVBOTE3MDk5QUVFM0YA', row.provider_message_id!);
    const res = await postRaw(ctx, p, receipt, { 'x-hub-signature-256': metaSignature(WA_SECRET, receipt) });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'ok', statuses_applied: 1 });
    expect(await stateOf(ctx, ws.tenantId, row.event_id)).toMatchObject({ state: 'delivered' });
  });

  test('Meta\'s subscription handshake: the right verify_token gets the challenge as text/plain; a wrong one, or another mode, is 401', async () => {
    const { token } = await workspaceWith(ctx, 'whatsapp', WA_CONFIG);
    const p = hookPath('whatsapp', token);
    const ok = await ctx.http.get(p).query({ 'hub.mode': 'subscribe', 'hub.verify_token': WA_VERIFY, 'hub.challenge': '1158201444' });
    expect(ok.status).toBe(200);
    expect(ok.headers['content-type']).toMatch(/^text\/plain/);
    expect(ok.text).toBe('1158201444');
    for (const q of [
      { 'hub.mode': 'subscribe', 'hub.verify_token': 'not-it', 'hub.challenge': '1' },
      { 'hub.mode': 'subscribe', 'hub.challenge': '1' },
      { 'hub.mode': 'unsubscribe', 'hub.verify_token': WA_VERIFY, 'hub.challenge': '1' },
    ]) {
      const res = await ctx.http.get(p).query(q);
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('hook_signature_invalid');
    }
  });
});

// ----------------------------------------------------------------------------------------------- Telegram

describe('Telegram: updates with X-Telegram-Bot-Api-Secret-Token', () => {
  const raw = rawFixture('telegram/message-text.json');

  test('the documented update with the secret token becomes a ticket; the same update again is a duplicate', async () => {
    const { ws, token } = await workspaceWith(ctx, 'telegram', TG_CONFIG);
    for (let i = 0; i < 2; i++) expect((await postRaw(ctx, hookPath('telegram', token), raw, { 'x-telegram-bot-api-secret-token': TG_SECRET })).status).toBe(200);
    const t = await onlyTicket(ctx, ws);
    expect(t.source).toBe('telegram');
    expect(t.events.filter((e) => e.kind === 'inbound_telegram')).toHaveLength(1);
    expect(await countRows(ctx, ws.tenantId)).toMatchObject({ ingest_deliveries: 1, duplicate_total: 1 });
  });

  test('a wrong or missing secret token is 401 and writes nothing', async () => {
    const { ws, token } = await workspaceWith(ctx, 'telegram', TG_CONFIG);
    const p = hookPath('telegram', token);
    for (const headers of [{} as Record<string, string>, { 'x-telegram-bot-api-secret-token': 'not-the-secret' }, { 'x-telegram-bot-api-secret-token': `${TG_SECRET}x` }]) {
      const res = await postRaw(ctx, p, raw, headers);
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('hook_signature_invalid');
    }
    expect(await countRows(ctx, ws.tenantId)).toEqual(nothingWritten);
  });

  test('the reply to the documented update goes to its chat, as a reply to its message', async () => {
    const { ws, token } = await workspaceWith(ctx, 'telegram', TG_CONFIG);
    expect((await postRaw(ctx, hookPath('telegram', token), raw, { 'x-telegram-bot-api-secret-token': TG_SECRET })).status).toBe(200);
    const t = await onlyTicket(ctx, ws);
    const before = doubles.sends('telegram').length;
    await replySent(ctx, ws, t.id, { body: 'Welcome! How can we help?' });
    const sends = doubles.sends('telegram').slice(before);
    expect(sends).toHaveLength(1);
    expect(String(sends[0]!.body.chat_id)).toBe('1111111');
    expect(sends[0]!.body).toMatchObject({ reply_parameters: { message_id: 1365 } });
  });
});

// ----------------------------------------------------------------------------------------------- Postmark

describe('Postmark (email): inbound, Delivery and Bounce JSON, with basic auth', () => {
  const raw = rawFixture('postmark/inbound-webhook.json');
  const auth = (user: string, pass: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}` });
  const EMAIL_CONFIG = { inbound_address: 'support@acme.test', server_token: PM_TOKEN, from_address: 'support@acme.test', webhook_username: PM_USER, webhook_password: PM_PASS };

  test('the documented inbound email with the hook\'s basic auth becomes a ticket; without it, or with the wrong password, 401 and nothing written', async () => {
    const { ws, token } = await workspaceWith(ctx, 'email', EMAIL_CONFIG);
    const p = hookPath('email', token);
    for (const headers of [{}, auth(PM_USER, 'wrong'), auth('someone', PM_PASS)]) {
      const res = await postRaw(ctx, p, raw, headers);
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('hook_signature_invalid');
    }
    expect(await countRows(ctx, ws.tenantId)).toEqual(nothingWritten);

    const res = await postRaw(ctx, p, raw, auth(PM_USER, PM_PASS));
    expect(res.status).toBe(200);
    const t = await onlyTicket(ctx, ws);
    expect(res.body).toMatchObject({ status: 'ok', ticket_id: t.id });
    expect(t).toMatchObject({ source: 'email', subject: 'Test subject', customer_email: 'support@postmarkapp.com' });
    // Postmark retrying the same inbound message: a duplicate.
    expect((await postRaw(ctx, p, raw, auth(PM_USER, PM_PASS))).status).toBe(200);
    expect(await countRows(ctx, ws.tenantId)).toMatchObject({ tickets: 1, ingest_deliveries: 1, duplicate_total: 1 });
  });

  test('without webhook credentials on the connection the URL\'s token alone admits the inbound email', async () => {
    const { ws, token } = await workspaceWith(ctx, 'email', { inbound_address: 'support@acme.test' });
    expect((await postRaw(ctx, hookPath('email', token), raw)).status).toBe(200);
    expect((await onlyTicket(ctx, ws)).source).toBe('email');
  });

  test('the documented Delivery and Bounce webhooks on the same URL move our replies to delivered and failed (HardBounce)', async () => {
    const { ws, token } = await workspaceWith(ctx, 'email', EMAIL_CONFIG);
    const p = hookPath('email', token);
    expect((await postRaw(ctx, p, raw, auth(PM_USER, PM_PASS))).status).toBe(200);
    const t = await onlyTicket(ctx, ws);
    const first = await replySent(ctx, ws, t.id, { body: 'Thanks for the test message.' });
    const second = await replySent(ctx, ws, t.id, { body: 'And another.' });
    const delivery = JSON.stringify({ ...fixture('hooks/postmark-delivery.json'), MessageID: first.provider_message_id });
    const bounce = JSON.stringify({ ...fixture('hooks/postmark-bounce.json'), MessageID: second.provider_message_id });

    expect((await postRaw(ctx, p, delivery)).status).toBe(401);
    expect(await stateOf(ctx, ws.tenantId, first.event_id)).toMatchObject({ state: 'sent' });

    const d = await postRaw(ctx, p, delivery, auth(PM_USER, PM_PASS));
    expect(d.status).toBe(200);
    expect(d.body).toMatchObject({ status: 'ok', statuses_applied: 1 });
    expect(await stateOf(ctx, ws.tenantId, first.event_id)).toMatchObject({ state: 'delivered' });
    expect((await postRaw(ctx, p, bounce, auth(PM_USER, PM_PASS))).status).toBe(200);
    expect(await stateOf(ctx, ws.tenantId, second.event_id)).toMatchObject({ state: 'failed', error_code: 'HardBounce' });
    // Neither record is a customer message.
    expect(await countRows(ctx, ws.tenantId)).toMatchObject({ tickets: 1, ingest_deliveries: 1 });
  });
});

// ------------------------------------------------------------------------------------------------ routing

describe('which connection a hook URL names', () => {
  test('an unknown token, another channel\'s token, or a channel without a native hook is 404 and writes nothing', async () => {
    const { ws, token } = await workspaceWith(ctx, 'sms', SMS_CONFIG);
    const inbound = fixture<Record<string, string>>('twilio/sms-inbound.json');
    const unknown = await postTwilio(ctx, hookPath('sms', 'itk_this-token-was-never-issued'), inbound);
    expect(unknown.status).toBe(404);
    // The SMS connection's token on the Telegram hook: that token names no Telegram connection.
    const crossed = await postRaw(ctx, hookPath('telegram', token), rawFixture('telegram/message-text.json'), { 'x-telegram-bot-api-secret-token': TG_SECRET });
    expect(crossed.status).toBe(404);
    const noHook = await postRaw(ctx, hookPath('facebook', token), '{}');
    expect(noHook.status).toBe(404);
    // The handshake exists for WhatsApp only.
    expect((await ctx.http.get(hookPath('sms', token)).query({ 'hub.mode': 'subscribe', 'hub.verify_token': 'x', 'hub.challenge': '1' })).status).toBe(404);
    expect(await countRows(ctx, ws.tenantId)).toEqual(nothingWritten);
  });

  test('a connection without the secret its provider signs with refuses every request (401), rather than accepting unsigned ones', async () => {
    const { ws, token } = await workspaceWith(ctx, 'telegram', { bot_token: TG_TOKEN });
    const res = await postRaw(ctx, hookPath('telegram', token), rawFixture('telegram/message-text.json'), { 'x-telegram-bot-api-secret-token': '' });
    expect(res.status).toBe(401);
    expect(res.body.detail).toMatch(/secret_token/);
    expect(await countRows(ctx, ws.tenantId)).toEqual(nothingWritten);
  });
});
