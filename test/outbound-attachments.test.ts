/**
 * Replies carry their attachments (issue 34, part 3): a reply naming upload tokens reaches the customer with its
 * files, on every channel, against the provider doubles: Postmark `Attachments` (base64), Twilio `MediaUrl` (a
 * signed, expiring link to this service, which the double fetches), WhatsApp media uploaded to /{version}/{id}/media
 * then sent as image/document messages, Telegram sendDocument (multipart). Every file reaches the double with the
 * sha256 it was stored with. A reply sent in several provider messages records each acknowledged part, so a retry
 * never sends one twice. Each channel's limits refuse the reply (422 attachment_not_sendable) with nothing stored.
 */
import { createHash, randomBytes, randomInt } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DomainError } from '../src/lib/errors';
import { assertSendable } from '../src/domains/outbound/attachments';
import { startTestApp, type TestContext } from './helpers/context';
import { bearer, createWorkspace, type Workspace } from './helpers/factories';
import { connect, ingest } from './helpers/ingest';
import { emailPayload, newEmailMessageId, smsPayload, telegramUpdate, whatsappPayload } from './helpers/payloads';
import { freePort } from './helpers/ports';
import { doublesEnv, startForwarder, stopForwarder } from './helpers/public-forwarder';
import { startMailProviderDouble, type MailProviderDouble } from './helpers/mail-provider-double';
import { helpers as mailboxHelpers, PROVIDERS, providerEnv, suite } from './helpers/mailbox';
import { startProviderDoubles, type ProviderDoubles } from './helpers/provider-doubles';
import { eventually } from './helpers/wait';

const AC = `AC${'7a'.repeat(16)}`;
const TWILIO_TOKEN = 'twilio-attachments-auth-token-01';
const OUR_SMS = '+15550003333';
const PM_TOKEN = 'pm-server-token-attachments-01';
const WA_NUMBER = '106540352240001';
const WA_KEY = 'EAAG-attachments-system-user-token';
const TG_TOKEN = '987654322:AAAttachmentsBotTokenForTheDouble';

