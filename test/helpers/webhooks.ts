import { createHmac, randomBytes, randomInt, randomUUID } from 'node:crypto';

/**
 * Helpdesk webhook bodies shaped like what Zendesk, Front and Help Scout post to
 * POST /v1/webhooks/{provider}/{integration_id}, and the headers (signature included) each would send.
 * Every builder makes fresh random ids unless given some, so pass ids to control dedupe keys and
 * transcripts. Sign `rawOf(body)` (or any exact bytes) with `signedHeaders`, and send those same bytes.
 *
 * The signing here is written from the providers' documentation, independently of
 * src/domains/webhooks/providers.ts, so tests check the verifier against the spec rather than against itself.
 */

export type WebhookProvider = 'zendesk' | 'front' | 'helpscout';

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const base36 = (bytes: number) => BigInt(`0x${hex(bytes)}`).toString(36);
/** `2025-01-08T10:12:07Z`: ISO without milliseconds, as Zendesk and Help Scout write it. */
const isoSeconds = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');
const isoOf = (value: Date | string | undefined, fallback: Date) =>
  typeof value === 'string' ? value : isoSeconds(value ?? fallback);

/** The exact bytes of a body as the provider would post it. */
export const rawOf = (obj: unknown): string => JSON.stringify(obj);

// -------------------------------------------------------------------------------------------- zendesk

/** A random Zendesk ticket id, as the string event subscriptions use. */
export const newZendeskTicketId = () => String(randomInt(1_000, 10_000_000));

export interface ZendeskEventOptions {
  /** Envelope `id` (the dedupe key); default a random UUID. */
  eventId?: string;
  /** `detail.id` and `subject` (`zen:ticket:<id>`); a number is written as given (tests of stringifying). */
  ticketId?: string | number;
  /** Default `zen:event-type:ticket.created`. */
  type?: string;
  /** Envelope `time`; default now. */
  time?: Date | string;
  /** Default `Open` (Zendesk may capitalise). */
  status?: string;
  /** Default `High`; null leaves it out. */
  priority?: string | null;
  subject?: string;
  requesterId?: string | number;
  assigneeId?: string | number | null;
  tags?: string[];
  accountId?: number;
  /** The envelope's `event` member (what changed); default depends on `type`. */
  event?: Record<string, unknown>;
}

/** A type alias (not an interface) so it is assignable to Record<string, unknown>, classify's body type. */
export type ZendeskEventEnvelope = {
  account_id: number;
  detail: Record<string, unknown>;
  event: Record<string, unknown>;
  id: string;
  subject: string;
  time: string;
  type: string;
  zendesk_event_version: string;
};

/** An event-subscription delivery (ticket events by default). */
export function zendeskEvent(opts: ZendeskEventOptions = {}): ZendeskEventEnvelope {
  const now = new Date();
  const ticketId = opts.ticketId ?? newZendeskTicketId();
  const type = opts.type ?? 'zen:event-type:ticket.created';
  const status = opts.status ?? 'Open';
  const detail: Record<string, unknown> = {
    actor_id: '8447388090494',
    assignee_id: opts.assigneeId === undefined ? '8447388090494' : opts.assigneeId,
    brand_id: '8447346621310',
    created_at: isoSeconds(now),
    custom_status: '8447320465790',
    description: 'The printer on floor 3 is jammed again.',
    external_id: null,
    form_id: '8646151517822',
    group_id: '8447320466430',
    id: ticketId,
    is_public: true,
    organization_id: '8447346622462',
    requester_id: opts.requesterId ?? '8447388090501',
    status,
    subject: opts.subject ?? 'Printer jammed',
    submitter_id: '8447388090501',
    tags: opts.tags ?? ['printer'],
    type: 'INCIDENT',
    updated_at: isoSeconds(now),
    via: { channel: 'web_service' },
  };
  if (opts.priority !== null) detail.priority = opts.priority ?? 'High';
  const event =
    opts.event ??
    (type.endsWith('.status_changed')
      ? { current: status.toUpperCase(), previous: 'NEW' }
      : type.endsWith('.created')
        ? { meta: { sequence: { id: hex(8), position: 1, total: 1 } } }
        : {});
  return {
    account_id: opts.accountId ?? 22129848,
    detail,
    event,
    id: opts.eventId ?? randomUUID(),
    subject: `zen:ticket:${ticketId}`,
    time: typeof opts.time === 'string' ? opts.time : (opts.time ?? now).toISOString(),
    type,
    zendesk_event_version: '2022-11-06',
  };
}

export interface ZendeskTriggerOptions {
  /** Written as `ticket_id`; default a random number (trigger placeholders are often unquoted). */
  ticketId?: string | number;
  /** Default `Open` ({{ticket.status}} renders capitalised). */
  status?: string;
  /** Written as `title`; default 'Printer jammed'. */
  title?: string;
  /** Extra members the admin put in the JSON. */
  extra?: Record<string, unknown>;
}

