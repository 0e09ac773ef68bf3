import { createHmac } from 'node:crypto';
import { postmarkRecord, twilioStatus, whatsappStatuses, MAX_WHATSAPP_STATUSES } from '../src/domains/provider-hooks/statuses';
import {
  basicAuthValid,
  metaSignatureValid,
  parseForm,
  publicUrl,
  telegramSecretValid,
  twilioSignatureValid,
} from '../src/domains/provider-hooks/verify';

/**
 * Pure unit tests of the native provider hooks' verification and status parsing (issue 33). No database.
 * Every expected signature is computed here with node:crypto, written out, never by the code under test.
 */

const utf8 = (s: string) => Buffer.from(s, 'utf8');
const byBytes = (a: string, b: string) => Buffer.compare(utf8(a), utf8(b));

/** Twilio's documented algorithm, written out: URL, then each name (byte order) and value; lists sorted, deduped. */
function twilioSign(token: string, url: string, params: Record<string, string | string[]>): string {
  let data = url;
  for (const name of Object.keys(params).sort(byBytes)) {
    const value = params[name]!;
    const values = Array.isArray(value) ? [...new Set(value)].sort(byBytes) : [value];
    for (const v of values) data += name + v;
  }
  return createHmac('sha1', token).update(data, 'utf8').digest('base64');
}

const metaSign = (secret: string, raw: Buffer) => `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`;
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`, 'utf8').toString('base64')}`;

// ------------------------------------------------------------------------------------------- Twilio

