import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  metaSignature,
  smsSegments,
  startProviderDoubles,
  twilioSignature,
  type Provider,
  type ProviderDoubles,
} from './helpers/provider-doubles';

/** The provider doubles themselves, driven with plain fetch the way the service's senders will drive the providers. */

const AC = `AC${'a1'.repeat(16)}`;
const TWILIO_TOKEN = 'twilio-auth-token-0123456789abcdef';
const PM_TOKEN = 'f0e1d2c3-0000-4000-8000-postmarktoken';
const WA_NUMBER = '106540352242922';
const WA_TOKEN = 'EAAG-double-system-user-token';
const TG_TOKEN = '123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1';

let doubles: ProviderDoubles;
let receiver: Server;
let hookBase: string;
const hits: { path: string; headers: IncomingHttpHeaders; raw: string }[] = [];

beforeAll(async () => {
  doubles = await startProviderDoubles();
  doubles.addTwilioAccount(AC, TWILIO_TOKEN);
  doubles.addPostmarkServer(PM_TOKEN);
  doubles.addWhatsappNumber(WA_NUMBER, WA_TOKEN);
  doubles.addWhatsappNumber('200000000000001', 'EAAG-other-number-token');
  doubles.addTelegramBot(TG_TOKEN);
  receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      hits.push({ path: req.url ?? '', headers: req.headers, raw: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  hookBase = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await doubles.close();
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
});
beforeEach(() => {
  doubles.reset();
  hits.length = 0;
});

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, any>;
}

async function call(url: string, init: RequestInit): Promise<Answer> {
  const res = await fetch(url, { method: 'POST', ...init });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, any> };
}

