/**
 * The channel adapters against the providers' own documented payloads (test/fixtures/<provider>/, each
 * file's source in that folder's SOURCES.md): (a) each fixture through the adapter's parse, (b) through the
 * real ingest route with workers: ticket, subject, customer, threading, dedupe, ignored non-messages.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { emailAdapter } from '../src/domains/channels/adapters/email';
import { smsAdapter } from '../src/domains/channels/adapters/sms';
import { telegramAdapter } from '../src/domains/channels/adapters/telegram';
import type { ChannelAdapter, InboundMessage } from '../src/domains/channels/adapters/types';
import { whatsappAdapter } from '../src/domains/channels/adapters/whatsapp';
import { createWorkspace, type Workspace } from './helpers/factories';
import { connect, countRows, ingest, ticketDetail, type RowCounts } from './helpers/ingest';
import { useTestApp } from './helpers/use-test-app';

type Json = Record<string, unknown>;
const fixture = (provider: string, name: string): Json => JSON.parse(readFileSync(join(__dirname, 'fixtures', provider, `${name}.json`), 'utf8')) as Json;
const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;
const iso = (unix: number) => new Date(unix * 1000).toISOString();

function parsed(adapter: ChannelAdapter, payload: unknown): InboundMessage[] {
  const r = adapter.parse(payload);
  if (!r.ok) throw new Error(`refused: ${r.reason}`);
  return r.messages;
}

// ------------------------------------------------------------------------------------------ (a) parse

describe('Postmark inbound webhook (documented example)', () => {
  test('the documented example is a reply (it carries a MailboxHash): the stripped reply, the attachment named, the sender and date read', () => {
    expect(parsed(emailAdapter, fixture('postmark', 'inbound-webhook'))).toEqual([
      {
        providerMessageId: '73e6d360-66eb-11e1-8e72-a8904824019b',
        sender: { handle: 'support@postmarkapp.com', email: 'support@postmarkapp.com', name: 'Postmarkapp Support' },
        mailboxHash: 'SampleHash',
        subject: 'Test subject',
        body: 'This is the reply text\n\n[1 attachment: test.txt]',
        sentAt: '2014-08-01T20:45:32.000Z',
        // The part itself, by its position: the edge stages its base64 for the worker (issue 34).
        files: [{ name: 'test.txt', declaredType: 'text/plain', size: 45, source: { kind: 'postmark', index: 0 } }],
      },
    ]);
  });

  test('the same email sent fresh (no hash, no In-Reply-To) keeps its whole text rather than the reply-parsed part', () => {
    const p = fixture('postmark', 'inbound-webhook');
    p.MailboxHash = '';
    p.ToFull = [{ Email: 'yourhash@inbound.postmarkapp.com', Name: 'Support', MailboxHash: '' }];
    const [m] = parsed(emailAdapter, p);
    expect(m!.body).toBe('This is a test text body.\n\n[1 attachment: test.txt]');
    expect(m!.mailboxHash).toBeUndefined();
  });

  test('a hash carried only by a Cc recipient (reply-all) is still the ticket reference', () => {
    const p = fixture('postmark', 'inbound-webhook');
    p.MailboxHash = '';
    p.ToFull = [{ Email: 'someone@example.test', Name: '', MailboxHash: '' }];
    p.CcFull = [{ Email: 'yourhash+SampleHash@inbound.postmarkapp.com', Name: '', MailboxHash: 'SampleHash' }];
    expect(parsed(emailAdapter, p)[0]!.mailboxHash).toBe('SampleHash');
  });
});

describe('Twilio messaging webhook (documented parameters)', () => {
  test('an incoming SMS: MessageSid, From as the customer, From|To as the conversation', () => {
    expect(parsed(smsAdapter, fixture('twilio', 'sms-inbound'))).toEqual([
      {
        providerMessageId: 'SM1234567890abcdef1234567890abcdef',
        sender: { handle: '+14017122661' },
        conversationKey: '+14017122661|+15558675310',
        body: "Ahoy! We can't wait to see what you build.",
      },
    ]);
  });

  test('an MMS without text says what kind of media came; the MediaUrl is a file the worker fetches, not text', () => {
    const p = fixture('twilio', 'mms-inbound');
    const [m] = parsed(smsAdapter, p);
    expect(m!.body).toBe('[1 media attachment: image/jpeg]');
    expect(m!.files).toEqual([{ name: 'media-1.jpg', declaredType: 'image/jpeg', source: { kind: 'twilio', url: String(p.MediaUrl0) } }]);
  });

  test('WhatsApp over Twilio names the customer by ProfileName', () => {
    expect(parsed(smsAdapter, fixture('twilio', 'whatsapp-inbound'))).toEqual([
      {
        providerMessageId: 'SM0123456789abcdef0123456789abcdef',
        sender: { handle: 'whatsapp:+14017122661', name: 'Jane Doe' },
        conversationKey: 'whatsapp:+14017122661|whatsapp:+15558675310',
        body: 'Hello! Where is my order?',
      },
    ]);
  });

  test.each([['opt-out-stop'], ['status-callback-delivered']])('%s carries no customer message (accepted, nothing to ingest)', (name) => {
    expect(smsAdapter.parse(fixture('twilio', name))).toEqual({ ok: true, messages: [] });
  });
});

const WA_PNID = '106540352242922';
const WA_USER = '16505551234';

/** The media file each sample carries: its name, declared type and media id. */
const WA_FILES: Record<string, [string, string, string]> = {
  image: ['image.jpg', 'image/jpeg', '1003383421387256'],
  document: ['invoice-4521.pdf', 'application/pdf', '1003383421387257'],
  audio: ['audio.ogg', 'audio/ogg', '1003383421387258'],
  video: ['video.mp4', 'video/mp4', '1003383421387259'],
  sticker: ['sticker.webp', 'image/webp', '1003383421387260'],
};