const hex = (n: number) => randomBytes(n).toString('hex');
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
/** A 1×1 PNG (sniffed image/png), with `pad` more bytes after its end. */
const png = (pad = 0) => Buffer.concat([Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==', 'base64'), randomBytes(pad)]);
/** A small PDF (sniffed application/pdf), unique per call. */
const pdf = () => Buffer.from(`%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n% ${hex(64)}\ntrailer << /Root 1 0 R >>\n%%EOF\n`);

let doubles: ProviderDoubles;
let mailDouble: MailProviderDouble;
let ctx: TestContext;
let forwarder: Server;
let publicBase: string;


beforeAll(async () => {
  doubles = await startProviderDoubles();
  mailDouble = suite.double = await startMailProviderDouble();
  doubles.addTwilioAccount(AC, TWILIO_TOKEN);
  doubles.addPostmarkServer(PM_TOKEN);
  doubles.addWhatsappNumber(WA_NUMBER, WA_KEY);
  doubles.addTelegramBot(TG_TOKEN);
  const port = await freePort();
  publicBase = `http://127.0.0.1:${port}`;
  ctx = await startTestApp({
    env: {
      ...providerEnv(),
      ...doublesEnv(doubles),
      PUBLIC_BASE_URL: publicBase,
      OUTBOUND_SEND_TIMEOUT_MS: '2000',
      OUTBOUND_RETRY_BASE_MS: '50',
    },
  });
  forwarder = await startForwarder(port, () => (ctx.server.address() as AddressInfo).port);
  await ctx.startWorkers();
  // No scheduled mailbox poll: the mailbox test polls when it means to.
  await ctx.runtime.queues.queue('mailbox').removeJobScheduler('mailbox-sweep');
});
afterAll(async () => {
  await ctx?.close();
  await stopForwarder(forwarder);
  await doubles?.close();
  await mailDouble?.close();
});
beforeEach(() => doubles.reset());

// ------------------------------------------------------------------------------------------------ helpers

interface Uploaded {
  upload_token: string;
  attachment: { id: string; name: string; content_type: string; size: number; sha256: string };
}

async function upload(ws: Workspace, bytes: Buffer, filename: string): Promise<Uploaded> {
  const res = await ctx.http.post('/v1/uploads').set(bearer(ws.ownerKey)).attach('file', bytes, { filename, contentType: 'application/octet-stream' });
  if (res.status !== 201) throw new Error(`upload: ${res.status} ${JSON.stringify(res.body)}`);
  expect(res.body.attachment.sha256).toBe(sha(bytes));
  return res.body as Uploaded;
}

const reply = (ws: Workspace, ticketId: string, body: string, attachments: string[]) =>
  ctx.http.post(`/v1/tickets/${ticketId}/replies`).set(bearer(ws.ownerKey)).send({ body, attachments });

async function replyOk(ws: Workspace, ticketId: string, body: string, attachments: string[]): Promise<string> {
  const res = await reply(ws, ticketId, body, attachments);
  if (res.status !== 201) throw new Error(`reply: ${res.status} ${JSON.stringify(res.body)}`);
  return (res.body.new_events as { id: string; kind: string }[]).find((e) => e.kind === 'reply')!.id;
}

const outboundRow = (tenantId: string, eventId: string) =>
  ctx.db.selectFrom('outbound_messages').selectAll().where('tenant_id', '=', tenantId).where('event_id', '=', eventId).executeTakeFirst();

async function settledIn(tenantId: string, eventId: string, states: string[]) {
  let last: string | undefined;
  return eventually(
    async () => {
      const row = await outboundRow(tenantId, eventId);
      last = row?.state;
      return row && states.includes(row.state) ? row : undefined;
    },
    15_000,
    `reply ${eventId} to be ${states.join('/')} (last ${last})`,
    25,
  );
}

/** A refused reply wrote nothing: no reply event, no outbox row, and the uploads are still unbound (usable again). */
async function nothingStored(ws: Workspace, ticketId: string, uploads: Uploaded[]) {
  const replies = await ctx.db.selectFrom('ticket_events').select('id').where('tenant_id', '=', ws.tenantId).where('ticket_id', '=', ticketId).where('kind', '=', 'reply').execute();
  expect(replies).toHaveLength(0);
  const rows = await ctx.db.selectFrom('outbound_messages').select('event_id').where('tenant_id', '=', ws.tenantId).where('ticket_id', '=', ticketId).execute();
  expect(rows).toHaveLength(0);
  const files = await ctx.db.selectFrom('attachments').select(['event_id', 'upload_token_hash']).where('tenant_id', '=', ws.tenantId).where('id', 'in', uploads.map((u) => u.attachment.id)).execute();
  expect(files).toHaveLength(uploads.length);
  for (const f of files) {
    expect(f.event_id).toBeNull();
    expect(f.upload_token_hash).not.toBeNull();
  }
}

// ---------------------------------------------------------------------------------------------------- email

describe('email through Postmark', () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    await connect(ctx, ws, 'email', { config: { inbound_address: 'support@files.test', server_token: PM_TOKEN, from_address: 'support@files.test' } });
  });
  async function emailTicket() {
    const customer = `cust.${hex(4)}@customer.test`;
    const res = await ingest(ctx, 'email', emailPayload({ from: customer, messageId: newEmailMessageId(), subject: 'Invoice please' }), ws.tenantId);
    expect(res.status).toBe(200);
    return { customer, ticketId: res.body.ticket_id as string };
  }

  test('the reply carries its files as Postmark Attachments (base64, sniffed type), byte for byte', async () => {
    const { customer, ticketId } = await emailTicket();
    const a = pdf();
    const b = png(100);
    const ua = await upload(ws, a, 'invoice.pdf');
    const ub = await upload(ws, b, 'photo.png');
    const eventId = await replyOk(ws, ticketId, 'Here is your invoice.', [ua.upload_token, ub.upload_token]);
    await settledIn(ws.tenantId, eventId, ['sent']);
    const sends = doubles.sends('postmark').filter((s) => s.body.To === customer);
    expect(sends).toHaveLength(1);
    expect(sends[0]!.answeredStatus).toBe(200);
    const att = sends[0]!.body.Attachments as { Name: string; Content: string; ContentType: string }[];
    expect(att.map((x) => [x.Name, x.ContentType, sha(Buffer.from(x.Content, 'base64'))])).toEqual([
      ['invoice.pdf', 'application/pdf', sha(a)],
      ['photo.png', 'image/png', sha(b)],
    ]);
    expect(sends[0]!.body.TextBody).toBe('Here is your invoice.');
  });

  test('files over Postmark\'s 10 MB per message are refused (422 attachment_not_sendable, naming them and the limit); nothing is stored', async () => {
    const { ticketId } = await emailTicket();
    const big = await upload(ws, randomBytes(6 * 1000 * 1000), 'scan-1.dat');
    const big2 = await upload(ws, randomBytes(5 * 1000 * 1000), 'scan-2.dat');
    const res = await reply(ws, ticketId, 'Scans attached.', [big.upload_token, big2.upload_token]);
    expect(res.status).toBe(422);
    expect(res.body.code).toBe('attachment_not_sendable');
    expect(res.body.detail).toMatch(/scan-1\.dat.*scan-2\.dat.*at most 10000000 bytes/);
    await nothingStored(ws, ticketId, [big, big2]);
    expect(doubles.sends('postmark')).toHaveLength(0);
    // The uploads are still the agent's to use: one of them alone fits.
    const eventId = await replyOk(ws, ticketId, 'The first scan.', [big.upload_token]);
    await settledIn(ws.tenantId, eventId, ['sent']);
  });

  test('a file type Postmark forbids (.exe) is refused before anything is stored', async () => {
    const { ticketId } = await emailTicket();
    const exe = await upload(ws, randomBytes(100), 'setup.exe');
    const res = await reply(ws, ticketId, 'The installer.', [exe.upload_token]);
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ code: 'attachment_not_sendable', detail: expect.stringMatching(/setup\.exe.*\.exe/) });
    await nothingStored(ws, ticketId, [exe]);
  });
});

