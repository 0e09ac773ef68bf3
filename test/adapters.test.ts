import { emailAdapter, htmlToText } from '../src/domains/channels/adapters/email';
import { smsAdapter } from '../src/domains/channels/adapters/sms';
import { telegramAdapter } from '../src/domains/channels/adapters/telegram';
import type { ChannelAdapter, InboundMessage, ParseResult } from '../src/domains/channels/adapters/types';
import { webChatAdapter } from '../src/domains/channels/adapters/web-chat';
import { whatsappAdapter } from '../src/domains/channels/adapters/whatsapp';
import {
  emailPayload,
  newEmailMessageId,
  newWamid,
  normaliseMessageId,
  smsPayload,
  telegramUpdate,
  webChatPayload,
  whatsappMessage,
  whatsappPayload,
  whatsappStatus,
} from './helpers/payloads';

/** Pure unit tests of the channel adapters: provider payload in, inbound messages out. No database. */

function messagesOf(result: ParseResult): InboundMessage[] {
  if (!result.ok) throw new Error(`expected ok, got refusal: ${result.reason}`);
  return result.messages;
}
function only(result: ParseResult): InboundMessage {
  const messages = messagesOf(result);
  expect(messages).toHaveLength(1);
  return messages[0]!;
}
function reasonOf(result: ParseResult): string {
  if (result.ok) throw new Error(`expected a refusal, got ${JSON.stringify(result.messages)}`);
  expect(result.reason.length).toBeGreaterThan(10);
  return result.reason;
}
const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

