import { randomBytes, randomInt } from 'node:crypto';

/**
 * Sample provider payloads, shaped like what each provider posts (POST /v1/ingest/{channel} carries them
 * verbatim). Every call gets a fresh, unique message id unless one is passed; the sender defaults to the
 * same customer on every call, so pass `from` (or visitorId / fromId) for a second customer. To thread,
 * reuse the sender (chat channels) or pass the earlier Message-ID as inReplyTo / references (email).
 */

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
// Telegram ids are integers: a per-process counter from a random start keeps them unique across calls.
let telegramSeq = randomInt(1, 1_000_000) * 1000;
const nextTelegramInt = () => ++telegramSeq;
const unixNow = () => Math.floor(Date.now() / 1000);

// ---------------------------------------------------------------------------------------------- email

export interface PostmarkAddress {
  Email: string;
  Name: string;
  MailboxHash: string;
}
export interface PostmarkHeader {
  Name: string;
  Value: string;
}
export interface PostmarkInbound {
  From: string;
  FromName: string;
  FromFull: PostmarkAddress;
  To: string;
  ToFull: PostmarkAddress[];
  Cc: string;
  CcFull: PostmarkAddress[];
  OriginalRecipient: string;
  ReplyTo: string;
  Subject: string;
  Date: string;
  MessageID: string;
  MailboxHash: string;
  MessageStream: string;
  TextBody: string;
  HtmlBody: string;
  StrippedTextReply: string;
  Tag: string;
  Headers: PostmarkHeader[];
  Attachments: Array<{ Name: string; Content: string; ContentType: string; ContentLength: number }>;
}

export interface EmailOptions {
  from?: string;
  fromName?: string;
  /** Inbound address the mail was sent to; default support@helpdesk.test (with +mailboxHash if given). */
  to?: string;
  /** Plus-address hash: sets MailboxHash and the +part of To. */
  mailboxHash?: string;
  subject?: string;
  text?: string;
  html?: string;
  strippedReply?: string;
  /** RFC Message-ID, with or without angle brackets; default a fresh one; null = no Message-ID header. */
  messageId?: string | null;
  /** Postmark's own MessageID (a uuid-like id); default a fresh one. */
  postmarkId?: string;
  inReplyTo?: string;
  references?: string[];
  /** RFC 2822 date; default now. */
  date?: string;
  /** Extra headers, appended after the generated ones. */
  headers?: PostmarkHeader[];
  attachments?: PostmarkInbound['Attachments'];
}

const bracket = (id: string) => (id.startsWith('<') ? id : `<${id}>`);

/** A fresh RFC Message-ID (without brackets), as a mail client would make it. */
export const newEmailMessageId = () => `${hex(8)}.${Date.now()}@mail.customer.test`;

/** The normalised id the email adapter uses as providerMessageId / messageIdHeader for such an id. */
export const normaliseMessageId = (id: string) => id.trim().replace(/^<|>$/g, '').toLowerCase();

/** A Postmark inbound message: a new email by default, a reply when inReplyTo / references are given. */
export function emailPayload(o: EmailOptions = {}): PostmarkInbound {
  const from = o.from ?? 'ada.lovelace@customer.test';
  const fromName = o.fromName ?? 'Ada Lovelace';
  const hash = o.mailboxHash ?? '';
  const to = o.to ?? (hash ? `support+${hash}@helpdesk.test` : 'support@helpdesk.test');
  const headers: PostmarkHeader[] = [
    { Name: 'Return-Path', Value: `<${from}>` },
    { Name: 'X-Spam-Status', Value: 'No' },
  ];
  const messageId = o.messageId === undefined ? newEmailMessageId() : o.messageId;
  if (messageId !== null) headers.push({ Name: 'Message-ID', Value: bracket(messageId) });
  if (o.inReplyTo) headers.push({ Name: 'In-Reply-To', Value: bracket(o.inReplyTo) });
  if (o.references?.length) headers.push({ Name: 'References', Value: o.references.map(bracket).join('\r\n ') });
  headers.push(...(o.headers ?? []));
  const text = o.text ?? 'Hello, my order #1042 has not arrived yet. Can you help?';
  return {
    From: from,
    FromName: fromName,
    FromFull: { Email: from, Name: fromName, MailboxHash: '' },
    To: to,
    ToFull: [{ Email: to, Name: 'Support', MailboxHash: hash }],
    Cc: '',
    CcFull: [],
    OriginalRecipient: to,
    ReplyTo: '',
    Subject: o.subject ?? (o.inReplyTo ? 'Re: Where is my order?' : 'Where is my order?'),
    Date: o.date ?? new Date().toUTCString().replace('GMT', '+0000'),
    MessageID: o.postmarkId ?? `${hex(4)}-${hex(2)}-${hex(2)}-${hex(2)}-${hex(6)}`,
    MailboxHash: hash,
    MessageStream: 'inbound',
    TextBody: text,
    HtmlBody: o.html ?? `<html><body><p>${text}</p></body></html>`,
    StrippedTextReply: o.strippedReply ?? '',
    Tag: '',
    Headers: headers,
    Attachments: o.attachments ?? [],
  };
}