describe('WhatsApp Cloud API messages webhook (reference samples)', () => {
  test.each([
    ['text', 'Does it come in another color?'],
    ['text-reply-context', 'Yes, please send the blue one.'],
    ['image', '[image] Is this the right cable?'],
    ['document', '[document: invoice-4521.pdf] Here is the invoice'],
    ['audio', '[audio]'],
    ['video', '[video] Look at the noise it makes'],
    ['sticker', '[sticker]'],
    ['location', '[location] Meta Headquarters, 1 Hacker Way, Menlo Park, CA 94025 (37.483253479003906, -122.14960479736328)'],
    ['contacts', '[contacts] Barbara J. Johnson'],
    ['interactive-button-reply', '[interactive] Cancel my order'],
    ['interactive-list-reply', '[interactive] Express shipping'],
    ['button', '[button] Unsubscribe from Promos'],
    ['order', '[order: 2 items] Please ship quickly'],
    ['unsupported', '[unsupported message]'],
  ])('%s is a customer message with a readable body', (name, body) => {
    const p = fixture('whatsapp', name);
    const m = (((p.entry as Json[])[0]!.changes as Json[])[0]!.value as { messages: Array<{ id: string }> }).messages[0]!;
    // Media messages carry their file by media id (issue 34), named by the document's filename or by its kind.
    const media = WA_FILES[name];
    expect(parsed(whatsappAdapter, p)).toEqual([
      {
        providerMessageId: m.id,
        sender: { handle: WA_USER, name: 'Sheena Nelson' },
        conversationKey: `${WA_PNID}|${WA_USER}`,
        body,
        sentAt: iso(1739321024),
        ...(media ? { files: [{ name: media[0], declaredType: media[1], source: { kind: 'whatsapp', mediaId: media[2] } }] } : {}),
      },
    ]);
  });

  test.each([['reaction'], ['system-user-changed-number'], ['status-delivered'], ['errors'], ['template-status-update']])(
    '%s is not a customer message (accepted, nothing to ingest)',
    (name) => {
      expect(whatsappAdapter.parse(fixture('whatsapp', name))).toEqual({ ok: true, messages: [] });
    },
  );

  test('several messages in one POST: each its own message, named by its own contact', () => {
    const ms = parsed(whatsappAdapter, fixture('whatsapp', 'multiple-messages'));
    expect(ms.map((m) => [m.sender.handle, m.sender.name, m.body])).toEqual([
      [WA_USER, 'Sheena Nelson', 'Hi, my order did not arrive.'],
      ['16505559876', 'Pablo Morales', 'Hello, I need to change my address.'],
    ]);
  });

  test('a message in a group belongs to the group conversation, not to the member\'s own chat', () => {
    const p = fixture('whatsapp', 'text');
    const value = ((p.entry as Json[])[0]!.changes as Json[])[0]!.value as { messages: Json[] };
    value.messages[0]!.group_id = 'Y2FwaV9ncm91cDoxNjUwNTU1MTIzNDpHcm91cA';
    expect(parsed(whatsappAdapter, p)[0]).toMatchObject({ sender: { handle: WA_USER }, conversationKey: `${WA_PNID}|group:Y2FwaV9ncm91cDoxNjUwNTU1MTIzNDpHcm91cA` });
  });

  test('a user known only by business-scoped id (no phone number) is still the sender', () => {
    const [m] = parsed(whatsappAdapter, fixture('whatsapp', 'text-bsuid-without-phone'));
    expect(m).toMatchObject({
      sender: { handle: 'US.13491208655302741918', name: 'Sheena Nelson' },
      conversationKey: `${WA_PNID}|US.13491208655302741918`,
      body: 'Hello from my username account',
    });
  });
});