describe('email adapter (Postmark inbound)', () => {
  test('a new email: sender, subject, body, RFC Message-ID as the dedupe key, date', () => {
    const p = emailPayload({
      from: 'Ada.Lovelace@Customer.TEST',
      fromName: 'Ada Lovelace',
      messageId: 'CAF=abc123+XYZ@mail.gmail.com',
      subject: 'Where is my order?',
      text: 'Hello, order #1042 has not arrived.',
      date: 'Fri, 1 Aug 2025 16:45:32 -0400',
    });
    const m = only(emailAdapter.parse(p));
    expect(m).toEqual({
      providerMessageId: 'caf=abc123+xyz@mail.gmail.com',
      messageIdHeader: 'caf=abc123+xyz@mail.gmail.com',
      // Matching ignores case; our reply quotes the id exactly as the sender wrote it.
      messageIdAsWritten: 'CAF=abc123+XYZ@mail.gmail.com',
      sender: { handle: 'ada.lovelace@customer.test', email: 'ada.lovelace@customer.test', name: 'Ada Lovelace' },
      subject: 'Where is my order?',
      body: 'Hello, order #1042 has not arrived.',
      sentAt: '2025-08-01T20:45:32.000Z',
    });
    expect(m.inReplyTo).toBeUndefined();
    expect(m.mailboxHash).toBeUndefined();
    expect(m.conversationKey).toBeUndefined();
  });

  test('a reply: In-Reply-To first, then References, brackets removed, lower-cased, de-duplicated', () => {
    const first = newEmailMessageId();
    const second = 'Reply-2@Helpdesk.TEST';
    const p = emailPayload({
      inReplyTo: second,
      references: [first, second],
      strippedReply: 'Thanks, it arrived today.',
      text: 'Thanks, it arrived today.\n\nOn Mon, Support wrote:\n> Your parcel is on its way',
    });
    const m = only(emailAdapter.parse(p));
    expect(m.inReplyTo).toEqual(['reply-2@helpdesk.test', normaliseMessageId(first)]);
    expect(m.body).toBe('Thanks, it arrived today.'); // StrippedTextReply wins over TextBody
    expect(m.subject).toBe('Re: Where is my order?');
  });

  test('References folded over several lines, written without brackets or with commas, still parse', () => {
    const p = emailPayload({
      headers: [
        { Name: 'in-reply-to', Value: '<B@x.test>' },
        { Name: 'REFERENCES', Value: '<a@x.test>\r\n\t<b@x.test>   <C@x.test>' },
      ],
    });
    expect(only(emailAdapter.parse(p)).inReplyTo).toEqual(['b@x.test', 'a@x.test', 'c@x.test']);
    const bare = emailPayload({ headers: [{ Name: 'References', Value: 'a@x.test, b@x.test' }] });
    expect(only(emailAdapter.parse(bare)).inReplyTo).toEqual(['a@x.test', 'b@x.test']);
  });

  test('the message never lists its own Message-ID among the ids it replies to', () => {
    const own = newEmailMessageId();
    const p = emailPayload({ messageId: own, references: [own, 'parent@x.test'] });
    expect(only(emailAdapter.parse(p)).inReplyTo).toEqual(['parent@x.test']);
  });

  test('the Message-ID header name is matched case-insensitively', () => {
    const p = emailPayload({ messageId: null, headers: [{ Name: 'message-id', Value: '  <MiXeD@Host.test>  ' }] });
    const m = only(emailAdapter.parse(p));
    expect(m.providerMessageId).toBe('mixed@host.test');
    expect(m.messageIdHeader).toBe('mixed@host.test');
  });

  test('without a Message-ID header the Postmark MessageID is the dedupe key and messageIdHeader is absent', () => {
    const p = emailPayload({ messageId: null, postmarkId: '22c74902-a0c1-4511-804f-341342852c90' });
    const m = only(emailAdapter.parse(p));
    expect(m.providerMessageId).toBe('22c74902-a0c1-4511-804f-341342852c90');
    expect(m.messageIdHeader).toBeUndefined();
  });

  test('a redelivery gives the same providerMessageId; so does the same mail reaching us twice under two Postmark ids', () => {
    const p = emailPayload();
    const again = clone(p);
    expect(only(emailAdapter.parse(again)).providerMessageId).toBe(only(emailAdapter.parse(p)).providerMessageId);
    const otherCopy = { ...clone(p), MessageID: 'another-postmark-id' };
    expect(only(emailAdapter.parse(otherCopy)).providerMessageId).toBe(only(emailAdapter.parse(p)).providerMessageId);
  });

  test('each builder call has a fresh Message-ID', () => {
    expect(only(emailAdapter.parse(emailPayload())).providerMessageId).not.toBe(only(emailAdapter.parse(emailPayload())).providerMessageId);
  });

  test('mailbox hash: top-level MailboxHash, else the +part of the first To address; never the sender’s', () => {
    expect(only(emailAdapter.parse(emailPayload({ mailboxHash: 'TCK-7F3A' }))).mailboxHash).toBe('TCK-7F3A');
    const noTopLevel = { ...emailPayload({ to: 'support+tck-9@helpdesk.test' }), MailboxHash: '' };
    noTopLevel.ToFull = [{ Email: 'support+tck-9@helpdesk.test', Name: '', MailboxHash: '' }];
    expect(only(emailAdapter.parse(noTopLevel)).mailboxHash).toBe('tck-9');
    const senderHash = emailPayload({ from: 'ada+shop@customer.test' });
    senderHash.FromFull.MailboxHash = 'shop';
    expect(only(emailAdapter.parse(senderHash)).mailboxHash).toBeUndefined();
  });

  test('sender: FromFull.Email preferred, From accepted alone (even as "Name <addr>"), name from FromName', () => {
    const p: Record<string, unknown> = { ...emailPayload(), FromFull: undefined, From: 'Bob Builder <BOB@Example.test>', FromName: 'Bob B.' };
    const m = only(emailAdapter.parse(p));
    expect(m.sender).toEqual({ handle: 'bob@example.test', email: 'bob@example.test', name: 'Bob B.' });
  });

  test('HTML-only mail becomes readable text: tags, scripts and styles gone, entities decoded', () => {
    const p = emailPayload({
      text: '',
      html: '<html><head><style>p{color:red}</style><title>x</title></head><body><p>Hello&nbsp;team,</p><script>alert(1)</script><div>Order <b>#1042</b> &amp; &#8364;20<br>thanks</div><!-- tracking --></body></html>',
    });
    expect(only(emailAdapter.parse(p)).body).toBe('Hello team,\nOrder #1042 & €20\nthanks');
  });

  test('HTML stripping stays fast on hostile input', () => {
    const started = Date.now();
    htmlToText('<script'.repeat(50_000) + '<!--'.repeat(50_000) + '<'.repeat(100_000));
    expect(Date.now() - started).toBeLessThan(1000);
  });

  test('HTML to text reads tokens, not regexes: deep nesting, stray "<", unclosed script and entities all come out readable', () => {
    expect(htmlToText('<div>'.repeat(50_000) + 'deep text' + '</div>'.repeat(50_000))).toBe('deep text');
    expect(htmlToText('a < b and 3<4, <<< arrows')).toBe('a < b and 3<4, <<< arrows');
    expect(htmlToText('<p>kept</p><script>gone(')).toBe('kept');
    expect(htmlToText('<P>One</P><BR/>Two&nbsp;&nbsp;three &lt;4&gt; &eacute;<HEAD><title>x</title></HEAD>')).toBe('One\n\nTwo three <4> é');
  });

  test('an over-long Message-ID header is ignored (not stored as a key): the message keys on Postmark\'s MessageID', () => {
    const p = emailPayload({ messageId: null, postmarkId: 'pm-1' });
    p.Headers.push({ Name: 'Message-ID', Value: `<${'a'.repeat(1000)}@x.test>` });
    const m = only(emailAdapter.parse(p));
    expect(m.providerMessageId).toBe('pm-1');
    expect(m.messageIdHeader).toBeUndefined();
  });

  test('In-Reply-To and References keep at most 100 ids, none longer than 998 characters', () => {
    const refs = Array.from({ length: 300 }, (_, i) => `<r${i}@x.test>`).join(' ');
    const p = emailPayload({ headers: [{ Name: 'References', Value: `<${'b'.repeat(999)}@x.test> ${refs}` }] });
    const m = only(emailAdapter.parse(p));
    expect(m.inReplyTo).toHaveLength(100);
    expect(m.inReplyTo![0]).toBe('r0@x.test');
  });

  test('an over-long Postmark MessageID is ignored like an over-long header id', () => {
    const p = emailPayload({ postmarkId: 'p'.repeat(257) });
    expect(only(emailAdapter.parse(p)).providerMessageId).not.toContain('ppp');
    const none = emailPayload({ messageId: null, postmarkId: 'p'.repeat(257) });
    expect(emailAdapter.parse(none)).toEqual({ ok: false, reason: expect.stringMatching(/no message id/) });
  });

  test('a sender address longer than 254 characters is no address', () => {
    const p: Record<string, unknown> = { ...emailPayload(), FromFull: undefined, From: `${'a'.repeat(250)}@customer.test` };
    expect(emailAdapter.parse(p)).toEqual({ ok: false, reason: expect.stringMatching(/no sender address/) });
  });

  test('an email with only attachments gets a placeholder body; an unreadable Date gives no sentAt', () => {
    const p = emailPayload({
      text: '',
      html: '',
      date: 'sometime last week',
      attachments: [{ Name: 'invoice.pdf', Content: 'JVBERi0=', ContentType: 'application/pdf', ContentLength: 5 }],
    });
    const m = only(emailAdapter.parse(p));
    expect(m.body).toBe('[1 attachment: invoice.pdf]');
    expect(m.sentAt).toBeUndefined();
  });

  test.each([
    ['null', null, /must be a JSON object.*got null/],
    ['an array', [emailPayload()], /must be a JSON object.*got an array/],
    ['a string', 'From: ada@customer.test', /must be a JSON object.*got a string/],
    ['no sender', { ...emailPayload(), From: '', FromFull: { Email: '', Name: '', MailboxHash: '' } }, /no sender address/],
    ['a sender that is not an address', { ...emailPayload(), From: 'Ada', FromFull: { Email: 'Ada', Name: 'Ada', MailboxHash: '' } }, /no sender address/],
    ['no message id at all', { ...emailPayload({ messageId: null }), MessageID: '' }, /no message id/],
    ['Headers that are not a list', { ...emailPayload(), Headers: 'Message-ID: <x@y>' }, /Headers/],
    ['a Subject that is not text', { ...emailPayload(), Subject: 42 }, /Subject/],
  ])('refuses %s with a reason', (_name, payload, reason) => {
    expect(reasonOf(emailAdapter.parse(payload))).toMatch(reason);
  });
});