describe.each(PROVIDERS)('email through the connected mailbox (%s): MIME attachments', (p) => {
  const h = mailboxHelpers(() => ctx);
  test('each file is a MIME attachment part (filename, sniffed type, base64) streamed from the store, byte for byte', async () => {
    const ws = await createWorkspace(ctx);
    const mailbox = (await h.connect(ws, p)).email;
    const mail = await h.emailTicket(ws, p, mailbox);
    const a = pdf();
    const b = png(4000);
    const ua = await upload(ws, a, 'receipt.pdf');
    const ub = await upload(ws, b, 'box.png');
    const eventId = await replyOk(ws, mail.ticketId, 'Receipt and photo attached.', [ua.upload_token, ub.upload_token]);
    await settledIn(ws.tenantId, eventId, ['sent']);
    const sent = mailDouble.sent(p, mailbox);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.text).toContain('Receipt and photo attached.');
    const raw = sent[0]!.raw;
    const part = (name: string) => {
      const at = raw.indexOf(`filename=${name}`) >= 0 ? raw.indexOf(`filename=${name}`) : raw.indexOf(`filename="${name}"`);
      expect(at).toBeGreaterThan(0);
      const start = raw.lastIndexOf('\r\n--', at);
      const head = raw.slice(start, raw.indexOf('\r\n\r\n', at));
      const body = raw.slice(raw.indexOf('\r\n\r\n', at) + 4, raw.indexOf('\r\n--', at));
      return { head, bytes: Buffer.from(body.replace(/\s+/g, ''), 'base64') };
    };
    const pa = part('receipt.pdf');
    expect(pa.head).toMatch(/Content-Type: application\/pdf/i);
    expect(pa.head).toMatch(/Content-Disposition: attachment/i);
    expect(sha(pa.bytes)).toBe(sha(a));
    const pb = part('box.png');
    expect(pb.head).toMatch(/Content-Type: image\/png/i);
    expect(sha(pb.bytes)).toBe(sha(b));
  });
});

// ------------------------------------------------------------------------------------------------------ SMS