describe('twilioSignatureValid', () => {
  // Twilio's documented example (the security page's "Validating requests" snippet; the code is Twilio's own
  // api-snippets repo, TwilioDevEd/api-snippets security/signature_validation/signature_validation.3.x.js):
  // auth token 12345, this URL and these POST parameters give X-Twilio-Signature GvWf1cFY/Q7PnoempGyD5oXAezc=.
  const DOC_TOKEN = '12345';
  const DOC_URL = 'https://mycompany.com/myapp.php?foo=1&bar=2';
  const DOC_PARAMS = { CallSid: 'CA1234567890ABCDE', Caller: '+14158675310', Digits: '1234', From: '+14158675310', To: '+18005551212' };
  const DOC_SIGNATURE = 'GvWf1cFY/Q7PnoempGyD5oXAezc=';

  it("accepts Twilio's documented example verbatim", () => {
    expect(twilioSignatureValid(DOC_TOKEN, DOC_URL, DOC_PARAMS, DOC_SIGNATURE)).toBe(true);
    // The older revision of the same example (api-snippets signature_validation.2.x.js and twilio-php's
    // docs/usage/validation.rst): Caller and From +14158675309 → RSOYDt4T1cUTdK1PDd93/VVr8B8=.
    const older = { ...DOC_PARAMS, Caller: '+14158675309', From: '+14158675309' };
    expect(twilioSignatureValid(DOC_TOKEN, DOC_URL, older, 'RSOYDt4T1cUTdK1PDd93/VVr8B8=')).toBe(true);
  });

  it('accepts the documented example parsed from its form body', () => {
    const body = Buffer.from('CallSid=CA1234567890ABCDE&Caller=%2B14158675310&Digits=1234&From=%2B14158675310&To=%2B18005551212');
    const form = parseForm(body, { maxFields: 50, maxBytes: 10_000 });
    if (!form.ok) throw new Error(form.reason);
    expect(twilioSignatureValid(DOC_TOKEN, DOC_URL, form.fields, DOC_SIGNATURE)).toBe(true);
  });

  it('refuses the example with anything changed', () => {
    expect(twilioSignatureValid(DOC_TOKEN, DOC_URL, { ...DOC_PARAMS, Digits: '1235' }, DOC_SIGNATURE)).toBe(false);
    expect(twilioSignatureValid(DOC_TOKEN, DOC_URL, { ...DOC_PARAMS, Extra: '' }, DOC_SIGNATURE)).toBe(false);
    const missing: Record<string, string> = { ...DOC_PARAMS };
    delete missing.Digits;
    expect(twilioSignatureValid(DOC_TOKEN, DOC_URL, missing, DOC_SIGNATURE)).toBe(false);
    expect(twilioSignatureValid(DOC_TOKEN, 'https://mycompany.com/myapp.php?foo=1&bar=3', DOC_PARAMS, DOC_SIGNATURE)).toBe(false);
    expect(twilioSignatureValid(DOC_TOKEN, 'http://mycompany.com/myapp.php?foo=1&bar=2', DOC_PARAMS, DOC_SIGNATURE)).toBe(false);
    expect(twilioSignatureValid(DOC_TOKEN, 'https://evil.example/myapp.php?foo=1&bar=2', DOC_PARAMS, DOC_SIGNATURE)).toBe(false);
    expect(twilioSignatureValid('12346', DOC_URL, DOC_PARAMS, DOC_SIGNATURE)).toBe(false);
    // A value moved from one name to another keeps the concatenation's letters but not its order.
    expect(twilioSignatureValid(DOC_TOKEN, DOC_URL, { ...DOC_PARAMS, To: '+14158675310', From: '+18005551212' }, DOC_SIGNATURE)).toBe(false);
    // One bit of the signature flipped (last data character before the padding).
    expect(twilioSignatureValid(DOC_TOKEN, DOC_URL, DOC_PARAMS, 'GvWf1cFY/Q7PnoempGyD5oXAezd=')).toBe(false);
  });

  it('refuses missing, empty and wrong-length headers without throwing', () => {
    for (const header of [undefined, '', 'x', DOC_SIGNATURE.slice(0, 27), `${DOC_SIGNATURE}=`, `${DOC_SIGNATURE} `, 'é'.repeat(28), 'A'.repeat(10_000)]) {
      expect(() => twilioSignatureValid(DOC_TOKEN, DOC_URL, DOC_PARAMS, header)).not.toThrow();
      expect(twilioSignatureValid(DOC_TOKEN, DOC_URL, DOC_PARAMS, header)).toBe(false);
    }
    // An HMAC-SHA256 signature (Twilio's Webhook Rules) is 44 characters: not this check's.
    const sha256 = createHmac('sha256', DOC_TOKEN).update('x').digest('base64');
    expect(twilioSignatureValid(DOC_TOKEN, DOC_URL, DOC_PARAMS, sha256)).toBe(false);
  });

  it('refuses an empty auth token, a malformed URL and non-string values without throwing', () => {
    expect(twilioSignatureValid('', DOC_URL, DOC_PARAMS, twilioSign('', DOC_URL, DOC_PARAMS))).toBe(false);
    const badUrl = 'not a url';
    // A URL that does not parse is still signed as given (Twilio signs whatever it requested).
    expect(twilioSignatureValid('tok', badUrl, {}, twilioSign('tok', badUrl, {}))).toBe(true);
    const weird = { A: 1 } as unknown as Record<string, string>;
    expect(() => twilioSignatureValid('tok', DOC_URL, weird, twilioSign('tok', DOC_URL, { A: '1' }))).not.toThrow();
    expect(twilioSignatureValid('tok', DOC_URL, weird, twilioSign('tok', DOC_URL, { A: '1' }))).toBe(false);
    const weirdList = { A: ['1', 2] } as unknown as Record<string, string[]>;
    expect(twilioSignatureValid('tok', DOC_URL, weirdList, twilioSign('tok', DOC_URL, { A: ['1', '2'] }))).toBe(false);
  });

  it('accepts the URL with and without the https default port, either way round', () => {
    const token = 'auth-token-0123456789abcdef';
    const params = { MessageSid: 'SM0123456789abcdef0123456789abcdef', MessageStatus: 'delivered' };
    const bare = 'https://help.example.com/v1/hooks/sms/tok_abc?x=1';
    const withPort = 'https://help.example.com:443/v1/hooks/sms/tok_abc?x=1';
    expect(twilioSignatureValid(token, bare, params, twilioSign(token, withPort, params))).toBe(true);
    expect(twilioSignatureValid(token, withPort, params, twilioSign(token, bare, params))).toBe(true);
    expect(twilioSignatureValid(token, bare, params, twilioSign(token, bare, params))).toBe(true);
    // http's default port likewise.
    expect(twilioSignatureValid(token, 'http://h.example/p', params, twilioSign(token, 'http://h.example:80/p', params))).toBe(true);
    // Not the other scheme's port, and a non-default port is never dropped or invented.
    expect(twilioSignatureValid(token, bare, params, twilioSign(token, 'https://help.example.com:80/v1/hooks/sms/tok_abc?x=1', params))).toBe(false);
    expect(twilioSignatureValid(token, 'https://h.example:8443/p', params, twilioSign(token, 'https://h.example/p', params))).toBe(false);
    expect(twilioSignatureValid(token, 'https://h.example/p', params, twilioSign(token, 'https://h.example:8443/p', params))).toBe(false);
    expect(twilioSignatureValid(token, 'https://h.example:8443/p', params, twilioSign(token, 'https://h.example:8443/p', params))).toBe(true);
  });

  it('signs repeated names value by value, values sorted and deduplicated, as Twilio\'s helper does', () => {
    const token = 'tok';
    const url = 'https://h.example/hook';
    // Written out: name + value for each distinct value in sorted order, names sorted.
    const expected = createHmac('sha1', token).update(`${url}Aone` + 'MediaUrlhttps://a.example/1' + 'MediaUrlhttps://b.example/2', 'utf8').digest('base64');
    const params = { MediaUrl: ['https://b.example/2', 'https://a.example/1', 'https://b.example/2'], A: 'one' };
    expect(twilioSignatureValid(token, url, params, expected)).toBe(true);
    expect(twilioSignatureValid(token, url, { ...params, MediaUrl: ['https://a.example/1', 'https://b.example/2'] }, expected)).toBe(true);
    expect(twilioSignatureValid(token, url, { ...params, MediaUrl: ['https://a.example/1'] }, expected)).toBe(false);
  });

  it('sorts names by byte order (case-sensitive, UTF-8), not by locale or UTF-16 units', () => {
    const token = 'tok';
    const url = 'https://h.example/hook';
    // Upper case before lower case; U+FF5E (EF BD 9E) before U+1F600 (F0 9F 98 80) in UTF-8, though a plain
    // JS sort puts the emoji's surrogate (D83D) first.
    const params = { b: '1', B: '2', a: '3', '\u{1F600}': '4', '\uFF5E': '5' };
    const written = `${url}B2a3b1\uFF5E5\u{1F600}4`;
    const expected = createHmac('sha1', token).update(written, 'utf8').digest('base64');
    expect(twilioSignatureValid(token, url, params, expected)).toBe(true);
    expect(twilioSign(token, url, params)).toBe(expected);
  });

  it('checks non-ASCII values over their UTF-8 bytes', () => {
    const token = 'tok';
    const url = 'https://h.example/hook';
    const params = { Body: 'Olá — ¿qué tal? 👋', From: '+351912345678' };
    expect(twilioSignatureValid(token, url, params, twilioSign(token, url, params))).toBe(true);
    expect(twilioSignatureValid(token, url, { ...params, Body: 'Ola — ¿qué tal? 👋' }, twilioSign(token, url, params))).toBe(false);
  });
});