describe('provider ids and handles are bounded (they become primary-key values)', () => {
  test('sms: a MessageSid, From or To over 256 characters is refused', () => {
    for (const field of ['MessageSid', 'From', 'To']) {
      const res = smsAdapter.parse({ ...smsPayload(), [field]: 'x'.repeat(257) });
      expect(res).toEqual({ ok: false, reason: expect.stringContaining(`${field} is longer than 256 characters`) });
    }
  });

  test('whatsapp: a message id or sender over 256 characters is refused', () => {
    expect(whatsappAdapter.parse(whatsappPayload({ id: 'w'.repeat(257) })).ok).toBe(false);
    expect(whatsappAdapter.parse(whatsappPayload({ from: '1'.repeat(257) })).ok).toBe(false);
    expect(whatsappAdapter.parse(whatsappPayload({ id: 'w'.repeat(256) })).ok).toBe(true);
  });
});

describe('sms adapter (Twilio fields)', () => {
  test('a new text: MessageSid as the dedupe key, From as handle, From|To as the conversation', () => {
    const p = smsPayload({ from: '+14155550123', to: '+15550001111', body: 'Can I change my address?' });
    expect(only(smsAdapter.parse(p))).toEqual({
      providerMessageId: p.MessageSid,
      sender: { handle: '+14155550123' },
      conversationKey: '+14155550123|+15550001111',
      body: 'Can I change my address?',
    });
  });

  test('a follow-up from the same number to the same number has the same conversation key and its own id', () => {
    const a = only(smsAdapter.parse(smsPayload({ body: 'first' })));
    const b = only(smsAdapter.parse(smsPayload({ body: 'second' })));
    expect(b.conversationKey).toBe(a.conversationKey);
    expect(b.providerMessageId).not.toBe(a.providerMessageId);
    const otherLine = only(smsAdapter.parse(smsPayload({ to: '+15550002222' })));
    expect(otherLine.conversationKey).not.toBe(a.conversationKey);
  });

  test('a redelivery gives the same providerMessageId', () => {
    const p = smsPayload();
    expect(only(smsAdapter.parse(clone(p))).providerMessageId).toBe(only(smsAdapter.parse(p)).providerMessageId);
  });

  test('MMS with an empty body: a media placeholder; each MediaUrl is a file the worker fetches (issue 34)', () => {
    const urls = ['https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1', 'https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME2'];
    const m = only(smsAdapter.parse(smsPayload({ body: '', media: urls })));
    expect(m.body).toBe('[2 media attachments: image/jpeg]');
    expect(m.files).toEqual(urls.map((url, i) => ({ name: `media-${i + 1}.jpg`, declaredType: 'image/jpeg', source: { kind: 'twilio', url } })));
  });

  test('MMS with text keeps the text and says what came after it; NumMedia may be a number', () => {
    const p = { ...smsPayload({ body: 'Photo of the damage', media: ['https://media.test/1.jpg'] }), NumMedia: 1 };
    const m = only(smsAdapter.parse(p));
    expect(m.body).toBe('Photo of the damage\n[1 media attachment: image/jpeg]');
    // The adapter lists it whatever the host: the worker refuses a MediaUrl off Twilio's hosts, saying so.
    expect(m.files).toEqual([{ name: 'media-1.jpg', declaredType: 'image/jpeg', source: { kind: 'twilio', url: 'https://media.test/1.jpg' } }]);
  });

  test('NumMedia beyond the MediaUrls given still lists each file (its fetch fails saying no MediaUrl was named)', () => {
    const p = { ...smsPayload({ body: 'two photos' }), NumMedia: '2', MediaUrl0: 'https://api.twilio.com/x/Media/ME1' };
    expect(only(smsAdapter.parse(p)).files?.map((f) => f.source)).toEqual([
      { kind: 'twilio', url: 'https://api.twilio.com/x/Media/ME1' },
      { kind: 'twilio', url: '' },
    ]);
  });

  test('AccountSid is optional', () => {
    const { AccountSid: _drop, ...p } = smsPayload();
    expect(messagesOf(smsAdapter.parse(p))).toHaveLength(1);
  });

  test.each([
    ['not an object', 'Body=hi', /must be a JSON object/],
    ['no MessageSid', { ...smsPayload(), MessageSid: undefined }, /MessageSid is required/],
    ['an empty MessageSid', { ...smsPayload(), MessageSid: '  ' }, /MessageSid is empty/],
    ['no From', { ...smsPayload(), From: undefined }, /From is required/],
    ['no To', { ...smsPayload(), To: undefined }, /To is required/],
    ['an empty body and no media', smsPayload({ body: '' }), /empty Body and no media/],
    ['a NumMedia that is not a number', { ...smsPayload(), NumMedia: 'two' }, /NumMedia/],
  ])('refuses %s with a reason', (_name, payload, reason) => {
    expect(reasonOf(smsAdapter.parse(payload))).toMatch(reason);
  });
});