const basic = (user: string, pass: string) => `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
const json = (body: unknown, headers: Record<string, string> = {}): RequestInit => ({ headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });

const postmark = (body: unknown, token = PM_TOKEN) => call(`${doubles.urls.postmark}/email`, json(body, { 'x-postmark-server-token': token, accept: 'application/json' }));
const email = { From: 'support@acme.test', To: 'Ann <ann@example.com>', Subject: 'Re: Order', TextBody: 'Hello', Tag: 'reply', Metadata: { ticket: 't1' } };

function twilio(fields: [string, string][], auth = basic(AC, TWILIO_TOKEN), account = AC) {
  return call(`${doubles.urls.twilio}/2010-04-01/Accounts/${account}/Messages.json`, {
    headers: { authorization: auth, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
}
const sms = (body: string): [string, string][] => [['To', '+14155550123'], ['From', '+15017122661'], ['Body', body]];

const whatsapp = (body: unknown, token = WA_TOKEN, number = WA_NUMBER) =>
  call(`${doubles.urls.whatsapp}/v21.0/${number}/messages`, json(body, { authorization: `Bearer ${token}` }));
const waText = (text: string) => ({ messaging_product: 'whatsapp', recipient_type: 'individual', to: '+1 650-555-1234', type: 'text', text: { body: text } });

const telegram = (body: unknown, token = TG_TOKEN) => call(`${doubles.urls.telegram}/bot${token}/sendMessage`, json(body));

/** One accepted send per provider, so failure scripts can be checked uniformly. */
const sendOne: Record<Provider, () => Promise<Answer>> = {
  postmark: () => postmark(email),
  twilio: () => twilio(sms('Hi')),
  whatsapp: () => whatsapp(waText('Hi')),
  telegram: () => telegram({ chat_id: 1111111, text: 'Hi' }),
};
const PROVIDERS: Provider[] = ['postmark', 'twilio', 'whatsapp', 'telegram'];

describe('successful sends answer like the providers', () => {
  test('Postmark /email: 200 {To, SubmittedAt, MessageID, ErrorCode 0, Message OK}, recorded with its headers', async () => {
    const res = await postmark(email);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ To: email.To, SubmittedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/), MessageID: expect.stringMatching(/^[0-9a-f-]{36}$/), ErrorCode: 0, Message: 'OK' });
    const [sent] = doubles.sends('postmark');
    expect(sent).toMatchObject({ method: 'POST', path: '/postmark/email', answeredStatus: 200, received: true, providerMessageId: res.body.MessageID, body: email });
    expect(sent!.headers['x-postmark-server-token']).toBe(PM_TOKEN);
  });

  test('Twilio Messages.json: 201 with the Message resource; repeated MediaUrl recorded as an array', async () => {
    const res = await twilio([...sms('Ahoy'), ['StatusCallback', `${hookBase}/twilio/status?x=1`], ['MediaUrl', 'https://a.test/1.png'], ['MediaUrl', 'https://a.test/2.png']]);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      sid: expect.stringMatching(/^MM[0-9a-f]{32}$/),
      account_sid: AC,
      status: 'queued',
      num_segments: '1',
      num_media: '2',
      to: '+14155550123',
      from: '+15017122661',
      body: 'Ahoy',
      direction: 'outbound-api',
      api_version: '2010-04-01',
      error_code: null,
      error_message: null,
      date_created: expect.stringMatching(/^\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d \+0000$/),
      uri: `/2010-04-01/Accounts/${AC}/Messages/${res.body.sid}.json`,
    });
    expect(doubles.sends('twilio')[0]!.body.MediaUrl).toEqual(['https://a.test/1.png', 'https://a.test/2.png']);
    const viaService = await twilio([['To', '+14155550123'], ['MessagingServiceSid', `MG${'0'.repeat(32)}`], ['Body', 'Hi']]);
    expect(viaService.body).toMatchObject({ sid: expect.stringMatching(/^SM/), status: 'accepted', num_segments: '0', from: null });
  });

  test('WhatsApp /{version}/{phone-number-id}/messages: contacts[{input, wa_id}] and messages[{id: wamid…}], text or template', async () => {
    const res = await whatsapp(waText('Hello'));
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ messaging_product: 'whatsapp', contacts: [{ input: '+1 650-555-1234', wa_id: '16505551234' }], messages: [{ id: expect.stringMatching(/^wamid\.[A-Za-z0-9+/=]+$/) }] });
    const template = { messaging_product: 'whatsapp', to: '16505551234', type: 'template', template: { name: 'ticket_update', language: { code: 'en_US' } } };
    expect((await whatsapp(template)).status).toBe(200);
    expect(doubles.sends('whatsapp').map((s) => s.providerMessageId)).toEqual([res.body.messages[0].id, expect.stringMatching(/^wamid\./)]);
  });

  test('Telegram sendMessage (JSON or form): {ok: true, result: Message}, message_id counting per chat', async () => {
    const first = await telegram({ chat_id: 1111111, text: 'One', reply_parameters: { message_id: 1365 } });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({
      ok: true,
      result: { message_id: 1, from: { id: 123456789, is_bot: true, first_name: expect.any(String), username: expect.any(String) }, chat: { id: 1111111, first_name: expect.any(String), type: 'private' }, date: expect.any(Number), text: 'One' },
    });
    const form = await call(`${doubles.urls.telegram}/bot${TG_TOKEN}/sendMessage`, {
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ chat_id: '1111111', text: 'Two', reply_parameters: '{"message_id":1366}' }).toString(),
    });
    expect(form.body.result.message_id).toBe(2);
    expect((await telegram({ chat_id: -4000000001, text: 'Group' })).body.result).toMatchObject({ message_id: 1, chat: { id: -4000000001, type: 'group' } });
    expect(doubles.sends('telegram')[1]!.body).toEqual({ chat_id: '1111111', text: 'Two', reply_parameters: '{"message_id":1366}' });
  });
});

describe('auth refusals and invalid requests carry the provider body', () => {
  test('Postmark: 401 ErrorCode 10 without or with a wrong token; 422 ErrorCode 300 without From or To', async () => {
    expect(await postmark(email, 'wrong')).toMatchObject({ status: 401, body: { ErrorCode: 10, Message: expect.any(String) } });
    const none = await call(`${doubles.urls.postmark}/email`, json(email));
    expect(none).toMatchObject({ status: 401, body: { ErrorCode: 10 } });
    expect(await postmark({ ...email, From: undefined })).toMatchObject({ status: 422, body: { ErrorCode: 300 } });
    expect(await postmark({ ...email, To: '' })).toMatchObject({ status: 422, body: { ErrorCode: 300 } });
    expect(doubles.sends('postmark').map((s) => s.answeredStatus)).toEqual([401, 401, 422, 422]);
  });

  test('Twilio: 401 20003 on bad credentials; 400 21211, 21604 (JSON is not read), 21602', async () => {
    const bad = await twilio(sms('Hi'), basic(AC, 'nope'));
    expect(bad).toMatchObject({ status: 401, body: { code: 20003, message: 'Authenticate', more_info: 'https://www.twilio.com/docs/errors/20003', status: 401 } });
    expect(bad.headers.get('www-authenticate')).toMatch(/^Basic/);
    expect((await twilio(sms('Hi'), basic(AC, TWILIO_TOKEN), `AC${'b2'.repeat(16)}`)).body.code).toBe(20003);
    expect((await twilio([['To', '555-0123'], ['From', '+15017122661'], ['Body', 'x']])).body).toMatchObject({ code: 21211, status: 400 });
    const asJson = await call(`${doubles.urls.twilio}/2010-04-01/Accounts/${AC}/Messages.json`, json({ To: '+14155550123', From: '+15017122661', Body: 'x' }, { authorization: basic(AC, TWILIO_TOKEN) }));
    expect(asJson).toMatchObject({ status: 400, body: { code: 21604, message: "A 'To' phone number is required." } });
    expect((await twilio([['To', '+14155550123'], ['From', '+15017122661']])).body.code).toBe(21602);
  });

  test('WhatsApp: 401 code 190 for an unknown token, 400 code 100 for another number or a bad body', async () => {
    expect(await whatsapp(waText('x'), 'expired')).toMatchObject({ status: 401, body: { error: { code: 190, type: 'OAuthException', fbtrace_id: expect.any(String) } } });
    expect(await whatsapp(waText('x'), 'EAAG-other-number-token')).toMatchObject({ status: 400, body: { error: { code: 100, type: 'GraphMethodException' } } });
    expect(await whatsapp({ to: '16505551234', type: 'text', text: { body: 'x' } })).toMatchObject({ status: 400, body: { error: { code: 100 } } });
  });

  test('Telegram: 401 Unauthorized for an unknown token; 400 "message is too long" past 4096 characters', async () => {
    expect(await telegram({ chat_id: 1, text: 'x' }, '999:nope')).toMatchObject({ status: 401, body: { ok: false, error_code: 401, description: 'Unauthorized' } });
    expect((await telegram({ chat_id: 1, text: 'ж'.repeat(4096) })).status).toBe(200);
    expect(await telegram({ chat_id: 1, text: 'ж'.repeat(4097) })).toMatchObject({ status: 400, body: { ok: false, error_code: 400, description: 'Bad Request: message is too long' } });
  });
});

describe('Twilio segment counting', () => {
  test.each([
    ['empty', '', 1],
    ['160 GSM-7', 'a'.repeat(160), 1],
    ['161 GSM-7', 'a'.repeat(161), 2],
    ['306 GSM-7', 'a'.repeat(306), 2],
    ['307 GSM-7', 'a'.repeat(307), 3],
    ['80 € (two septets each)', '€'.repeat(80), 1],
    ['81 €', '€'.repeat(81), 2],
    ['an escape pair is not split across parts', 'a'.repeat(152) + '€' + 'a'.repeat(152), 3],
    ['70 UCS-2', 'ж'.repeat(70), 1],
    ['71 UCS-2', 'ж'.repeat(71), 2],
    ['134 UCS-2', 'ж'.repeat(134), 2],
    ['135 UCS-2', 'ж'.repeat(135), 3],
    ['one emoji makes it UCS-2, two code units', 'a'.repeat(69) + '😀', 2],
    ['35 emoji', '😀'.repeat(35), 1],
    ['36 emoji: 33 per 67-unit part, pairs unsplit', '😀'.repeat(36), 2],
  ])('%s → %i', (_label, body, expected) => {
    expect(smsSegments(body)).toBe(expected);
  });

  test('num_segments in the answer is that count, as a string', async () => {
    expect((await twilio(sms('a'.repeat(161)))).body.num_segments).toBe('2');
    expect((await twilio(sms('Grüße 😀'))).body.num_segments).toBe('1');
  });
});

describe('scripted failures', () => {
  test.each(PROVIDERS)('%s: rate_limited, server_error and rejected answer with the provider body, then success resumes', async (provider) => {
    doubles.failNext(provider, { kind: 'rate_limited', retryAfterSeconds: 7 });
    doubles.failNext(provider, { kind: 'server_error' });
    doubles.failNext(provider, { kind: 'server_error', status: 503 });
    doubles.failNext(provider, { kind: 'rejected' });
    const [limited, failed, unavailable, rejected, ok] = [await sendOne[provider](), await sendOne[provider](), await sendOne[provider](), await sendOne[provider](), await sendOne[provider]()];
    const expected: Record<Provider, [number, unknown, unknown, unknown, unknown]> = {
      postmark: [429, { ErrorCode: 429 }, { ErrorCode: 500 }, { ErrorCode: 503 }, { ErrorCode: 406, Message: expect.stringContaining('ann@example.com') }],
      twilio: [429, { code: 20429, status: 429 }, { code: 20500, status: 500 }, { code: 20503, status: 503 }, { code: 21211, status: 400 }],
      whatsapp: [400, { error: { code: 130429, error_data: { messaging_product: 'whatsapp' } } }, { error: { code: 131000 } }, { error: { code: 2 } }, { error: { code: 131047, type: 'OAuthException' } }],
      telegram: [
        429,
        { ok: false, error_code: 429, description: 'Too Many Requests: retry after 7', parameters: { retry_after: 7 } },
        { ok: false, error_code: 500 },
        { ok: false, error_code: 503 },
        { ok: false, error_code: 403, description: 'Forbidden: bot was blocked by the user' },
      ],
    };
    const [limitedStatus, limitedBody, failedBody, unavailableBody, rejectedBody] = expected[provider];
    expect(limited).toMatchObject({ status: limitedStatus, body: limitedBody });
    expect(limited.headers.get('retry-after')).toBe(provider === 'telegram' ? '7' : null);
    expect(failed).toMatchObject({ status: 500, body: failedBody });
    expect(unavailable).toMatchObject({ status: 503, body: unavailableBody });
    expect(rejected).toMatchObject({ status: provider === 'postmark' ? 422 : provider === 'telegram' ? 403 : 400, body: rejectedBody });
    expect(ok.status).toBeLessThan(300);
    const recorded = doubles.sends(provider);
    expect(recorded.map((s) => s.answeredStatus)).toEqual([limited.status, 500, 503, rejected.status, ok.status]);
    expect(recorded.filter((s) => s.providerMessageId).length).toBe(1);
  });

  test('count repeats a script; retryAfterHeader forces the header; reset() forgets sends and scripts but keeps accounts', async () => {
    doubles.failNext('twilio', { kind: 'rate_limited', retryAfterSeconds: 3, retryAfterHeader: true }, 2);
    const [a, b, c] = [await sendOne.twilio(), await sendOne.twilio(), await sendOne.twilio()];
    expect([a.status, b.status, c.status]).toEqual([429, 429, 201]);
    expect(a.headers.get('retry-after')).toBe('3');
    doubles.failNext('twilio', { kind: 'rejected' });
    doubles.reset();
    expect(doubles.sends()).toEqual([]);
    expect((await sendOne.twilio()).status).toBe(201);
  });

  test('reset destroys the connection before reading: the client fails, the send is recorded as not received', async () => {
    doubles.failNext('postmark', { kind: 'reset' });
    await expect(sendOne.postmark()).rejects.toThrow();
    expect(doubles.sends('postmark')).toEqual([expect.objectContaining({ received: false, answeredStatus: null, body: {} })]);
    expect((await sendOne.postmark()).status).toBe(200);
  });

  test('hang reads and records the request, keeps the message, and never answers within 2 s', async () => {
    doubles.failNext('whatsapp', { kind: 'hang' });
    const started = Date.now();
    const res = fetch(`${doubles.urls.whatsapp}/v21.0/${WA_NUMBER}/messages`, { method: 'POST', signal: AbortSignal.timeout(2000), ...json(waText('Still there?'), { authorization: `Bearer ${WA_TOKEN}` }) });
    await expect(res).rejects.toMatchObject({ name: 'TimeoutError' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(1950);
    const [hung] = doubles.sends('whatsapp');
    expect(hung).toMatchObject({ received: true, answeredStatus: null, providerMessageId: expect.stringMatching(/^wamid\./), body: waText('Still there?') });
  });
});

describe('provider-side callbacks, signed as the providers sign them', () => {
  test('twilioStatus posts the form fields to the StatusCallback the send named; X-Twilio-Signature verifies', async () => {
    const callback = `${hookBase}/hooks/twilio/status?tenant=acme`;
    const sent = await twilio([...sms('Hi'), ['StatusCallback', callback]]);
    const res = await doubles.twilioStatus(sent.body.sid, 'undelivered', { errorCode: '30003' });
    expect(res.status).toBe(204);
    const [hit] = hits;
    const params = Object.fromEntries(new URLSearchParams(hit!.raw));
    expect(hit!.path).toBe('/hooks/twilio/status?tenant=acme');
    expect(params).toMatchObject({ MessageSid: sent.body.sid, MessageStatus: 'undelivered', SmsSid: sent.body.sid, SmsStatus: 'undelivered', AccountSid: AC, From: '+15017122661', To: '+14155550123', ErrorCode: '30003' });
    expect(hit!.headers['x-twilio-signature']).toBe(twilioSignature(TWILIO_TOKEN, callback, params));
    expect(hit!.headers['x-twilio-signature']).not.toBe(twilioSignature('other-token', callback, params));
    const withoutCallback = await twilio(sms('Hi'));
    await expect(doubles.twilioStatus(withoutCallback.body.sid, 'delivered')).rejects.toThrow(/StatusCallback/);
  });

  test('twilioSignature matches the worked example of Twilio\'s security page', () => {
    const url = 'https://mycompany.com/myapp.php?foo=1&bar=2';
    const params = { CallSid: 'CA1234567890ABCDE', Caller: '+12349013030', Digits: '1234', From: '+12349013030', To: '+18005551212' };
    expect(twilioSignature('12345', url, params)).toBe('0/KCTR6DLpKmkAf8muzZqo1nDgQ=');
  });

  test('whatsappStatus posts entry[].changes[].value.statuses[] with X-Hub-Signature-256 over the raw body', async () => {
    const sent = await whatsapp(waText('Hi'));
    const wamid: string = sent.body.messages[0].id;
    await doubles.whatsappStatus(`${hookBase}/hooks/whatsapp`, 'app-secret', wamid, 'failed', { errors: [{ code: 131047, title: 'Re-engagement message' }] });
    const [hit] = hits;
    expect(hit!.headers['x-hub-signature-256']).toBe(metaSignature('app-secret', hit!.raw));
    expect(JSON.parse(hit!.raw)).toEqual({
      object: 'whatsapp_business_account',
      entry: [
        {
          id: expect.any(String),
          changes: [
            {
              field: 'messages',
              value: {
                messaging_product: 'whatsapp',
                metadata: { display_phone_number: expect.any(String), phone_number_id: WA_NUMBER },
                statuses: [{ id: wamid, status: 'failed', timestamp: expect.stringMatching(/^\d+$/), recipient_id: '16505551234', errors: [{ code: 131047, title: 'Re-engagement message', message: 'Re-engagement message' }] }],
              },
            },
          ],
        },
      ],
    });
  });

  test('postmarkDelivery posts Delivery and Bounce records for a sent MessageID, with basic auth', async () => {
    const sent = await postmark(email);
    await doubles.postmarkDelivery(`${hookBase}/hooks/postmark`, sent.body.MessageID, 'Delivery', { basicAuth: 'postmark:s3cret' });
    await doubles.postmarkDelivery(`http://hook:p%40ss@127.0.0.1:${new URL(hookBase).port}/hooks/postmark`, sent.body.MessageID, 'Bounce');
    const [delivery, bounce] = hits;
    expect(delivery!.headers.authorization).toBe(basic('postmark', 's3cret'));
    expect(JSON.parse(delivery!.raw)).toEqual({
      RecordType: 'Delivery',
      ServerID: expect.any(Number),
      MessageStream: 'outbound',
      MessageID: sent.body.MessageID,
      Recipient: 'ann@example.com',
      Tag: 'reply',
      DeliveredAt: expect.stringMatching(/Z$/),
      Details: expect.any(String),
      Metadata: { ticket: 't1' },
    });
    expect(bounce!.headers.authorization).toBe(basic('hook', 'p@ss'));
    expect(JSON.parse(bounce!.raw)).toMatchObject({ RecordType: 'Bounce', Type: 'HardBounce', TypeCode: 1, MessageID: sent.body.MessageID, Email: 'ann@example.com', From: email.From, Inactive: true, BouncedAt: expect.any(String) });
  });
});