// ------------------------------------------------------------------------------------------------ sms

export interface SmsOptions {
  sid?: string;
  accountSid?: string;
  from?: string;
  to?: string;
  body?: string;
  /** Media URLs: sets NumMedia and MediaUrl0… / MediaContentType0…. */
  media?: string[];
}

export const newSmsSid = (media = false) => `${media ? 'MM' : 'SM'}${hex(16)}`;

/** Twilio's webhook form fields as the relay posts them: a JSON object of strings. */
export function smsPayload(o: SmsOptions = {}): Record<string, string> {
  const media = o.media ?? [];
  const sid = o.sid ?? newSmsSid(media.length > 0);
  const fields: Record<string, string> = {
    ToCountry: 'US',
    SmsMessageSid: sid,
    NumMedia: String(media.length),
    SmsSid: sid,
    SmsStatus: 'received',
    Body: o.body ?? 'Hi, I need to change my delivery address.',
    To: o.to ?? '+15550001111',
    NumSegments: '1',
    MessageSid: sid,
    AccountSid: o.accountSid ?? `AC${'0'.repeat(32)}`,
    From: o.from ?? '+15557654321',
    ApiVersion: '2010-04-01',
  };
  media.forEach((url, i) => {
    fields[`MediaUrl${i}`] = url;
    fields[`MediaContentType${i}`] = 'image/jpeg';
  });
  return fields;
}

// ------------------------------------------------------------------------------------------- whatsapp

export interface WhatsappMessage {
  from: string;
  id: string;
  timestamp: string;
  type: string;
  text?: { body: string };
  context?: { from: string; id: string };
  [key: string]: unknown;
}

export interface WhatsappMessageOptions {
  id?: string;
  from?: string;
  text?: string;
  /** Unix seconds; default now. */
  timestamp?: number;
  /** wamid of the message this one replies to (WhatsApp "context"). */
  contextId?: string;
  /** Non-text messages: type plus its object, e.g. { type: 'image', image: { caption: 'x', id: '1' } }. */
  type?: string;
  content?: Record<string, unknown>;
}

export const newWamid = () => `wamid.HBgL${randomBytes(24).toString('base64url')}`;
const WA_BUSINESS_NUMBER = '15550009999';
const WA_PHONE_NUMBER_ID = '106540352242922';
const WA_DEFAULT_FROM = '16505551234';

export function whatsappMessage(o: WhatsappMessageOptions = {}): WhatsappMessage {
  const type = o.type ?? 'text';
  const m: WhatsappMessage = {
    from: o.from ?? WA_DEFAULT_FROM,
    id: o.id ?? newWamid(),
    timestamp: String(o.timestamp ?? unixNow()),
    type,
  };
  if (o.contextId) m.context = { from: WA_BUSINESS_NUMBER, id: o.contextId };
  if (type === 'text') m.text = { body: o.text ?? 'Hello! Is my order shipped yet?' };
  else m[type] = o.content ?? {};
  return m;
}

export function whatsappStatus(o: { id?: string; status?: 'sent' | 'delivered' | 'read' | 'failed'; recipient?: string } = {}) {
  return {
    id: o.id ?? newWamid(),
    status: o.status ?? 'delivered',
    timestamp: String(unixNow()),
    recipient_id: o.recipient ?? WA_DEFAULT_FROM,
  };
}

export interface WhatsappOptions extends WhatsappMessageOptions {
  /** Several messages in one POST; default one built from the single-message options. */
  messages?: WhatsappMessage[];
  statuses?: ReturnType<typeof whatsappStatus>[];
  phoneNumberId?: string;
  /** Profile name of the (single) sender; with `messages`, names by wa_id. */
  name?: string;
  names?: Record<string, string>;
}