describe('whatsapp adapter (Cloud API)', () => {
  test('a text message: wamid, wa_id, contact name, phone_number_id|from, unix timestamp', () => {
    const id = newWamid();
    const p = whatsappPayload({ id, from: '16505551234', name: 'Grace Hopper', text: 'Is my order shipped?', timestamp: 1_735_725_600, phoneNumberId: '106540352242922' });
    expect(only(whatsappAdapter.parse(p))).toEqual({
      providerMessageId: id,
      sender: { handle: '16505551234', name: 'Grace Hopper' },
      conversationKey: '106540352242922|16505551234',
      body: 'Is my order shipped?',
      sentAt: '2025-01-01T10:00:00.000Z',
    });
  });

  test('a reply with context threads by conversation key and keeps its own id', () => {
    const first = only(whatsappAdapter.parse(whatsappPayload()));
    const reply = only(whatsappAdapter.parse(whatsappPayload({ contextId: newWamid(), text: 'Thanks, that was quick' })));
    expect(reply.conversationKey).toBe(first.conversationKey);
    expect(reply.providerMessageId).not.toBe(first.providerMessageId);
    expect(reply.body).toBe('Thanks, that was quick');
    expect(reply.inReplyTo).toBeUndefined(); // inReplyTo is email-only (types.ts); chat threads by conversationKey
  });

  test('a redelivery gives the same providerMessageId', () => {
    const p = whatsappPayload();
    expect(only(whatsappAdapter.parse(clone(p))).providerMessageId).toBe(only(whatsappAdapter.parse(p)).providerMessageId);
  });

  test('several messages in one POST, from two customers, give one inbound message each; receipts alongside give none', () => {
    const a1 = whatsappMessage({ from: '4915112345678', text: 'Hallo' });
    const a2 = whatsappMessage({ from: '4915112345678', text: 'Noch da?' });
    const b1 = whatsappMessage({ from: '447700900123', text: 'Hi there' });
    const p = whatsappPayload({
      messages: [a1, a2, b1],
      names: { '4915112345678': 'Klaus', '447700900123': 'Jane' },
      statuses: [whatsappStatus({ status: 'read' })],
    });
    const out = messagesOf(whatsappAdapter.parse(p));
    expect(out.map((m) => [m.providerMessageId, m.sender.handle, m.sender.name, m.body])).toEqual([
      [a1.id, '4915112345678', 'Klaus', 'Hallo'],
      [a2.id, '4915112345678', 'Klaus', 'Noch da?'],
      [b1.id, '447700900123', 'Jane', 'Hi there'],
    ]);
    expect(new Set(out.map((m) => m.conversationKey)).size).toBe(2);
  });

  test('messages spread over several entries and changes are all read; a duplicate id in one POST counts once', () => {
    const m1 = whatsappMessage();
    const m2 = whatsappMessage();
    const p1 = whatsappPayload({ messages: [m1, m1] });
    const p2 = whatsappPayload({ messages: [m2] });
    const merged = { object: 'whatsapp_business_account', entry: [...p1.entry, ...p2.entry] };
    expect(messagesOf(whatsappAdapter.parse(merged)).map((m) => m.providerMessageId)).toEqual([m1.id, m2.id]);
  });

  test('a statuses-only POST (delivery receipts) is valid and carries no messages', () => {
    const p = whatsappPayload({ statuses: [whatsappStatus({ status: 'sent' }), whatsappStatus({ status: 'delivered' })] });
    expect(whatsappAdapter.parse(p)).toEqual({ ok: true, messages: [] });
  });

  test('changes of other fields (e.g. template status updates) are ignored', () => {
    const p = { object: 'whatsapp_business_account', entry: [{ id: '1', changes: [{ field: 'message_template_status_update', value: { event: 'APPROVED' } }] }] };
    expect(whatsappAdapter.parse(p)).toEqual({ ok: true, messages: [] });
  });

  test.each([
    ['image', { caption: 'Broken lid', mime_type: 'image/jpeg', id: '1' }, '[image] Broken lid'],
    ['image', { mime_type: 'image/jpeg', id: '1' }, '[image]'],
    ['document', { filename: 'invoice.pdf', caption: 'See attached', id: '2' }, '[document: invoice.pdf] See attached'],
    ['audio', { id: '3', voice: true }, '[audio]'],
    ['location', { latitude: 52.52, longitude: 13.405, name: 'Shop', address: 'Main St 1' }, '[location] Shop, Main St 1 (52.52, 13.405)'],
    ['interactive', { type: 'button_reply', button_reply: { id: 'yes', title: 'Yes, cancel it' } }, '[interactive] Yes, cancel it'],
    ['contacts', [{ name: { formatted_name: 'Bob Smith' } }], '[contacts] Bob Smith'],
    ['brand_new_type', { anything: true }, '[brand_new_type]'],
  ])('a %s message gets a readable placeholder body', (type, content, body) => {
    const p = whatsappPayload({ messages: [whatsappMessage({ type, content: content as Record<string, unknown> })] });
    expect(only(whatsappAdapter.parse(p)).body).toBe(body);
  });

  test.each([
    ['not an object', [1, 2], /must be a JSON object/],
    ['another object kind', { ...whatsappPayload(), object: 'page' }, /object must be "whatsapp_business_account" \("page"\)/],
    ['no object', { entry: whatsappPayload().entry }, /object must be "whatsapp_business_account" \(missing\)/],
    ['no entry array', { object: 'whatsapp_business_account' }, /entry/],
    ['an entry that is not an array', { object: 'whatsapp_business_account', entry: {} }, /entry/],
    [
      'a message without an id',
      whatsappPayload({ messages: [{ ...whatsappMessage(), id: undefined } as never] }),
      /entry\.0\.changes\.0\.value: messages\.0\.id: Invalid input/,
    ],
    [
      'messages without metadata.phone_number_id',
      (() => {
        const p = whatsappPayload();
        delete (p.entry[0]!.changes[0]!.value as Record<string, unknown>).metadata;
        return p;
      })(),
      /phone_number_id/,
    ],
  ])('refuses %s with a reason', (_name, payload, reason) => {
    expect(reasonOf(whatsappAdapter.parse(payload))).toMatch(reason);
  });
});