// --------------------------------------------------------------------------------------------- Meta

describe('metaSignatureValid', () => {
  const secret = 'app-secret-5f4dcc3b5aa765d61d8327deb882cf99';
  // Meta escapes non-ASCII in its bodies; the bytes, not a re-serialisation, are what it signs.
  const raw = Buffer.from('{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","changes":[{"value":{"messaging_product":"whatsapp","statuses":[{"id":"wamid.X","status":"read","timestamp":"1750030073","recipient_id":"16505551234"}],"note":"caf\\u00e9"},"field":"messages"}]}]}');

  it('accepts sha256=<hex HMAC-SHA256 of the raw bytes>, hex of either case', () => {
    const header = metaSign(secret, raw);
    expect(metaSignatureValid(secret, raw, header)).toBe(true);
    expect(metaSignatureValid(secret, raw, `sha256=${header.slice(7).toUpperCase()}`)).toBe(true);
  });

  it('refuses a tampered body, another secret, or a re-serialised body', () => {
    const header = metaSign(secret, raw);
    const tampered = Buffer.from(raw);
    tampered.writeUInt8(tampered.readUInt8(tampered.length - 5) ^ 0x01, tampered.length - 5);
    expect(metaSignatureValid(secret, tampered, header)).toBe(false);
    expect(metaSignatureValid(`${secret}x`, raw, header)).toBe(false);
    expect(metaSignatureValid(secret, Buffer.from(JSON.stringify(JSON.parse(raw.toString()))), header)).toBe(false);
    expect(metaSignatureValid(secret, Buffer.concat([raw, Buffer.from(' ')]), header)).toBe(false);
  });

  it('refuses malformed headers without throwing', () => {
    const header = metaSign(secret, raw);
    const hex = header.slice(7);
    const bad = [
      undefined,
      '',
      hex, // no prefix
      `sha1=${hex}`,
      `SHA256=${hex}`,
      `sha256=${hex.slice(1)}`,
      `sha256=${hex}0`,
      `sha256=${'g'.repeat(64)}`,
      `sha256=${hex.slice(0, 63)}é`,
      `sha256= ${hex.slice(1)}`,
      'x'.repeat(100_000),
    ];
    for (const h of bad) {
      expect(() => metaSignatureValid(secret, raw, h)).not.toThrow();
      expect(metaSignatureValid(secret, raw, h)).toBe(false);
    }
    expect(metaSignatureValid('', raw, metaSign('', raw))).toBe(false);
    expect(metaSignatureValid(secret, raw.toString() as unknown as Buffer, header)).toBe(false);
  });
});

// ----------------------------------------------------------------------------------------- Telegram

