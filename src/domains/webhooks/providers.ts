import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The provider-specific part of helpdesk webhook intake (Zendesk, Front, Help Scout): signature checks and
 * classification of a parsed body into a ticket event, an ignorable delivery, or an invalid one. Pure: no I/O,
 * and nothing here throws on any JSON object. Provider facts: shared/providers.md, "Helpdesk webhook providers".
 */

export const WEBHOOK_PROVIDERS = ['zendesk', 'front', 'helpscout'] as const;
export type WebhookProviderId = (typeof WEBHOOK_PROVIDERS)[number];
/** Node's IncomingHttpHeaders shape: lower-case names. */
export type WebhookHeaders = Record<string, string | string[] | undefined>;
export type SignatureCheck = { ok: true } | { ok: false; reason: string };

export interface TicketEvent {
  kind: 'event';
  /** The ledger key: the provider event id (Zendesk envelope `id`, Front `payload.id`), or for Help Scout and for Zendesk trigger JSON without an event id: `sha256:` + hex sha256 of (event name + "\n" + raw body). */
  dedupeKey: string;
  providerEventId: string | null;
  externalTicketId: string; // always a string (numbers stringified)
  type: string; // e.g. 'zen:event-type:ticket.created', 'inbound', 'convo.created'; Zendesk trigger JSON without type → 'trigger'
  occurredAt: string | null; // ISO 8601 when the payload has it
  status: string | null; // normalised lower-case ('Open' → 'open')
  subject: string | null;
  priority: string | null; // lower-case
  requester: string | null; // an email when the payload has one, else the requester id as a string
}
export type Classified = { kind: 'ignored'; challenge?: string } | TicketEvent | { kind: 'invalid'; reason: string };

/** Zendesk documents no tolerance and Front says "older than 5 minutes": we allow ±5 minutes either way. */
const TIMESTAMP_WINDOW_MS = 5 * 60 * 1000;
/** Longer "ids" are not ids: they would only bloat the transcript key. */
const MAX_ID_LENGTH = 255;

const HEADER = {
  zendeskSignature: 'x-zendesk-webhook-signature',
  zendeskTimestamp: 'x-zendesk-webhook-signature-timestamp',
  frontSignature: 'x-front-signature',
  frontTimestamp: 'x-front-request-timestamp',
  frontChallenge: 'x-front-challenge',
  helpscoutSignature: 'x-helpscout-signature',
  helpscoutEvent: 'x-helpscout-event',
} as const;

/**
 * Front's event types (the Core API Event `type` enum, dev.frontapp.com/reference/events), sorted into those
 * that change a conversation's messages, state, assignment, tags or fields (recorded) and the rest (answered
 * ignored): teammate notifications (`mention`), links to other systems, automation bookkeeping
 * (`macro_triggered`, `topic_identified`) and call-progress telemetry. A missed call and a voicemail transcript
 * are a customer waiting on an answer, so they are recorded. docs/decisions/intake.md has the table with reasons.
 */
const FRONT_TICKET_EVENTS: ReadonlySet<string> = new Set([
  'inbound',
  'outbound',
  'out_reply',
  'outbound_reply', // the spelling in Front's generated SDK enums
  'forward',
  'assign',
  'unassign',
  'archive',
  'reopen',
  'reminder', // "a conversation is reopened by a reminder"
  'trash',
  'restore',
  'tag',
  'untag',
  'move',
  'comment',
  'conversations_merged',
  'sending_error',
  'message_bounce_error',
  'custom_field_updated',
  'ticket_status_update',
  'call_missed',
  'call_voicemail_transcript_added',
]);

/**
 * Application-webhook envelope types (dev.frontapp.com/docs/application-webhooks) and the event type each
 * carries, for an envelope whose payload preview lacks its own `type`. `link_added` / `link_removed` map to
 * themselves and stay ignored.
 */
const FRONT_APPLICATION_EVENTS: Readonly<Record<string, string>> = {
  inbound_received: 'inbound',
  outbound_sent: 'outbound',
  message_delivery_failed: 'sending_error',
  conversation_moved: 'move',
  conversation_archived: 'archive',
  conversation_reopened: 'reopen',
  conversation_deleted: 'trash',
  conversation_restored: 'restore',
  conversation_snoozed: 'archive', // Front snoozes by archiving until a reminder
  conversation_snooze_expired: 'reminder',
  new_comment_added: 'comment',
  assignee_changed: 'assign',
  tag_added: 'tag',
  tag_removed: 'untag',
  link_added: 'link_added',
  link_removed: 'link_removed',
};