/** A trigger/automation delivery: the admin's own JSON, no `type`, e.g. {ticket_id, status, title}. */
export function zendeskTrigger(opts: ZendeskTriggerOptions = {}): Record<string, unknown> {
  return {
    ticket_id: opts.ticketId ?? randomInt(1_000, 10_000_000),
    status: opts.status ?? 'Open',
    title: opts.title ?? 'Printer jammed',
    ...opts.extra,
  };
}

/** A non-ticket event subscription delivery (`zen:event-type:user.created` unless another type is given). */
export function zendeskUserEvent(opts: { eventId?: string; userId?: string; type?: string } = {}): ZendeskEventEnvelope {
  const userId = opts.userId ?? String(randomInt(1_000_000, 100_000_000));
  const now = new Date();
  return {
    account_id: 22129848,
    detail: {
      created_at: isoSeconds(now),
      email: `user-${hex(3)}@example.com`,
      external_id: null,
      default_group_id: null,
      id: userId,
      organization_id: null,
      role: 'END_USER',
      updated_at: isoSeconds(now),
    },
    event: {},
    id: opts.eventId ?? randomUUID(),
    subject: `zen:user:${userId}`,
    time: now.toISOString(),
    type: opts.type ?? 'zen:event-type:user.created',
    zendesk_event_version: '2022-11-06',
  };
}

// ---------------------------------------------------------------------------------------------- front

export const newFrontEventId = () => `evt_${base36(6)}`;
export const newFrontConversationId = () => `cnv_${base36(6)}`;

export /** Application-webhook envelope types for the event types they carry, as a captured real delivery shows. */
const FRONT_APP_EVENTS: Record<string, string> = { inbound: 'inbound_received', outbound: 'outbound_sent', archive: 'conversation_archived' };

interface FrontEventOptions {
  /** `payload.type`, the event's own type; default `inbound`. */
  type?: string;
  /** The envelope's top-level `type`; default the application event for `type` (`inbound` → `inbound_received`). */
  envelopeType?: string;
  /** `payload.id` (the dedupe key); default random `evt_…`. */
  eventId?: string;
  /** `payload.conversation.id`; default random `cnv_…`. */
  conversationId?: string;
  subject?: string;
  /** Default `unassigned`. */
  status?: string;
  /** `payload.emitted_at`, unix seconds with a fraction; default now. */
  emittedAt?: number;
  /** The conversation's main contact; default customer@example.com. */
  recipient?: string;
  /** A bare preview: the conversation with only its id and links (no subject, status or recipient). */
  preview?: boolean;
}

/** An application-webhook delivery: {type, authorization, payload: <event preview>}. */
export function frontEvent(opts: FrontEventOptions = {}): Record<string, unknown> {
  const type = opts.type ?? 'inbound';
  const eventId = opts.eventId ?? newFrontEventId();
  const conversationId = opts.conversationId ?? newFrontConversationId();
  const api = 'https://acme.api.frontapp.com';
  const conversation: Record<string, unknown> = {
    _links: { self: `${api}/conversations/${conversationId}` },
    id: conversationId,
  };
  if (!opts.preview) {
    Object.assign(conversation, {
      subject: opts.subject ?? 'Refund for order 1042',
      status: opts.status ?? 'unassigned',
      recipient: { _links: { related: { contact: `${api}/contacts/crd_${base36(4)}` } }, handle: opts.recipient ?? 'customer@example.com', role: 'from' },
      tags: [],
      is_private: false,
      created_at: Math.floor(Date.now() / 1000) - 60,
    });
  }
  return {
    // The envelope names the application event; the event object's own type is inside `payload`.
    type: opts.envelopeType ?? FRONT_APP_EVENTS[type] ?? type,
    authorization: { id: 'cmp_3kd8' },
    payload: {
      _links: { self: `${api}/events/${eventId}` },
      id: eventId,
      type,
      emitted_at: opts.emittedAt ?? Date.now() / 1000,
      conversation,
      source: { _meta: { type: 'inboxes' }, data: [{ id: 'inb_55c4', name: 'Support' }] },
      target: { _meta: { type: 'message' }, data: { _links: { self: `${api}/messages/msg_${base36(5)}` }, id: `msg_${base36(5)}` } },
    },
  };
}

/** Front's validation request (the challenge itself comes in the X-Front-Challenge header; see signedHeaders). */
export function frontSync(opts: { challenge?: string } = {}): Record<string, unknown> {
  const body: Record<string, unknown> = { type: 'sync', authorization: { id: 'cmp_3kd8' }, payload: {} };
  if (opts.challenge !== undefined) body.challenge = opts.challenge;
  return body;
}

// ------------------------------------------------------------------------------------------ helpscout

export const newHelpScoutId = () => randomInt(100_000_000, 2_000_000_000);

export interface HelpScoutConversationOptions {
  /** Conversation `id` (the external ticket id), a number; default random. */
  id?: number;
  number?: number;
  subject?: string;
  /** active, pending, closed, spam; default `active`. */
  status?: string;
  customerId?: number;
  /** `primaryCustomer.email`; null leaves it out. */
  customerEmail?: string | null;
  createdAt?: Date | string;
  /** `userUpdatedAt`; default createdAt. */
  updatedAt?: Date | string;
  tags?: string[];
}