const TG_BASE = { providerMessageId: '1111111:1365', sender: { handle: '1111111', name: 'Test Firstname Test Lastname' }, conversationKey: '1111111', sentAt: iso(1441645532) };

/** The file each example carries (issue 34): a photo by its largest size. */
const TG_FILES: Record<string, object> = {
  'message-audio': { name: 'audio.mp3', declaredType: 'audio/mpeg', size: 3897500, source: { kind: 'telegram', fileId: 'AwADBAADbXXXXXXXXXXXGBdhD2l6_XX' } },
  'message-voice': { name: 'voice.ogg', declaredType: 'audio/ogg', size: 23000, source: { kind: 'telegram', fileId: 'AwADBAADbXXXXXXXXXXXGBdhD2l6_XX' } },
  'message-document': { name: 'Testfile.pdf', declaredType: 'application/pdf', size: 536392, source: { kind: 'telegram', fileId: 'AwADBAADbXXXXXXXXXXXGBdhD2l6_XX' } },
  'message-photo-caption': { name: 'photo.jpg', declaredType: 'image/jpeg', size: 23456, source: { kind: 'telegram', fileId: 'AgACAgIAAxkBAAIBXXXXXXXXXXX_m' } },
};

describe('Telegram Bot API updates (webhook guide examples)', () => {
  test.each([
    ['message-text', '/start'],
    ['message-forwarded', '/start'],
    ['message-forwarded-channel', '/start'],
    ['message-reply', '/start'],
    ['message-entities', 'Bold and italics'],
    ['message-audio', '[audio: Test music file]'],
    ['message-voice', '[voice]'],
    ['message-document', '[document: Testfile.pdf]'],
    ['message-photo-caption', '[photo] Screenshot of the error'],
  ])('%s is a customer message', (name, body) => {
    const file = TG_FILES[name];
    expect(parsed(telegramAdapter, fixture('telegram', name))).toEqual([{ ...TG_BASE, body, ...(file ? { files: [file] } : {}) }]);
  });

  test.each([['edited-message'], ['inline-query'], ['chosen-inline-result'], ['callback-query'], ['my-chat-member-blocked']])(
    '%s is not a new customer message (accepted, nothing to ingest)',
    (name) => {
      expect(telegramAdapter.parse(fixture('telegram', name))).toEqual({ ok: true, messages: [] });
    },
  );
});

// ------------------------------------------------------------------------------------- (b) the route

const { ctx } = useTestApp({ workers: true });