describe('MMS through Twilio', () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    await connect(ctx, ws, 'sms', { config: { account_sid: AC, auth_token: TWILIO_TOKEN, phone_number: OUR_SMS } });
  });
  async function smsTicket() {
    const customer = `+1555${String(randomInt(0, 1e7)).padStart(7, '0')}`;
    const res = await ingest(ctx, 'sms', smsPayload({ from: customer, to: OUR_SMS, body: `Photo of parcel ${hex(3)}?` }), ws.tenantId);
    expect(res.status).toBe(200);
    return { customer, ticketId: res.body.ticket_id as string };
  }

  test('each file goes as a MediaUrl: a signed link to this service that Twilio (the double) fetches without credentials', async () => {
    const { customer, ticketId } = await smsTicket();
    const a = png(2000);
    const b = pdf();
    const ua = await upload(ws, a, 'parcel.png');
    const ub = await upload(ws, b, 'label.pdf');
    const eventId = await replyOk(ws, ticketId, 'Here it is.', [ua.upload_token, ub.upload_token]);
    await settledIn(ws.tenantId, eventId, ['sent']);
    const sends = doubles.sends('twilio').filter((s) => s.body.To === customer);
    expect(sends).toHaveLength(1);
    const urls = sends[0]!.body.MediaUrl as string[];
    expect(urls).toHaveLength(2);
    for (const u of urls) expect(u.startsWith(`${publicBase}/v1/files/`)).toBe(true);
    expect(sends[0]!.media!.map((m) => [m.status, m.contentType, m.sha256])).toEqual([
      [200, 'image/png', sha(a)],
      [200, 'application/pdf', sha(b)],
    ]);
    expect(sends[0]!.providerMessageId).toMatch(/^MM/);
  });

  test('more than 10 media files are refused before anything is stored', async () => {
    const { ticketId } = await smsTicket();
    const ups = [];
    for (let i = 0; i < 11; i++) ups.push(await upload(ws, png(i + 1), `p${i}.png`));
    const res = await reply(ws, ticketId, 'Photos.', ups.map((u) => u.upload_token));
    expect(res.status).toBe(422);
    expect(res.body).toMatchObject({ code: 'attachment_not_sendable' });
    expect(res.body.detail).toMatch(/p10\.png.*at most 10 media files/);
    await nothingStored(ws, ticketId, ups);
  });

  test('without PUBLIC_BASE_URL an SMS reply with files is refused, saying why', () => {
    let err: unknown;
    try {
      assertSendable('sms', [{ name: 'a.png', size: 10, content_type: 'image/png' }], {});
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).code).toBe('attachment_not_sendable');
    expect((err as DomainError).message).toMatch(/PUBLIC_BASE_URL/);
  });

  test('the signed link expires, cannot be altered, and cannot name another workspace\'s file', async () => {
    const other = await createWorkspace(ctx);
    const mine = await upload(ws, png(10), 'mine.png');
    const theirs = await upload(other, png(20), 'theirs.png');
    const files = ctx.services.files;
    const get = (token: string) => ctx.http.get(`/v1/files/${token}`);

    const ok = await get(files.signLink(ws.tenantId, mine.attachment.id, 60)).buffer(true);
    expect(ok.status).toBe(200);
    expect(ok.headers['x-content-type-options']).toBe('nosniff');
    expect(sha(ok.body as Buffer)).toBe(mine.attachment.sha256);

    // Expired.
    const expired = await get(files.signLink(ws.tenantId, mine.attachment.id, -1));
    expect(expired.status).toBe(404);
    expect(expired.body.code).toBe('file_link_invalid');
    // A validly signed link for this workspace naming the other workspace's file id finds nothing.
    expect((await get(files.signLink(ws.tenantId, theirs.attachment.id, 60))).status).toBe(404);
    // The payload altered to name the other workspace: the signature no longer matches.
    const good = files.signLink(ws.tenantId, mine.attachment.id, 60);
    const [payload, mac] = good.split('.');
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString()) as Record<string, unknown>;
    const forged = `${Buffer.from(JSON.stringify({ ...claims, t: other.tenantId, a: theirs.attachment.id })).toString('base64url')}.${mac}`;
    expect((await get(forged)).status).toBe(404);
    expect((await get(`${payload}.${Buffer.alloc(32).toString('base64url')}`)).status).toBe(404);
    expect((await get('garbage')).status).toBe(404);
  });
});

// ------------------------------------------------------------------------------------------------- WhatsApp