describe('telegramSecretValid', () => {
  const expected = 'Zq8-hook_secret_0123456789';
  it('accepts exactly the secret', () => {
    expect(telegramSecretValid(expected, expected)).toBe(true);
  });
  it('refuses anything else, of any length, without throwing', () => {
    for (const header of [undefined, '', 'Zq8', `${expected}x`, expected.slice(0, -1), expected.toUpperCase(), ` ${expected}`, 'a'.repeat(257), 'a'.repeat(1_000_000)]) {
      expect(() => telegramSecretValid(expected, header)).not.toThrow();
      expect(telegramSecretValid(expected, header)).toBe(false);
    }
  });
  it('never matches when no secret is configured', () => {
    expect(telegramSecretValid('', '')).toBe(false);
    expect(telegramSecretValid('', undefined)).toBe(false);
  });
});

// ------------------------------------------------------------------------------------------ Postmark

describe('basicAuthValid', () => {
  const creds = { username: 'postmark', password: 'p4ss:word with spaces ✓' };
  it('accepts the right credentials, the scheme in any case; the password may contain colons', () => {
    expect(basicAuthValid(creds, basic(creds.username, creds.password))).toBe(true);
    expect(basicAuthValid(creds, basic(creds.username, creds.password).replace('Basic', 'basic'))).toBe(true);
    expect(basicAuthValid(creds, basic(creds.username, creds.password).replace('Basic ', 'BASIC   '))).toBe(true);
  });
  it('refuses a wrong user or password', () => {
    expect(basicAuthValid(creds, basic('postmarK', creds.password))).toBe(false);
    expect(basicAuthValid(creds, basic(creds.username, `${creds.password}x`))).toBe(false);
    expect(basicAuthValid(creds, basic(creds.username, ''))).toBe(false);
    expect(basicAuthValid(creds, basic(`${creds.username}:${creds.password}`, ''))).toBe(false);
  });
  it('refuses malformed headers without throwing', () => {
    const token = Buffer.from(`${creds.username}:${creds.password}`).toString('base64');
    const bad = [
      undefined,
      '',
      'Basic',
      'Basic ',
      token, // no scheme
      `Bearer ${token}`,
      `Basic ${Buffer.from('no-colon-here').toString('base64')}`,
      `Basic ${token}!`,
      `Basic ${token.slice(0, 4)}=${token.slice(4)}`, // data after padding
      `Basic ====`,
      `Basic ${'A'.repeat(2000)}`, // over the length bound
      `Basic ${'='.repeat(5000)}`,
      `Basic ${' '.repeat(5000)}x`,
    ];
    for (const header of bad) {
      expect(() => basicAuthValid(creds, header)).not.toThrow();
      expect(basicAuthValid(creds, header)).toBe(false);
    }
  });
  it('never matches an empty configured password', () => {
    expect(basicAuthValid({ username: 'u', password: '' }, basic('u', ''))).toBe(false);
  });
});

// ------------------------------------------------------------------------------------------- forms

describe('parseForm', () => {
  const limits = { maxFields: 10, maxBytes: 1000 };

  it('decodes + and percent-escapes as UTF-8; repeated names become arrays in order', () => {
    const r = parseForm(Buffer.from('Body=Ol%C3%A1+mundo%21&From=%2B15551234567&MediaUrl=b&MediaUrl=a&MediaUrl=c&Empty='), limits);
    if (!r.ok) throw new Error(r.reason);
    expect({ ...r.fields }).toEqual({ Body: 'Olá mundo!', From: '+15551234567', MediaUrl: ['b', 'a', 'c'], Empty: '' });
  });

  it('refuses more than maxFields pairs (repeats counted) and more than maxBytes', () => {
    expect(parseForm(Buffer.from(Array.from({ length: 10 }, (_, i) => `f${i}=1`).join('&')), limits).ok).toBe(true);
    const tooMany = parseForm(Buffer.from(Array.from({ length: 11 }, () => 'f=1').join('&')), limits);
    expect(tooMany).toEqual({ ok: false, reason: 'form has more than 10 fields' });
    const tooBig = parseForm(Buffer.alloc(1001, 0x61), limits);
    expect(tooBig.ok).toBe(false);
    if (!tooBig.ok) expect(tooBig.reason).toMatch(/1001 bytes/);
  });

  it('stays linear on a body of separators', () => {
    const raw = Buffer.from('&'.repeat(500_000) + '=&'.repeat(100_000));
    const started = process.hrtime.bigint();
    const r = parseForm(raw, { maxFields: 100, maxBytes: 1_000_000 });
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    // `=` alone is a pair with an empty name: 100 000 of them exceed the limit.
    expect(r).toEqual({ ok: false, reason: 'form has more than 100 fields' });
    expect(ms).toBeLessThan(2000);
  });

  it('refuses prototype names and keeps every other name as plain data', () => {
    for (const body of ['__proto__=x', '__proto__=a&__proto__=b', 'constructor=x', 'prototype=x', 'a=1&%5F%5Fproto%5F%5F=x']) {
      const r = parseForm(Buffer.from(body), limits);
      expect(r.ok).toBe(false);
    }
    const r = parseForm(Buffer.from('__proto__%5Bpolluted%5D=1&hasOwnProperty=2&toString=3&valueOf=4'), limits);
    if (!r.ok) throw new Error(r.reason);
    expect(Object.getPrototypeOf(r.fields)).toBeNull();
    expect(r.fields['__proto__[polluted]']).toBe('1');
    expect(r.fields.hasOwnProperty).toBe('2');
    expect(r.fields.toString).toBe('3');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.prototype.hasOwnProperty.call(Object.prototype, 'polluted')).toBe(false);
    // Copying the result onto a plain object does not reach a prototype either.
    const copy = Object.assign({}, r.fields);
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
  });

  it('refuses what is not a Buffer, and limits that would limit nothing', () => {
    expect(parseForm('a=1' as unknown as Buffer, limits).ok).toBe(false);
    expect(parseForm(Buffer.from('a=1'), { maxFields: Number.NaN, maxBytes: 1000 })).toEqual({ ok: false, reason: 'form limits are not set' });
    expect(parseForm(Buffer.from('a=1'), { maxFields: 10 } as unknown as typeof limits).ok).toBe(false);
  });
});