/** The conversation object Help Scout posts for `convo.*` events (the event name is only in a header). */
export function helpscoutConversation(opts: HelpScoutConversationOptions = {}): Record<string, unknown> {
  const id = opts.id ?? newHelpScoutId();
  const created = new Date(Date.now() - 60_000);
  const customerId = opts.customerId ?? randomInt(100_000_000, 2_000_000_000);
  const primaryCustomer: Record<string, unknown> = { id: customerId, type: 'customer', first: 'Ada', last: 'Lovelace' };
  if (opts.customerEmail !== null) primaryCustomer.email = opts.customerEmail ?? 'ada@example.com';
  const createdAt = isoOf(opts.createdAt, created);
  return {
    id,
    number: opts.number ?? randomInt(1, 100_000),
    threads: 1,
    type: 'email',
    folderId: 1234,
    status: opts.status ?? 'active',
    state: 'published',
    subject: opts.subject ?? 'Cannot log in',
    preview: 'Hi, since this morning I cannot log in…',
    mailboxId: 85,
    assignee: { id: 256, type: 'user', first: 'Sam', last: 'Agent', email: 'sam@acme.test' },
    createdBy: { id: customerId, type: 'customer', email: opts.customerEmail ?? 'ada@example.com' },
    createdAt,
    closedBy: 0,
    closedAt: null,
    userUpdatedAt: opts.updatedAt === undefined ? createdAt : isoOf(opts.updatedAt, created),
    customerWaitingSince: { time: createdAt, friendly: '1 min ago' },
    source: { type: 'email', via: 'customer' },
    tags: (opts.tags ?? []).map((tag, i) => ({ id: i + 1, color: '#929499', tag })),
    cc: [],
    bcc: [],
    primaryCustomer,
    customFields: [],
    _embedded: { threads: [] },
  };
}

/** What Help Scout posts for `convo.deleted`: only the id. */
export function helpscoutDeleted(id: number = newHelpScoutId()): { id: number } {
  return { id };
}

// ------------------------------------------------------------------------------------------- signing

export interface SignOptions {
  /** The signing time (Zendesk's and Front's timestamp headers); default now. */
  now?: Date;
  /** Help Scout's X-HelpScout-Event; default `convo.created`. */
  event?: string;
  /** Front's X-Front-Challenge (sent with `sync`). */
  challenge?: string;
  /** Front rule webhook: base64(HMAC-SHA1(secret, body)) and no timestamp header (dev.frontapp.com/docs/rule-webhooks). */
  frontRule?: boolean;
}

/**
 * The headers the provider sends with `rawBody`, lower-case names, content-type included:
 * - zendesk: X-Zendesk-Webhook-Signature = base64(HMAC-SHA256(secret, timestamp + body)), timestamp ISO 8601;
 * - front: X-Front-Signature = base64(HMAC-SHA256(secret, timestamp + ":" + body)), timestamp in ms
 *   (application webhooks), or base64(HMAC-SHA1(secret, body)) with no timestamp (rule webhooks, `frontRule`);
 * - helpscout: X-HelpScout-Signature = base64(HMAC-SHA1(secret, body)) and X-HelpScout-Event.
 */
export function signedHeaders(
  provider: WebhookProvider,
  secret: string,
  rawBody: string | Buffer,
  opts: SignOptions = {},
): Record<string, string> {
  const raw = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : rawBody;
  const now = opts.now ?? new Date();
  switch (provider) {
    case 'zendesk': {
      const timestamp = isoSeconds(now);
      return {
        'content-type': 'application/json',
        'user-agent': 'Zendesk Webhook',
        'x-zendesk-account-id': '22129848',
        'x-zendesk-webhook-id': '01HVRH5XZ8K9Q6Y3W2T1M0N4P7',
        'x-zendesk-webhook-invocation-id': String(randomInt(1_000_000, 100_000_000)),
        'x-zendesk-webhook-signature': createHmac('sha256', secret).update(timestamp).update(raw).digest('base64'),
        'x-zendesk-webhook-signature-timestamp': timestamp,
      };
    }
    case 'front': {
      if (opts.frontRule) {
        return { 'content-type': 'application/json', 'x-front-signature': createHmac('sha1', secret).update(raw).digest('base64') };
      }
      const timestamp = String(now.getTime());
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        'user-agent': 'Front-Webhooks',
        'x-front-request-timestamp': timestamp,
        'x-front-signature': createHmac('sha256', secret).update(`${timestamp}:`).update(raw).digest('base64'),
      };
      if (opts.challenge !== undefined) headers['x-front-challenge'] = opts.challenge;
      return headers;
    }
    case 'helpscout':
      return {
        'content-type': 'application/json',
        'user-agent': 'HelpScout/Webhooks',
        'x-helpscout-event': opts.event ?? 'convo.created',
        'x-helpscout-signature': createHmac('sha1', secret).update(raw).digest('base64'),
      };
  }
}