describe('WhatsApp media', () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    await connect(ctx, ws, 'whatsapp', { config: { phone_number_id: WA_NUMBER, api_key: WA_KEY, app_secret: 'meta-app-secret-files', verify_token: 'verify-me' } });
  });
  async function waTicket() {
    const waId = `1650${String(randomInt(0, 1e7)).padStart(7, '0')}`;
    const res = await ingest(ctx, 'whatsapp', whatsappPayload({ from: waId, phoneNumberId: WA_NUMBER, text: `Order ${hex(3)}?` }), ws.tenantId);
    expect(res.status).toBe(200);
    return { waId, ticketId: res.body.ticket_id as string };
  }

  test('each file is uploaded to /media (multipart, messaging_product=whatsapp) and sent as an image or document; the text is the first caption; each part is recorded', async () => {
    const { waId, ticketId } = await waTicket();
    const a = png(300);
    const b = pdf();
    const ua = await upload(ws, a, 'photo.png');
    const ub = await upload(ws, b, 'manual.pdf');
    const eventId = await replyOk(ws, ticketId, 'See attached.', [ua.upload_token, ub.upload_token]);
    const row = await settledIn(ws.tenantId, eventId, ['sent']);
    const sends = doubles.sends('whatsapp');
    const uploads = sends.filter((s) => s.path.endsWith('/media'));
    const messages = sends.filter((s) => s.path.endsWith('/messages') && s.body.to === waId);
    expect(uploads.map((u) => [u.body.messaging_product, u.files![0]!.filename, u.files![0]!.contentType, u.files![0]!.sha256])).toEqual([
      ['whatsapp', 'photo.png', 'image/png', sha(a)],
      ['whatsapp', 'manual.pdf', 'application/pdf', sha(b)],
    ]);
    expect(messages).toHaveLength(2);
    expect(messages[0]!.body).toMatchObject({ type: 'image', image: { id: uploads[0]!.providerMessageId, caption: 'See attached.' } });
    expect(messages[1]!.body).toMatchObject({ type: 'document', document: { id: uploads[1]!.providerMessageId, filename: 'manual.pdf' } });
    expect(messages[1]!.body.document).not.toHaveProperty('caption');
    expect(row.parts).toEqual([
      { index: 0, provider_message_id: messages[0]!.providerMessageId },
      { index: 1, provider_message_id: messages[1]!.providerMessageId },
    ]);
    expect(row.provider_message_id).toBe(messages[0]!.providerMessageId);
  });

  test('an image over 5 MB and a type WhatsApp does not take are refused before anything is stored', async () => {
    const { ticketId } = await waTicket();
    const big = await upload(ws, png(5 * 1000 * 1000), 'huge.png');
    let res = await reply(ws, ticketId, 'Photo.', [big.upload_token]);
    expect(res.status).toBe(422);
    expect(res.body.code).toBe('attachment_not_sendable');
    expect(res.body.detail).toMatch(/huge\.png.*image \(image\/png\) is at most 5000000 bytes/);
    const odd = await upload(ws, randomBytes(1000), 'data.bin');
    res = await reply(ws, ticketId, 'Data.', [odd.upload_token]);
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/data\.bin \(application\/octet-stream\)/);
    await nothingStored(ws, ticketId, [big, odd]);
  });
});

// ------------------------------------------------------------------------------------------------- Telegram