describe('publicUrl', () => {
  const req = { protocol: 'http', host: '10.0.0.7:3000', originalUrl: '/v1/hooks/sms/tok_abc?x=1&y=%2F' };
  it('uses PUBLIC_BASE_URL (trailing slashes dropped) with the path and query as received', () => {
    expect(publicUrl('https://help.example.com', req)).toBe('https://help.example.com/v1/hooks/sms/tok_abc?x=1&y=%2F');
    expect(publicUrl('https://help.example.com///', req)).toBe('https://help.example.com/v1/hooks/sms/tok_abc?x=1&y=%2F');
    expect(publicUrl('https://example.com/helpdesk/', req)).toBe('https://example.com/helpdesk/v1/hooks/sms/tok_abc?x=1&y=%2F');
  });
  it("falls back to the request's own protocol and host", () => {
    expect(publicUrl(undefined, req)).toBe('http://10.0.0.7:3000/v1/hooks/sms/tok_abc?x=1&y=%2F');
    expect(publicUrl('', req)).toBe('http://10.0.0.7:3000/v1/hooks/sms/tok_abc?x=1&y=%2F');
  });
  it('gives the URL a Twilio signature verifies against', () => {
    const url = publicUrl('https://help.example.com/', req);
    const params = { MessageSid: 'SM1', MessageStatus: 'sent' };
    expect(twilioSignatureValid('tok', url, params, twilioSign('tok', 'https://help.example.com/v1/hooks/sms/tok_abc?x=1&y=%2F', params))).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------- statuses

describe('twilioStatus', () => {
  // The fields of a Messaging status callback (Twilio, "Track the Message Status of Outbound Messages" and
  // "Outbound Message Status in Status Callbacks": MessageSid, MessageStatus, SmsSid/SmsStatus copies,
  // ErrorCode on failures), as parseForm hands them over.
  const callback = (fields: Record<string, string>) => {
    const body = new URLSearchParams({
      ApiVersion: '2010-04-01',
      AccountSid: 'AC0000000000000000000000000000000a',
      From: '+15017122661',
      To: '+15558675310',
      MessageSid: 'SM1342fe1b2c904d1ab04f0fc7a58abca9',
      SmsSid: 'SM1342fe1b2c904d1ab04f0fc7a58abca9',
      ...fields,
    }).toString();
    const r = parseForm(Buffer.from(body), { maxFields: 50, maxBytes: 10_000 });
    if (!r.ok) throw new Error(r.reason);
    return r.fields;
  };

  it('maps sent, delivered, read, and undelivered/failed with their error code', () => {
    expect(twilioStatus(callback({ MessageStatus: 'sent', SmsStatus: 'sent' }))).toEqual({ providerMessageId: 'SM1342fe1b2c904d1ab04f0fc7a58abca9', state: 'sent' });
    expect(twilioStatus(callback({ MessageStatus: 'delivered', SmsStatus: 'delivered' }))?.state).toBe('delivered');
    expect(twilioStatus(callback({ MessageStatus: 'read' }))?.state).toBe('read');
    expect(twilioStatus(callback({ MessageStatus: 'undelivered', SmsStatus: 'undelivered', ErrorCode: '30003' }))).toEqual({
      providerMessageId: 'SM1342fe1b2c904d1ab04f0fc7a58abca9',
      state: 'failed',
      errorCode: '30003',
    });
    expect(twilioStatus(callback({ MessageStatus: 'failed', ErrorCode: '30008', ErrorMessage: 'Unknown error' }))).toEqual({
      providerMessageId: 'SM1342fe1b2c904d1ab04f0fc7a58abca9',
      state: 'failed',
      errorCode: '30008',
      errorText: 'Unknown error',
    });
  });

  it('reads SmsStatus when MessageStatus is absent', () => {
    expect(twilioStatus(callback({ SmsStatus: 'delivered' }))?.state).toBe('delivered');
  });

  it('moves nothing for statuses before sent, for an inbound message, for unknown statuses', () => {
    for (const status of ['queued', 'sending', 'accepted', 'scheduled', 'received', 'receiving', 'partially_delivered', 'constructor', '__proto__', '']) {
      expect(twilioStatus(callback({ MessageStatus: status }))).toBeNull();
    }
    // An inbound SMS webhook: SmsStatus received, a Body, no MessageStatus.
    expect(twilioStatus(callback({ SmsStatus: 'received', Body: 'Hello', NumMedia: '0' }))).toBeNull();
  });

  it('is null without a usable MessageSid or with a repeated status', () => {
    expect(twilioStatus({ MessageStatus: 'delivered' })).toBeNull();
    expect(twilioStatus({ MessageSid: '', MessageStatus: 'delivered' })).toBeNull();
    expect(twilioStatus({ MessageSid: 'S'.repeat(300), MessageStatus: 'delivered' })).toBeNull();
    expect(twilioStatus({ MessageSid: 'SM1', MessageStatus: ['sent', 'delivered'] })).toBeNull();
    expect(twilioStatus(null as unknown as Record<string, string>)).toBeNull();
  });
});

describe('whatsappStatuses', () => {
  // Shapes from Meta's "Status messages webhook reference" (developers.facebook.com/documentation/
  // business-messaging/whatsapp/webhooks/reference/messages/status): statuses[] of {id, status, timestamp,
  // recipient_id, conversation, pricing}, and for failures errors[] of {code, title, message,
  // error_data: {details}, href}. The failed example's error is Meta's 131050 text as Meta sends it.
  const envelope = (statuses: unknown[], extra: Record<string, unknown> = {}) => ({
    object: 'whatsapp_business_account',
    entry: [
      {
        id: '102290129340398',
        changes: [
          {
            value: {
              messaging_product: 'whatsapp',
              metadata: { display_phone_number: '15550783881', phone_number_id: '106540352242922' },
              statuses,
              ...extra,
            },
            field: 'messages',
          },
        ],
      },
    ],
  });
  const sent = {
    id: 'wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA',
    status: 'sent',
    timestamp: '1750030073',
    recipient_id: '16505551234',
    conversation: { id: 'f5fdae3920125a39a1e6a23e5f877c16', expiration_timestamp: '1750116480', origin: { type: 'service' } },
    pricing: { billable: true, pricing_model: 'CBP', category: 'service' },
  };
  const text131050 = 'Unable to deliver the message. This recipient has chosen to stop receiving marketing messages on WhatsApp from your business';
  const failed = {
    id: 'wamid.HBgNNjI4MzE4MDc4MzE3MBUCABEYEkQxOUJFMzUwN0M1NjJDNzg1MwA=',
    status: 'failed',
    timestamp: '1750224806',
    recipient_id: '6283180783170',
    errors: [{ code: 131050, title: text131050, message: text131050, error_data: { details: text131050 }, href: 'https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/' }],
  };

  it('reads sent, delivered, read and failed receipts in order, with time and error', () => {
    const r = whatsappStatuses(envelope([sent, { ...sent, status: 'delivered', timestamp: 1750030080 }, { ...sent, status: 'read', timestamp: '1750030090' }, failed]));
    expect(r).toEqual({
      ok: true,
      updates: [
        { providerMessageId: sent.id, state: 'sent', at: new Date(1750030073 * 1000).toISOString() },
        { providerMessageId: sent.id, state: 'delivered', at: new Date(1750030080 * 1000).toISOString() },
        { providerMessageId: sent.id, state: 'read', at: new Date(1750030090 * 1000).toISOString() },
        { providerMessageId: failed.id, state: 'failed', errorCode: '131050', errorText: text131050, at: new Date(1750224806 * 1000).toISOString() },
      ],
    });
  });

  it('joins distinct error parts and survives odd error shapes', () => {
    const r = whatsappStatuses(
      envelope([
        { ...failed, errors: [{ code: 131047, title: 'Re-engagement message', message: 'Re-engagement message', error_data: { details: 'Message failed to send because more than 24 hours have passed since the customer last replied to this number.' } }] },
        { ...failed, id: 'wamid.2', errors: ['junk', { code: '131026', title: 'Message undeliverable', error_data: 'template detail as a string' }] },
        { ...failed, id: 'wamid.3', errors: undefined },
      ]),
    );
    expect(r.ok && r.updates).toEqual([
      expect.objectContaining({ state: 'failed', errorCode: '131047', errorText: 'Re-engagement message — Message failed to send because more than 24 hours have passed since the customer last replied to this number.' }),
      expect.objectContaining({ providerMessageId: 'wamid.2', errorCode: '131026', errorText: 'Message undeliverable — template detail as a string' }),
      { providerMessageId: 'wamid.3', state: 'failed', at: new Date(1750224806 * 1000).toISOString() },
    ]);
  });

  it('skips other statuses, other fields and inbound messages; tolerates unknown fields', () => {
    const r = whatsappStatuses({
      ...envelope([{ ...sent, status: 'deleted' }, { ...sent, status: 'played' }, { ...sent, new_field: { nested: true }, biz_opaque_callback_data: 'x' }], {
        messages: [{ from: '16505551234', id: 'wamid.in', timestamp: '1750030000', type: 'text', text: { body: 'hi' } }],
        contacts: [{ profile: { name: 'Sheena Nelson' }, wa_id: '16505551234' }],
      }),
      extra_top_level: 1,
    });
    expect(r).toEqual({ ok: true, updates: [{ providerMessageId: sent.id, state: 'sent', at: new Date(1750030073 * 1000).toISOString() }] });
    const otherField = envelope([sent]);
    otherField.entry[0]!.changes[0]!.field = 'message_template_status_update';
    expect(whatsappStatuses(otherField)).toEqual({ ok: true, updates: [] });
    expect(whatsappStatuses({ object: 'whatsapp_business_account', entry: [] })).toEqual({ ok: true, updates: [] });
  });

  it(`refuses more than ${MAX_WHATSAPP_STATUSES} statuses, counted across changes`, () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => ({ ...sent, id: `wamid.${i}` }));
    const atLimit = whatsappStatuses(envelope(many(MAX_WHATSAPP_STATUSES)));
    expect(atLimit.ok && atLimit.updates.length).toBe(MAX_WHATSAPP_STATUSES);
    expect(whatsappStatuses(envelope(many(MAX_WHATSAPP_STATUSES + 1)))).toEqual({ ok: false, reason: 'whatsapp webhook has more than 1000 statuses' });
    const split = envelope(many(600));
    split.entry.push({ id: '2', changes: [{ value: { ...split.entry[0]!.changes[0]!.value, statuses: many(401) }, field: 'messages' }] });
    expect(whatsappStatuses(split).ok).toBe(false);
  });

  it('refuses what is not a Cloud API webhook, and a status without an id', () => {
    expect(whatsappStatuses(null).ok).toBe(false);
    expect(whatsappStatuses([]).ok).toBe(false);
    expect(whatsappStatuses({ object: 'page', entry: [] }).ok).toBe(false);
    expect(whatsappStatuses({ object: 'whatsapp_business_account', entry: 'x' }).ok).toBe(false);
    const noId = whatsappStatuses(envelope([{ status: 'delivered', timestamp: '1750030073' }]));
    expect(noId.ok).toBe(false);
    if (!noId.ok) expect(noId.reason).toContain('entry.0.changes.0.value.statuses.0');
    expect(whatsappStatuses(envelope([{ ...sent, id: 'w'.repeat(300) }])).ok).toBe(false);
  });
});

describe('postmarkRecord', () => {
  // Postmark's documented webhook examples (postmarkapp.com/developer/webhooks/delivery-webhook,
  // /bounce-webhook, /spam-complaint-webhook), as Postmark publishes them.
  const delivery = {
    RecordType: 'Delivery',
    ServerID: 23,
    MessageStream: 'outbound',
    MessageID: '00000000-0000-0000-0000-000000000000',
    Recipient: 'john@example.com',
    Tag: 'welcome-email',
    DeliveredAt: '2019-11-05T16:33:54.9070259Z',
    Details: 'Test delivery webhook details',
    Metadata: { a_key: 'a_value', b_key: 'b_value' },
  };
  const bounce = {
    RecordType: 'Bounce',
    MessageStream: 'outbound',
    ID: 4323372036854775807,
    Type: 'HardBounce',
    TypeCode: 1,
    Name: 'Hard bounce',
    Tag: 'Test',
    MessageID: '883953f4-6105-42a2-a16a-77a8eac79483',
    Metadata: { a_key: 'a_value', b_key: 'b_value' },
    ServerID: 23,
    Description: 'The server was unable to deliver your message (ex: unknown user, mailbox not found).',
    Details: 'Test bounce details',
    Email: 'john@example.com',
    From: 'sender@example.com',
    BouncedAt: '2019-11-05T16:33:54.9070259Z',
    DumpAvailable: true,
    Inactive: true,
    CanActivate: true,
    Subject: 'Test subject',
    Content: '<Full dump of bounce>',
  };
  const spamComplaint = {
    RecordType: 'SpamComplaint',
    MessageStream: 'outbound',
    ID: 42,
    Type: 'SpamComplaint',
    TypeCode: 512,
    Name: 'Spam complaint',
    Tag: 'Test',
    MessageID: '00000000-0000-0000-0000-000000000000',
    Metadata: { a_key: 'a_value', b_key: 'b_value' },
    ServerID: 1234,
    Description: '',
    Details: 'Test spam complaint details',
    Email: 'john@example.com',
    From: 'sender@example.com',
    BouncedAt: '2019-11-05T16:33:54.9070259Z',
    DumpAvailable: true,
    Inactive: true,
    CanActivate: false,
    Subject: 'Test subject',
    Content: '<Abuse report dump>',
  };

  it('maps Delivery to delivered at DeliveredAt', () => {
    expect(postmarkRecord(delivery)).toEqual({ providerMessageId: '00000000-0000-0000-0000-000000000000', state: 'delivered', at: '2019-11-05T16:33:54.907Z' });
    expect(postmarkRecord({ ...delivery, DeliveredAt: '2014-08-01T13:28:10.2735393-04:00' })?.at).toBe('2014-08-01T17:28:10.273Z');
    expect(postmarkRecord({ ...delivery, DeliveredAt: 'not a date' })).toEqual({ providerMessageId: delivery.MessageID, state: 'delivered' });
  });

  it('maps a Bounce to failed with its type and texts', () => {
    expect(postmarkRecord(bounce)).toEqual({
      providerMessageId: '883953f4-6105-42a2-a16a-77a8eac79483',
      state: 'failed',
      errorCode: 'HardBounce',
      errorText: 'The server was unable to deliver your message (ex: unknown user, mailbox not found). — Test bounce details',
      at: '2019-11-05T16:33:54.907Z',
    });
    expect(postmarkRecord({ ...bounce, Type: undefined })?.errorCode).toBe('1');
    for (const type of ['SoftBounce', 'Transient', 'DnsError', 'Blocked', 'SpamNotification', 'SomethingNew']) {
      expect(postmarkRecord({ ...bounce, Type: type })?.state).toBe('failed');
    }
  });

  it('does not fail a message over an auto-reply or a (un)subscribe notice', () => {
    for (const type of ['AutoResponder', 'Subscribe', 'Unsubscribe', 'AddressChange', 'OpenRelayTest', 'InboundError']) {
      expect(postmarkRecord({ ...bounce, Type: type })).toBeNull();
    }
  });

  it('maps a SpamComplaint to failed', () => {
    expect(postmarkRecord(spamComplaint)).toEqual({
      providerMessageId: '00000000-0000-0000-0000-000000000000',
      state: 'failed',
      errorCode: 'SpamComplaint',
      errorText: 'Test spam complaint details',
      at: '2019-11-05T16:33:54.907Z',
    });
  });

  it('is null for opens, clicks, subscription changes, inbound email and unreadable records', () => {
    expect(postmarkRecord({ RecordType: 'Open', MessageID: delivery.MessageID, FirstOpen: true, ReceivedAt: '2019-11-05T16:33:54.9070259Z' })).toBeNull();
    expect(postmarkRecord({ RecordType: 'Click', MessageID: delivery.MessageID, OriginalLink: 'https://example.com' })).toBeNull();
    expect(postmarkRecord({ RecordType: 'SubscriptionChange', MessageID: delivery.MessageID, SuppressSending: true })).toBeNull();
    // Postmark's inbound webhook carries no RecordType.
    expect(postmarkRecord({ From: 'customer@example.com', MessageID: '22c74902-a0c1-4511-804f-341342852c90', Subject: 'Help', TextBody: 'Hi' })).toBeNull();
    expect(postmarkRecord({ ...delivery, MessageID: '' })).toBeNull();
    expect(postmarkRecord({ ...delivery, MessageID: 42 })).toBeNull();
    expect(postmarkRecord({ ...bounce, MessageID: undefined })).toBeNull();
    for (const junk of [null, undefined, 'Delivery', 42, [], [delivery], { RecordType: 7 }, { RecordType: 'constructor', MessageID: 'x' }]) {
      expect(postmarkRecord(junk)).toBeNull();
    }
  });
});