/** A Cloud API webhook POST with one "messages" change. */
export function whatsappPayload(o: WhatsappOptions = {}) {
  const messages = o.messages ?? (o.statuses ? [] : [whatsappMessage(o)]);
  const senders = [...new Set(messages.map((m) => m.from))];
  const value: Record<string, unknown> = {
    messaging_product: 'whatsapp',
    metadata: { display_phone_number: WA_BUSINESS_NUMBER, phone_number_id: o.phoneNumberId ?? WA_PHONE_NUMBER_ID },
  };
  if (senders.length > 0) {
    value.contacts = senders.map((wa) => ({ profile: { name: o.names?.[wa] ?? o.name ?? 'Grace Hopper' }, wa_id: wa }));
    value.messages = messages;
  }
  if (o.statuses) value.statuses = o.statuses;
  return {
    object: 'whatsapp_business_account',
    entry: [{ id: '102290129340398', changes: [{ value, field: 'messages' }] }],
  };
}

// ------------------------------------------------------------------------------------------- telegram

export interface TelegramOptions {
  updateId?: number;
  messageId?: number;
  /** Default: the sender's id (a private chat). Groups have negative ids. */
  chatId?: number;
  chatType?: 'private' | 'group' | 'supergroup' | 'channel';
  fromId?: number;
  firstName?: string;
  /** null = none (Telegram omits the field). */
  lastName?: string | null;
  username?: string | null;
  /** null = no text (media messages: pass the media in `extra`). */
  text?: string | null;
  /** Unix seconds; default now. */
  date?: number;
  /** The message replied to (Telegram embeds it). */
  replyTo?: { messageId: number; text?: string; fromId?: number };
  /** Which update field carries the message; default "message". */
  kind?: 'message' | 'edited_message' | 'channel_post' | 'edited_channel_post';
  /** Extra message fields, e.g. { photo: [...], caption: '…' }. */
  extra?: Record<string, unknown>;
}

export const newTelegramMessageId = nextTelegramInt;

/** A Bot API Update as Telegram posts it to a webhook. */
export function telegramUpdate(o: TelegramOptions = {}) {
  const fromId = o.fromId ?? 7_000_000_001;
  const chatId = o.chatId ?? fromId;
  const from = {
    id: fromId,
    is_bot: false,
    first_name: o.firstName ?? 'Alan',
    ...(o.lastName === null ? {} : { last_name: o.lastName ?? 'Turing' }),
    ...(o.username === null ? {} : { username: o.username ?? 'aturing' }),
    language_code: 'en',
  };
  const chat =
    (o.chatType ?? (chatId < 0 ? 'supergroup' : 'private')) === 'private'
      ? { id: chatId, type: 'private', first_name: from.first_name, username: from.username }
      : { id: chatId, type: o.chatType ?? 'supergroup', title: 'Customers' };
  const message: Record<string, unknown> = {
    message_id: o.messageId ?? nextTelegramInt(),
    from,
    chat,
    date: o.date ?? unixNow(),
  };
  const text = o.text === undefined ? 'Hi, the app logs me out every time.' : o.text;
  if (text !== null) message.text = text;
  if (o.replyTo) {
    message.reply_to_message = {
      message_id: o.replyTo.messageId,
      from: { id: o.replyTo.fromId ?? 6_000_000_001, is_bot: true, first_name: 'Helpdesk', username: 'acme_help_bot' },
      chat,
      date: (o.date ?? unixNow()) - 60,
      text: o.replyTo.text ?? 'Thanks, which version of the app do you use?',
    };
  }
  if (o.kind === 'edited_message' || o.kind === 'edited_channel_post') message.edit_date = (o.date ?? unixNow()) + 5;
  Object.assign(message, o.extra ?? {});
  return { update_id: o.updateId ?? nextTelegramInt(), [o.kind ?? 'message']: message };
}

// ------------------------------------------------------------------------------------------- web_chat

export interface WebChatOptions {
  visitorId?: string;
  messageId?: string;
  text?: string;
  sentAt?: string;
  email?: string;
  name?: string;
}

export const newWebChatMessageId = () => `wc_${hex(10)}`;

/** Our widget's format (docs/web-chat-format.md). */
export function webChatPayload(o: WebChatOptions = {}) {
  return {
    visitor_id: o.visitorId ?? 'v_3f9c2a7b1e',
    message_id: o.messageId ?? newWebChatMessageId(),
    text: o.text ?? 'Hi! Do you ship to Canada?',
    sent_at: o.sentAt ?? new Date().toISOString(),
    ...(o.email !== undefined ? { email: o.email } : {}),
    ...(o.name !== undefined ? { name: o.name } : {}),
  };
}