describe('telegram adapter (Bot API Update)', () => {
  test('a new message: chat.id:message_id as id, from.id as handle, full name, chat.id as conversation, date', () => {
    const u = telegramUpdate({ fromId: 7_000_000_001, messageId: 55, text: 'The app logs me out', date: 1_735_725_600 });
    expect(only(telegramAdapter.parse(u))).toEqual({
      providerMessageId: '7000000001:55',
      sender: { handle: '7000000001', name: 'Alan Turing' },
      conversationKey: '7000000001',
      body: 'The app logs me out',
      sentAt: '2025-01-01T10:00:00.000Z',
    });
  });

  test('name falls back to the username when there is only a blank first name', () => {
    const u = telegramUpdate({ firstName: ' ', lastName: null, username: 'aturing' });
    expect(only(telegramAdapter.parse(u)).sender.name).toBe('aturing');
    expect(only(telegramAdapter.parse(telegramUpdate({ lastName: null, username: null }))).sender.name).toBe('Alan');
  });

  test('a reply (reply_to_message) is one message in the same conversation, with its own id', () => {
    const first = only(telegramAdapter.parse(telegramUpdate({ messageId: 100 })));
    const reply = only(telegramAdapter.parse(telegramUpdate({ messageId: 102, replyTo: { messageId: 101 }, text: 'Version 3.2' })));
    expect(reply.conversationKey).toBe(first.conversationKey);
    expect(reply.providerMessageId).toBe(`${first.conversationKey}:102`);
    expect(reply.body).toBe('Version 3.2');
  });

  test('a redelivery gives the same providerMessageId, even under another update_id', () => {
    const u = telegramUpdate();
    const id = only(telegramAdapter.parse(u)).providerMessageId;
    expect(only(telegramAdapter.parse(clone(u))).providerMessageId).toBe(id);
    expect(only(telegramAdapter.parse({ ...clone(u), update_id: u.update_id + 1000 })).providerMessageId).toBe(id);
  });

  test('message ids are per chat: the same message_id in two chats are two messages', () => {
    const a = only(telegramAdapter.parse(telegramUpdate({ fromId: 1, messageId: 7 })));
    const b = only(telegramAdapter.parse(telegramUpdate({ fromId: 2, messageId: 7 })));
    expect(a.providerMessageId).not.toBe(b.providerMessageId);
  });

  test('in a group the conversation is the group chat and the handle the member', () => {
    const m = only(telegramAdapter.parse(telegramUpdate({ chatId: -1001234567890, fromId: 42, messageId: 9 })));
    expect(m.conversationKey).toBe('-1001234567890');
    expect(m.sender.handle).toBe('42');
    expect(m.providerMessageId).toBe('-1001234567890:9');
  });

  test.each([
    ['edited_message', telegramUpdate({ kind: 'edited_message', text: 'typo fixed' })],
    ['channel_post', telegramUpdate({ kind: 'channel_post', chatId: -100777, chatType: 'channel' })],
    ['callback_query', { update_id: 10, callback_query: { id: '1', from: { id: 1, is_bot: false, first_name: 'A' }, data: 'x' } }],
    ['a service message (member joined)', telegramUpdate({ text: null, extra: { new_chat_members: [{ id: 5, is_bot: false, first_name: 'B' }] } })],
  ])('%s is valid and carries no new message', (_name, payload) => {
    expect(telegramAdapter.parse(payload)).toEqual({ ok: true, messages: [] });
  });

  test.each([
    ['photo with caption', { photo: [{ file_id: 'a', width: 90, height: 90 }], caption: 'Screenshot of the error' }, '[photo] Screenshot of the error'],
    ['photo', { photo: [{ file_id: 'a', width: 90, height: 90 }] }, '[photo]'],
    ['animation (which also carries document)', { animation: { file_id: 'g' }, document: { file_id: 'g' } }, '[animation]'],
    ['voice', { voice: { file_id: 'v', duration: 3 } }, '[voice]'],
    ['venue (which also carries location)', { venue: { title: 'Shop' }, location: { latitude: 1, longitude: 2 } }, '[venue: Shop]'],
    ['sticker', { sticker: { file_id: 's', emoji: '😀' } }, '[sticker]'],
    ['something new', { brand_new_thing: {} }, '[unsupported message]'],
  ])('a %s message gets a body', (_name, extra, body) => {
    expect(only(telegramAdapter.parse(telegramUpdate({ text: null, extra }))).body).toBe(body);
  });

  test.each([
    ['not an object', 42, /must be a JSON object.*got a number/],
    ['no update_id', { message: telegramUpdate().message }, /update_id is required/],
    ['a string update_id', { ...telegramUpdate(), update_id: '12' }, /update_id must be a number/],
    ['a message without chat', { update_id: 1, message: { message_id: 1, date: 1, text: 'x' } }, /message\.chat/],
    ['a message_id that is not a number', { update_id: 1, message: { message_id: 'x', chat: { id: 1, type: 'private' }, date: 1 } }, /message\.message_id/],
  ])('refuses %s with a reason', (_name, payload, reason) => {
    expect(reasonOf(telegramAdapter.parse(payload))).toMatch(reason);
  });
});