describe('Telegram sendDocument', () => {
  let ws: Workspace;
  let user = randomInt(1, 900_000) * 1000 + 6_100_000_000;
  beforeAll(async () => {
    ws = await createWorkspace(ctx);
    await connect(ctx, ws, 'telegram', { config: { bot_token: TG_TOKEN, secret_token: 'tg-secret' } });
  });
  async function tgTicket() {
    const chatId = (user += 1);
    const messageId = randomInt(1000, 900_000);
    const res = await ingest(ctx, 'telegram', telegramUpdate({ fromId: chatId, messageId, text: `Crash ${hex(3)}` }), ws.tenantId);
    expect(res.status).toBe(200);
    return { chatId, messageId, ticketId: res.body.ticket_id as string };
  }
  const sendsTo = (chatId: number) => doubles.sends('telegram').filter((s) => String(s.body.chat_id) === String(chatId));

  test('one file and a short text are ONE message: sendDocument (multipart upload) with the text as its caption, quoting the customer', async () => {
    const { chatId, messageId, ticketId } = await tgTicket();
    const a = pdf();
    const ua = await upload(ws, a, 'log.pdf');
    const eventId = await replyOk(ws, ticketId, 'Your crash log, annotated.', [ua.upload_token]);
    const row = await settledIn(ws.tenantId, eventId, ['sent']);
    const sends = sendsTo(chatId);
    expect(sends).toHaveLength(1);
    expect(sends[0]!.path).toBe(`/telegram/bot${TG_TOKEN}/sendDocument`);
    expect(sends[0]!.body).toMatchObject({ chat_id: String(chatId), caption: 'Your crash log, annotated.' });
    expect(JSON.parse(sends[0]!.body.reply_parameters as string)).toMatchObject({ message_id: messageId });
    expect(sends[0]!.files!.map((f) => [f.field, f.filename, f.contentType, f.sha256])).toEqual([['document', 'log.pdf', 'application/pdf', sha(a)]]);
    expect(row).toMatchObject({ state: 'sent', provider_message_id: sends[0]!.providerMessageId });
  });

  test('a text over 1024 characters goes first by sendMessage, then the file', async () => {
    const { chatId, ticketId } = await tgTicket();
    const text = 'Details follow. '.repeat(80);
    expect(text.length).toBeGreaterThan(1024);
    const a = png(50);
    const ua = await upload(ws, a, 'shot.png');
    const eventId = await replyOk(ws, ticketId, text, [ua.upload_token]);
    const row = await settledIn(ws.tenantId, eventId, ['sent']);
    const sends = sendsTo(chatId);
    expect(sends.map((s) => s.path.split('/').pop())).toEqual(['sendMessage', 'sendDocument']);
    expect((sends[0]!.body.text as string).length).toBeGreaterThan(1024);
    expect(sends[1]!.body).not.toHaveProperty('caption');
    expect(sends[1]!.files![0]!.sha256).toBe(sha(a));
    expect(row.parts).toHaveLength(2);
  });

  test('exactly once per part: when the second file fails (500), the retry sends only that file, never the acknowledged first', async () => {
    const { chatId, ticketId } = await tgTicket();
    const a = pdf();
    const b = png(70);
    const ua = await upload(ws, a, 'one.pdf');
    const ub = await upload(ws, b, 'two.png');
    doubles.failNext('telegram', { kind: 'server_error' }, 1, 1);
    const eventId = await replyOk(ws, ticketId, 'Two files.', [ua.upload_token, ub.upload_token]);
    const row = await settledIn(ws.tenantId, eventId, ['sent']);
    const sends = sendsTo(chatId);
    expect(sends.map((s) => [s.files![0]!.sha256, s.answeredStatus])).toEqual([
      [sha(a), 200],
      [sha(b), 500],
      [sha(b), 200],
    ]);
    expect(row.attempts).toBe(2);
    expect(row.parts.map((p) => p.index)).toEqual([0, 1]);
    expect(row.provider_message_id).toBe(sends[0]!.providerMessageId);
    // The deliveries list shows the parts the provider accepted, in order.
    const list = await ctx.http.get(`/v1/tickets/${ticketId}/deliveries`).set(bearer(ws.ownerKey)).expect(200);
    const listed = (list.body.deliveries as { reply_event_id: string; parts: { index: number; provider_message_id: string }[] }[]).find((d) => d.reply_event_id === eventId)!;
    expect(listed.parts).toEqual([
      { index: 0, provider_message_id: sends[0]!.providerMessageId },
      { index: 1, provider_message_id: sends[2]!.providerMessageId },
    ]);
  });

  test('exactly once per part: a part whose answer never came makes the reply unknown; the agent\'s retry sends only the parts not acknowledged', async () => {
    const { chatId, ticketId } = await tgTicket();
    const a = pdf();
    const b = png(80);
    const ua = await upload(ws, a, 'first.pdf');
    const ub = await upload(ws, b, 'second.png');
    doubles.failNext('telegram', { kind: 'hang' }, 1, 1);
    const eventId = await replyOk(ws, ticketId, 'Both files.', [ua.upload_token, ub.upload_token]);
    const unknown = await settledIn(ws.tenantId, eventId, ['unknown']);
    expect(unknown.parts.map((p) => p.index)).toEqual([0]);
    const res = await ctx.http.post(`/v1/tickets/${ticketId}/deliveries/${eventId}/retry`).set(bearer(ws.ownerKey)).send();
    expect(res.status).toBe(202);
    await settledIn(ws.tenantId, eventId, ['sent']);
    const shas = sendsTo(chatId).map((s) => s.files![0]!.sha256);
    expect(shas.filter((h) => h === sha(a))).toHaveLength(1);
    expect(shas.filter((h) => h === sha(b))).toHaveLength(2);
  });
});