// ------------------------------------------------------------------------------------------- readers

type Rec = Record<string, unknown>;

function isRecord(value: unknown): value is Rec {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `obj.a.b.c` over own properties only; undefined as soon as a step is not a plain object. */
function at(value: unknown, ...keys: string[]): unknown {
  let cur = value;
  for (const key of keys) {
    if (!isRecord(cur) || !Object.hasOwn(cur, key)) return undefined;
    cur = cur[key];
  }
  return cur;
}

/** A trimmed, non-blank string; undefined otherwise (numbers are not text). */
function text(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const t = value.trim();
  return t === '' ? undefined : t;
}

const lower = (value: unknown): string | undefined => text(value)?.toLowerCase();

/** An identifier: a non-blank string (trimmed, bounded) or a non-negative safe integer, as a string. */
function idOf(value: unknown): string | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? String(value) : undefined;
  const t = text(value);
  return t !== undefined && t.length <= MAX_ID_LENGTH ? t : undefined;
}

const EMAIL = /^[^\s@]+@[^\s@]+$/;
function emailOf(value: unknown): string | undefined {
  const t = text(value);
  return t !== undefined && t.length <= 320 && EMAIL.test(t) ? t : undefined;
}

/** The first candidate the reader accepts. */
function firstOf<T>(read: (value: unknown) => T | undefined, ...candidates: unknown[]): T | undefined {
  for (const candidate of candidates) {
    const v = read(candidate);
    if (v !== undefined) return v;
  }
  return undefined;
}