describe('web_chat adapter (our widget format)', () => {
  test('a message: message_id as id, visitor as handle and conversation, email lower-cased, name, sent_at normalised', () => {
    const p = webChatPayload({ visitorId: 'v_1', messageId: 'm_1', text: '  Do you ship to Canada?  ', sentAt: '2025-01-31T10:30:00+01:00', email: 'Ada@Customer.TEST', name: 'Ada' });
    expect(only(webChatAdapter.parse(p))).toEqual({
      providerMessageId: 'm_1',
      sender: { handle: 'v_1', email: 'ada@customer.test', name: 'Ada' },
      conversationKey: 'v_1',
      body: 'Do you ship to Canada?',
      sentAt: '2025-01-31T09:30:00.000Z',
    });
  });

  test('email and name are optional; an empty email counts as none; unknown fields are ignored', () => {
    const m = only(webChatAdapter.parse({ ...webChatPayload(), email: '', name: '', page_url: 'https://shop.test/cart' }));
    expect(m.sender.email).toBeUndefined();
    expect(m.sender.name).toBeUndefined();
  });

  test('a redelivery gives the same providerMessageId; each builder call a new one', () => {
    const p = webChatPayload();
    expect(only(webChatAdapter.parse(clone(p))).providerMessageId).toBe(p.message_id);
    expect(webChatPayload().message_id).not.toBe(p.message_id);
  });

  test.each([
    ['not an object', undefined, /must be a JSON object.*got nothing/],
    ['no visitor_id', { ...webChatPayload(), visitor_id: undefined }, /visitor_id is required/],
    ['a blank visitor_id', { ...webChatPayload(), visitor_id: '   ' }, /visitor_id must not be empty/],
    ['a visitor_id over 200 characters', webChatPayload({ visitorId: 'v'.repeat(201) }), /visitor_id must be at most 200/],
    ['no message_id', { ...webChatPayload(), message_id: undefined }, /message_id is required/],
    ['a blank text', webChatPayload({ text: ' \n ' }), /text must not be empty/],
    ['a text over 65536 characters', webChatPayload({ text: 'x'.repeat(65537) }), /text must be at most 65536/],
    ['a sent_at that is not ISO', webChatPayload({ sentAt: 'yesterday' }), /sent_at must be an ISO 8601 date-time/],
    ['a malformed email', webChatPayload({ email: 'not-an-email' }), /email must be an email address/],
  ])('refuses %s with a reason', (_name, payload, reason) => {
    expect(reasonOf(webChatAdapter.parse(payload))).toMatch(reason);
  });

  test('text of exactly 65536 characters is accepted', () => {
    expect(only(webChatAdapter.parse(webChatPayload({ text: 'x'.repeat(65536) }))).body).toHaveLength(65536);
  });
});