/** A fresh workspace per provider: the documented examples reuse their ids, and dedupe is per workspace. */
async function workspaceWith(channel: string): Promise<Workspace> {
  const ws = await createWorkspace(ctx);
  await connect(ctx, ws, channel);
  return ws;
}

interface Accepted {
  channel: string;
  ticket_id: string;
  customer_id: string;
  was_created: boolean;
  was_duplicate: boolean;
}
async function accepted(ws: Workspace, channel: string, payload: unknown): Promise<Accepted> {
  const res = await ingest(ctx, channel, payload, ws.tenantId);
  if (res.status !== 200 || res.body.ignored) throw new Error(`ingest ${channel}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as Accepted;
}

const diff = (after: RowCounts, before: RowCounts) => Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - before[k as keyof RowCounts]]));

async function expectIgnored(ws: Workspace, channel: string, payload: unknown) {
  const before = await countRows(ctx);
  const res = await ingest(ctx, channel, payload, ws.tenantId);
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ channel, ignored: true });
  expect(res.body).not.toHaveProperty('ticket_id');
  expect(Object.values(diff(await countRows(ctx), before)).every((n) => n === 0)).toBe(true);
}

async function expectDuplicate(ws: Workspace, channel: string, payload: unknown, ticketId: string) {
  const before = await countRows(ctx, ws.tenantId);
  const again = await accepted(ws, channel, payload);
  expect(again).toMatchObject({ ticket_id: ticketId, was_created: false, was_duplicate: true });
  expect(diff(await countRows(ctx, ws.tenantId), before)).toMatchObject({ tickets: 0, ticket_events: 0, ingest_deliveries: 0 });
}

test('Postmark: the documented email becomes a ticket from its sender; a redelivery is a duplicate; a reply by In-Reply-To joins it', async () => {
  const ws = await workspaceWith('email');
  // The documented example has no Message-ID header; a real one does, and replies point at it.
  const first = fixture('postmark', 'inbound-webhook');
  (first.Headers as Json[]).push({ Name: 'Message-ID', Value: '<CAFirst0001@mail.postmarkapp.com>' });
  const r = await accepted(ws, 'email', first);
  expect(r.was_created).toBe(true);
  const t = await ticketDetail(ctx, ws, r.ticket_id);
  expect(t).toMatchObject({ source: 'email', subject: 'Test subject', customer_name: 'Postmarkapp Support', customer_email: 'support@postmarkapp.com' });
  expect(t.events.map((e) => e.body)).toEqual(['This is the reply text\n\n[1 attachment: test.txt]']);

  await expectDuplicate(ws, 'email', clone(first), r.ticket_id);

  const reply = fixture('postmark', 'inbound-webhook');
  reply.MessageID = '0b8a1c2e-66eb-11e1-8e72-a8904824019b';
  reply.Subject = 'RE: Test subject';
  reply.StrippedTextReply = 'Thanks, that fixed it.';
  (reply.Headers as Json[]).push({ Name: 'Message-ID', Value: '<CASecond0002@mail.postmarkapp.com>' }, { Name: 'In-Reply-To', Value: '<CAFirst0001@mail.postmarkapp.com>' });
  const r2 = await accepted(ws, 'email', reply);
  expect(r2).toMatchObject({ ticket_id: r.ticket_id, customer_id: r.customer_id, was_created: false });
  expect((await ticketDetail(ctx, ws, r.ticket_id)).events.map((e) => e.body)).toContain('Thanks, that fixed it.\n\n[1 attachment: test.txt]');
});

test('Twilio: an SMS becomes a ticket, an MMS from the same number threads into it, redelivery is a duplicate; status callbacks and STOP write nothing', async () => {
  const ws = await workspaceWith('sms');
  const r = await accepted(ws, 'sms', fixture('twilio', 'sms-inbound'));
  const t = await ticketDetail(ctx, ws, r.ticket_id);
  expect(t).toMatchObject({ source: 'sms', subject: "Ahoy! We can't wait to see what you build.", customer_name: '+14017122661' });

  const mms = await accepted(ws, 'sms', fixture('twilio', 'mms-inbound'));
  expect(mms).toMatchObject({ ticket_id: r.ticket_id, was_created: false, was_duplicate: false });
  await expectDuplicate(ws, 'sms', fixture('twilio', 'sms-inbound'), r.ticket_id);

  await expectIgnored(ws, 'sms', fixture('twilio', 'status-callback-delivered'));
  await expectIgnored(ws, 'sms', fixture('twilio', 'opt-out-stop'));

  const wa = await accepted(ws, 'sms', fixture('twilio', 'whatsapp-inbound'));
  expect((await ticketDetail(ctx, ws, wa.ticket_id)).customer_name).toBe('Jane Doe');
});

test('WhatsApp: a text becomes a ticket, a reply with context joins the conversation, redelivery is a duplicate; reactions, system notices, receipts and errors write nothing', async () => {
  const ws = await workspaceWith('whatsapp');
  const r = await accepted(ws, 'whatsapp', fixture('whatsapp', 'text'));
  expect(await ticketDetail(ctx, ws, r.ticket_id)).toMatchObject({ source: 'whatsapp', subject: 'Does it come in another color?', customer_name: 'Sheena Nelson' });

  const reply = await accepted(ws, 'whatsapp', fixture('whatsapp', 'text-reply-context'));
  expect(reply).toMatchObject({ ticket_id: r.ticket_id, customer_id: r.customer_id, was_created: false });
  await expectDuplicate(ws, 'whatsapp', fixture('whatsapp', 'text'), r.ticket_id);

  for (const name of ['reaction', 'system-user-changed-number', 'status-delivered', 'errors', 'template-status-update']) {
    await expectIgnored(ws, 'whatsapp', fixture('whatsapp', name));
  }
  expect((await ticketDetail(ctx, ws, r.ticket_id)).events.map((e) => e.body)).toEqual(['Does it come in another color?', 'Yes, please send the blue one.']);

  const bsuid = await accepted(ws, 'whatsapp', fixture('whatsapp', 'text-bsuid-without-phone'));
  expect(bsuid.was_created).toBe(true);
  expect((await ticketDetail(ctx, ws, bsuid.ticket_id)).customer_name).toBe('Sheena Nelson');
});

test('Telegram: a message becomes a ticket, a reply and a document in the same chat join it (the file named), redelivery is a duplicate; edits, queries and membership updates write nothing', async () => {
  const ws = await workspaceWith('telegram');
  const r = await accepted(ws, 'telegram', fixture('telegram', 'message-text'));
  expect(await ticketDetail(ctx, ws, r.ticket_id)).toMatchObject({ source: 'telegram', subject: '/start', customer_name: 'Test Firstname Test Lastname' });

  // The guide's examples all reuse message_id 1365; the reply gets the next id, as a real chat would.
  const replyUpdate = fixture('telegram', 'message-reply');
  (replyUpdate.message as Json).message_id = 1366;
  (replyUpdate.message as Json).text = 'It still logs me out';
  const reply = await accepted(ws, 'telegram', replyUpdate);
  expect(reply).toMatchObject({ ticket_id: r.ticket_id, was_created: false, was_duplicate: false });
  await expectDuplicate(ws, 'telegram', fixture('telegram', 'message-text'), r.ticket_id);

  const documentUpdate = fixture('telegram', 'message-document');
  (documentUpdate.message as Json).message_id = 1367;
  expect(await accepted(ws, 'telegram', documentUpdate)).toMatchObject({ ticket_id: r.ticket_id, was_created: false });

  for (const name of ['edited-message', 'inline-query', 'chosen-inline-result', 'callback-query', 'my-chat-member-blocked']) {
    await expectIgnored(ws, 'telegram', fixture('telegram', name));
  }
  expect((await ticketDetail(ctx, ws, r.ticket_id)).events.map((e) => e.body)).toEqual(['/start', 'It still logs me out', '[document: Testfile.pdf]']);
});