function isoFromMs(ms: number): string | undefined {
  if (!Number.isFinite(ms) || ms <= 0) return undefined;
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

/** An ISO 8601 date string as a normalised ISO timestamp; undefined for anything else. */
function isoFromDate(value: unknown): string | undefined {
  const t = text(value);
  if (t === undefined || !/^\d{4}-\d{2}-\d{2}/.test(t)) return undefined;
  return isoFromMs(Date.parse(t));
}

/** Unix seconds (number or numeric string, fractions allowed) as ISO. */
function isoFromSeconds(value: unknown): string | undefined {
  const seconds =
    typeof value === 'number' ? value : typeof value === 'string' && /^\s*\d+(\.\d+)?\s*$/.test(value) ? Number(value) : NaN;
  return isoFromMs(seconds * 1000);
}

/** A header by lower-case name (any spelling tolerated); the first value of a repeated one; trimmed. */
function header(headers: WebhookHeaders, name: string): string | undefined {
  if (!isRecord(headers)) return undefined;
  let value: unknown = Object.hasOwn(headers, name) ? headers[name] : undefined;
  if (value === undefined) {
    const key = Object.keys(headers).find((k) => k.toLowerCase() === name);
    if (key !== undefined) value = headers[key];
  }
  if (Array.isArray(value)) value = value.find((v) => typeof v === 'string');
  return text(value);
}

const bodyHash = (eventName: string, raw: Buffer): string =>
  `sha256:${createHash('sha256').update(`${eventName}\n`, 'utf8').update(raw).digest('hex')}`;

const rawBodyHash = (raw: Buffer): string => `sha256:${createHash('sha256').update(raw).digest('hex')}`;

// ----------------------------------------------------------------------------------------- signatures

const fail = (reason: string): SignatureCheck => ({ ok: false, reason });
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** Constant-time comparison of a base64 signature header against the expected MAC bytes. */
function macMatches(provided: string, expected: Buffer): boolean {
  if (!BASE64.test(provided)) return false;
  const given = Buffer.from(provided, 'base64');
  // The length of a MAC is public (fixed per algorithm): comparing it first leaks nothing.
  return given.length === expected.length && timingSafeEqual(given, expected);
}

function withinWindow(timestampMs: number, now: Date): boolean {
  const nowMs = now.getTime();
  return Number.isFinite(timestampMs) && Number.isFinite(nowMs) && Math.abs(nowMs - timestampMs) <= TIMESTAMP_WINDOW_MS;
}

function verifyZendesk(secret: string, headers: WebhookHeaders, raw: Buffer, now: Date): SignatureCheck {
  const signature = header(headers, HEADER.zendeskSignature);
  if (signature === undefined) return fail('missing X-Zendesk-Webhook-Signature header');
  const timestamp = header(headers, HEADER.zendeskTimestamp);
  if (timestamp === undefined) return fail('missing X-Zendesk-Webhook-Signature-Timestamp header');
  const ms = /^\d{4}-\d{2}-\d{2}T/.test(timestamp) ? Date.parse(timestamp) : NaN;
  if (Number.isNaN(ms)) return fail('malformed signature timestamp');
  if (!withinWindow(ms, now)) return fail('signature timestamp outside the 5-minute window');
  const expected = createHmac('sha256', secret).update(timestamp, 'utf8').update(raw).digest();
  return macMatches(signature, expected) ? { ok: true } : fail('signature mismatch');
}

function verifyFront(secret: string, headers: WebhookHeaders, raw: Buffer, now: Date): SignatureCheck {
  const signature = header(headers, HEADER.frontSignature);
  if (signature === undefined) return fail('missing X-Front-Signature header');
  const timestamp = header(headers, HEADER.frontTimestamp);
  // Rule webhooks (dev.frontapp.com/docs/rule-webhooks) carry no timestamp: base64(HMAC-SHA1(secret, body)).
  // Without a timestamp there is no replay window; a replayed body is the same event id, so the ledger makes
  // it a duplicate.
  if (timestamp === undefined) {
    const expected = createHmac('sha1', secret).update(raw).digest();
    return macMatches(signature, expected) ? { ok: true } : fail('signature mismatch (no X-Front-Request-Timestamp: checked as a rule webhook)');
  }
  if (!/^\d{1,16}$/.test(timestamp)) return fail('malformed request timestamp');
  if (!withinWindow(Number(timestamp), now)) return fail('request timestamp outside the 5-minute window');
  const expected = createHmac('sha256', secret).update(`${timestamp}:`, 'utf8').update(raw).digest();
  return macMatches(signature, expected) ? { ok: true } : fail('signature mismatch');
}

function verifyHelpScout(secret: string, headers: WebhookHeaders, raw: Buffer): SignatureCheck {
  const signature = header(headers, HEADER.helpscoutSignature);
  if (signature === undefined) return fail('missing X-HelpScout-Signature header');
  const expected = createHmac('sha1', secret).update(raw).digest();
  return macMatches(signature, expected) ? { ok: true } : fail('signature mismatch');
}

/** Verifies the provider's signature over the raw bytes in constant time (crypto.timingSafeEqual on equal-length buffers), and the timestamp window (±5 minutes of `now`) where the provider has one (Zendesk ISO timestamp header, Front millisecond timestamp header). Missing headers → not ok. Never throws. */
export function verifySignature(
  provider: WebhookProviderId,
  secret: string,
  headers: WebhookHeaders,
  raw: Buffer,
  now: Date,
): SignatureCheck {
  try {
    if (typeof secret !== 'string' || secret === '') return fail('no signing secret');
    if (!Buffer.isBuffer(raw)) return fail('no raw body');
    switch (provider) {
      case 'zendesk':
        return verifyZendesk(secret, headers, raw, now);
      case 'front':
        return verifyFront(secret, headers, raw, now);
      case 'helpscout':
        return verifyHelpScout(secret, headers, raw);
      default:
        return fail('unknown provider');
    }
  } catch {
    return fail('signature check failed');
  }
}

// ------------------------------------------------------------------------------------- classification

const IGNORED: Classified = { kind: 'ignored' };
const invalid = (reason: string): Classified => ({ kind: 'invalid', reason });

type EventFields = Omit<TicketEvent, 'kind' | 'externalTicketId'>;

function ticketEvent(externalTicketId: string | undefined, fields: EventFields, missing: string): Classified {
  if (externalTicketId === undefined) return invalid(missing);
  return { kind: 'event', externalTicketId, ...fields };
}

/** `zen:ticket:35436` → `35436`. */
function zendeskSubjectTicketId(value: unknown): string | undefined {
  const match = /^zen:ticket:(.+)$/.exec(text(value) ?? '');
  return match ? idOf(match[1]) : undefined;
}

function classifyZendesk(body: Rec, raw: Buffer): Classified {
  const type = text(body.type);
  if (type !== undefined && type.toLowerCase().startsWith('zen:')) {
    // Event subscription envelope. Ticket events (`ticket.*`) and messaging events on a ticket
    // (`messaging_ticket.message_added`, subject `zen:ticket:<id>`) are recorded: user.*, organization.*,
    // article.*, community_post.*, agent availability and omnichannel routing events are acknowledged and dropped.
    const domain = type.toLowerCase();
    if (!domain.startsWith('zen:event-type:ticket.') && !domain.startsWith('zen:event-type:messaging_ticket.')) return IGNORED;
    const detail = at(body, 'detail');
    const eventId = idOf(at(body, 'id'));
    return ticketEvent(
      firstOf(idOf, at(detail, 'id'), at(detail, 'ticket_id')) ?? zendeskSubjectTicketId(at(body, 'subject')),
      {
        dedupeKey: eventId ?? bodyHash(type, raw),
        providerEventId: eventId ?? null,
        type,
        occurredAt: firstOf(isoFromDate, at(body, 'time'), at(detail, 'updated_at')) ?? null,
        status: firstOf(lower, at(detail, 'status')) ?? null,
        subject: firstOf(text, at(detail, 'subject')) ?? null,
        priority: firstOf(lower, at(detail, 'priority')) ?? null,
        requester:
          firstOf(emailOf, at(detail, 'requester_email'), at(detail, 'requester', 'email')) ??
          firstOf(idOf, at(detail, 'requester_id'), at(detail, 'requester', 'id')) ??
          null,
      },
      'ticket event without a ticket id',
    );
  }
  // Trigger / automation JSON written by the admin: no event type (a `type` that is not a `zen:` event type
  // is the admin's own field, e.g. the ticket type). Triggers fire on tickets, so a missing id is invalid.
  // Its fields are the admin's choice, so nothing in it is trusted as an event id: dedupe on the body hash.
  const ticket = at(body, 'ticket');
  const eventType = 'trigger';
  return ticketEvent(
    firstOf(idOf, at(body, 'ticket_id'), at(body, 'id'), at(ticket, 'id')),
    {
      dedupeKey: bodyHash(eventType, raw),
      providerEventId: null,
      type: eventType,
      occurredAt:
        firstOf(isoFromDate, at(body, 'time'), at(body, 'updated_at'), at(ticket, 'updated_at'), at(body, 'created_at')) ??
        null,
      status: firstOf(lower, at(body, 'status'), at(ticket, 'status')) ?? null,
      subject: firstOf(text, at(body, 'subject'), at(body, 'title'), at(ticket, 'subject'), at(ticket, 'title')) ?? null,
      priority: firstOf(lower, at(body, 'priority'), at(ticket, 'priority')) ?? null,
      requester:
        firstOf(
          emailOf,
          at(body, 'requester_email'),
          at(body, 'requester', 'email'),
          at(ticket, 'requester_email'),
          at(ticket, 'requester', 'email'),
        ) ??
        firstOf(idOf, at(body, 'requester_id'), at(body, 'requester', 'id'), at(ticket, 'requester_id'), at(ticket, 'requester', 'id')) ??
        null,
    },
    'trigger payload without a ticket id (ticket_id, id or ticket.id)',
  );
}

function classifyFront(headers: WebhookHeaders, body: Rec, raw: Buffer): Classified {
  // Application webhooks wrap the event in an envelope: the top-level `type` names the application event
  // (`inbound_received`, `outbound_sent`, …) and `payload` is Front's event object, whose own `type`
  // (`inbound`, `outbound`, `archive`, …) is what says whether it is a conversation event. Rule webhooks post
  // the event object itself. Reading the envelope's type first dropped every real application delivery.
  const envelope = isRecord(body.payload);
  const payload = envelope ? (body.payload as Rec) : body;
  const envelopeType = firstOf(text, body.type);
  // The event object's own type decides; an envelope whose preview lacks one is read by the application
  // event it names (`conversation_archived` → `archive`).
  const type = envelope
    ? (firstOf(text, at(payload, 'type')) ?? (envelopeType !== undefined ? (FRONT_APPLICATION_EVENTS[envelopeType.toLowerCase()] ?? envelopeType) : undefined))
    : envelopeType;
  const headerChallenge = header(headers, HEADER.frontChallenge);
  // The validation request: `type: "sync"` (a challenge header on an untyped body is read the same way).
  if (envelopeType?.toLowerCase() === 'sync' || type?.toLowerCase() === 'sync' || (type === undefined && headerChallenge !== undefined)) {
    const challenge = headerChallenge ?? firstOf(text, body.challenge, at(payload, 'challenge'));
    return challenge === undefined ? IGNORED : { kind: 'ignored', challenge };
  }
  if (type === undefined) return invalid('missing event type');
  const kind = type.toLowerCase();
  if (!FRONT_TICKET_EVENTS.has(kind)) return IGNORED;
  const conversation = at(payload, 'conversation');
  const eventId = idOf(at(payload, 'id'));
  return ticketEvent(
    firstOf(idOf, at(conversation, 'id'), at(payload, 'conversation_id')),
    {
      dedupeKey: eventId ?? bodyHash(type, raw),
      providerEventId: eventId ?? null,
      type,
      occurredAt: firstOf(isoFromSeconds, at(payload, 'emitted_at')) ?? null,
      status: firstOf(lower, at(conversation, 'status')) ?? null,
      subject: firstOf(text, at(conversation, 'subject')) ?? null,
      priority: null,
      requester:
        firstOf(emailOf, at(conversation, 'recipient', 'handle')) ??
        firstOf(idOf, at(conversation, 'recipient', 'handle'), at(conversation, 'recipient', 'id')) ??
        null,
    },
    'conversation event without a conversation id',
  );
}

function classifyHelpScout(headers: WebhookHeaders, body: Rec, raw: Buffer): Classified {
  const event = header(headers, HEADER.helpscoutEvent);
  if (event === undefined) return invalid('missing X-HelpScout-Event header');
  // Only conversation events are tickets: customer.*, satisfaction.ratings, beacon.*, tag.*, surveys are not.
  if (!event.toLowerCase().startsWith('convo.')) return IGNORED;
  // The requester is the primary customer; a conversation object without one (older payloads) names the
  // customer who created it in `createdBy` (type `customer`). A `createdBy` user (an agent) is not the requester.
  const creator = at(body, 'createdBy', 'type') === 'customer' ? body.createdBy : undefined;
  const customer = firstOf((v) => (isRecord(v) ? v : undefined), body.primaryCustomer, body.customer, creator);
  return ticketEvent(
    idOf(body.id),
    {
      // The event name travels in an unsigned header: keyed on the signed body alone, so a replay with another
      // header value is the same delivery (the first delivery's event name is what gets recorded).
      dedupeKey: rawBodyHash(raw),
      providerEventId: null,
      type: event,
      occurredAt: firstOf(isoFromDate, body.updatedAt, body.userUpdatedAt, body.createdAt) ?? null,
      status: firstOf(lower, body.status) ?? null,
      subject: firstOf(text, body.subject) ?? null,
      priority: null,
      requester: firstOf(emailOf, at(customer, 'email')) ?? firstOf(idOf, at(customer, 'id')) ?? null,
    },
    'conversation event without a conversation id',
  );
}

/** `body` is the parsed JSON (already known to be a plain object); `raw` the exact bytes (for hashing). A valid payload that is not a ticket event → ignored (Front sync → ignored with the X-Front-Challenge header value as challenge, or the body's challenge field if the header is absent). A ticket event whose ticket id cannot be found anywhere in the payload → invalid. Partial payloads (Zendesk trigger JSON without type: find ticket_id / id / ticket.id; Help Scout convo.deleted with only {id}; Front previews) are events with what they have (nulls elsewhere). Help Scout's event name comes only from the X-HelpScout-Event header; a missing header → invalid. */
export function classify(
  provider: WebhookProviderId,
  headers: WebhookHeaders,
  body: Record<string, unknown>,
  raw: Buffer,
): Classified {
  try {
    if (!isRecord(body)) return invalid('body is not a JSON object');
    if (!Buffer.isBuffer(raw)) return invalid('no raw body');
    switch (provider) {
      case 'zendesk':
        return classifyZendesk(body, raw);
      case 'front':
        return classifyFront(headers, body, raw);
      case 'helpscout':
        return classifyHelpScout(headers, body, raw);
      default:
        return invalid('unknown provider');
    }
  } catch {
    return invalid('unreadable payload');
  }
}