describe('every adapter refuses the other providers’ payloads', () => {
  const samples: Record<string, () => unknown> = {
    email: () => emailPayload(),
    sms: () => smsPayload(),
    whatsapp: () => whatsappPayload(),
    telegram: () => telegramUpdate(),
    web_chat: () => webChatPayload(),
  };
  const adapters: Record<string, ChannelAdapter> = {
    email: emailAdapter,
    sms: smsAdapter,
    whatsapp: whatsappAdapter,
    telegram: telegramAdapter,
    web_chat: webChatAdapter,
  };
  const pairs = Object.keys(adapters).flatMap((a) => Object.keys(samples).map((s) => [a, s] as const));

  test.each(pairs.filter(([a, s]) => a === s))('%s accepts its own sample', (a, s) => {
    expect(messagesOf(adapters[a]!.parse(samples[s]!()))).toHaveLength(1);
  });

  test.each(pairs.filter(([a, s]) => a !== s))('the %s adapter refuses a %s payload', (a, s) => {
    expect(reasonOf(adapters[a]!.parse(samples[s]!()))).toMatch(new RegExp(`^${a} payload`));
  });

  test('no adapter throws on junk', () => {
    const junk: unknown[] = [undefined, null, 0, NaN, '', 'x', true, [], {}, { entry: null }, { update_id: 1, message: null },
      { object: 'whatsapp_business_account', entry: [null] }, { object: 'whatsapp_business_account', entry: [{ changes: [{ field: 'messages', value: null }] }] },
      { Headers: [null, 1, { Name: 1 }], From: 'a@b.c', MessageID: 'x' }, { MessageSid: 'S', From: 'a', To: 'b', NumMedia: '3' }];
    for (const adapter of Object.values(adapters)) {
      for (const payload of junk) {
        const r = adapter.parse(payload);
        expect(typeof r.ok).toBe('boolean');
      }
    }
  });
});

describe('the files a message carries (issue 34): listed with how to get them, every one, never fetched here', () => {
  test('email: every attachment by position, inline images with their Content-ID (brackets dropped), declared type and size', () => {
    const p = emailPayload({
      attachments: [
        { Name: 'a.pdf', Content: 'JVBERi0=', ContentType: 'application/pdf', ContentLength: 5 },
        { Name: 'logo.png', Content: 'iVBORw==', ContentType: 'image/png; name=logo.png', ContentLength: '4', ContentID: '<logo@01D9>' },
        'not an object',
        { Content: 'QQ==', ContentType: 'not a type' },
      ] as never,
    });
    expect(only(emailAdapter.parse(p)).files).toEqual([
      { name: 'a.pdf', declaredType: 'application/pdf', size: 5, source: { kind: 'postmark', index: 0 } },
      { name: 'logo.png', declaredType: 'image/png', size: 4, contentId: 'logo@01D9', source: { kind: 'postmark', index: 1 } },
      { name: 'unnamed', source: { kind: 'postmark', index: 2 } },
      { name: 'unnamed', source: { kind: 'postmark', index: 3 } },
    ]);
    // The body keeps its short marker, so text readers see files came.
    expect(only(emailAdapter.parse(p)).body).toContain('[4 attachments: a.pdf, logo.png, unnamed, unnamed]');
  });

  test('email without attachments lists no files', () => {
    expect(only(emailAdapter.parse(emailPayload())).files).toBeUndefined();
  });

  test.each([
    ['image', { mime_type: 'image/jpeg', id: '11' }, { name: 'image.jpg', declaredType: 'image/jpeg', source: { kind: 'whatsapp', mediaId: '11' } }],
    ['document', { filename: 'q.pdf', mime_type: 'application/pdf', id: '12' }, { name: 'q.pdf', declaredType: 'application/pdf', source: { kind: 'whatsapp', mediaId: '12' } }],
    ['audio', { mime_type: 'audio/ogg; codecs=opus', id: '13', voice: true }, { name: 'audio.ogg', declaredType: 'audio/ogg', source: { kind: 'whatsapp', mediaId: '13' } }],
    ['sticker', { mime_type: 'image/webp', id: '14' }, { name: 'sticker.webp', declaredType: 'image/webp', source: { kind: 'whatsapp', mediaId: '14' } }],
    ['video', { caption: 'no id' }, { name: 'video', source: { kind: 'whatsapp', mediaId: '' } }],
  ])('whatsapp %s: its media id', (type, content, file) => {
    expect(only(whatsappAdapter.parse(whatsappPayload({ type, content }))).files).toEqual([file]);
  });

  test('whatsapp text, location and reactions carry no file', () => {
    expect(only(whatsappAdapter.parse(whatsappPayload())).files).toBeUndefined();
    expect(only(whatsappAdapter.parse(whatsappPayload({ type: 'location', content: { latitude: 1, longitude: 2 } }))).files).toBeUndefined();
  });

  test('telegram: a photo by its largest size (file_size, else pixels); one file per message', () => {
    const photo = [
      { file_id: 'small', width: 90, height: 90, file_size: 900 },
      { file_id: 'big', width: 1280, height: 960, file_size: 90_000 },
      { file_id: 'mid', width: 320, height: 320, file_size: 9_000 },
    ];
    expect(only(telegramAdapter.parse(telegramUpdate({ text: null, extra: { photo } }))).files).toEqual([
      { name: 'photo.jpg', declaredType: 'image/jpeg', size: 90_000, source: { kind: 'telegram', fileId: 'big' } },
    ]);
    const unsized = [{ file_id: 'a', width: 90, height: 90 }, { file_id: 'b', width: 800, height: 600 }, { file_id: 'c', width: 320, height: 240 }];
    expect(only(telegramAdapter.parse(telegramUpdate({ text: null, extra: { photo: unsized } }))).files?.[0]?.source).toEqual({ kind: 'telegram', fileId: 'b' });
    // An animation also carries `document`: one file, the animation.
    const anim = only(telegramAdapter.parse(telegramUpdate({ text: null, extra: { animation: { file_id: 'g', file_name: 'fun.mp4', mime_type: 'video/mp4' }, document: { file_id: 'g' } } })));
    expect(anim.files).toEqual([{ name: 'fun.mp4', declaredType: 'video/mp4', source: { kind: 'telegram', fileId: 'g' } }]);
    expect(only(telegramAdapter.parse(telegramUpdate({ text: null, extra: { sticker: { file_id: 's', is_animated: true } } }))).files?.[0]).toMatchObject({ name: 'sticker.tgs', declaredType: 'application/x-tgsticker' });
    expect(only(telegramAdapter.parse(telegramUpdate({ text: null, extra: { venue: { title: 'Shop' }, location: { latitude: 1, longitude: 2 } } }))).files).toBeUndefined();
    expect(only(telegramAdapter.parse(telegramUpdate())).files).toBeUndefined();
  });
});
