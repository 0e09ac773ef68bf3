import * as nodeCrypto from 'node:crypto';
import { createHash } from 'node:crypto';
import {
  classify,
  verifySignature,
  WEBHOOK_PROVIDERS,
  type Classified,
  type TicketEvent,
  type WebhookHeaders,
  type WebhookProviderId,
} from '../src/domains/webhooks/providers';
import {
  frontEvent,
  frontSync,
  helpscoutConversation,
  helpscoutDeleted,
  rawOf,
  signedHeaders,
  zendeskEvent,
  zendeskTrigger,
  zendeskUserEvent,
} from './helpers/webhooks';

/** Pure unit tests of the webhook providers: signature checks and classification. No database. */

const SECRET = 'whsec_test_6f1d2c9a8b7e';
const NOW = new Date('2025-03-04T12:00:00.000Z');
const minutes = (n: number) => new Date(NOW.getTime() + n * 60_000);

const buf = (s: string) => Buffer.from(s, 'utf8');
const sha256Key = (eventName: string, raw: string) =>
  `sha256:${createHash('sha256').update(`${eventName}\n${raw}`, 'utf8').digest('hex')}`;
/** Help Scout's key: the signed body alone (its event name travels in an unsigned header). */
const bodyKey = (raw: string) => `sha256:${createHash('sha256').update(raw, 'utf8').digest('hex')}`;

function classifyObj(provider: WebhookProviderId, body: Record<string, unknown>, headers: WebhookHeaders = {}): Classified {
  return classify(provider, headers, body, buf(rawOf(body)));
}
function eventOf(result: Classified): TicketEvent {
  if (result.kind !== 'event') throw new Error(`expected a ticket event, got ${JSON.stringify(result)}`);
  return result;
}
const helpscoutHeaders = (event: string): WebhookHeaders => ({ 'content-type': 'application/json', 'x-helpscout-event': event });

const without = (headers: Record<string, string>, name: string) => {
  const copy = { ...headers };
  delete copy[name];
  return copy;
};

// ----------------------------------------------------------------------------------------- signatures

describe('verifySignature', () => {
  describe.each(WEBHOOK_PROVIDERS)('%s', (provider) => {
    const raw = provider === 'zendesk' ? rawOf(zendeskEvent()) : provider === 'front' ? rawOf(frontEvent()) : rawOf(helpscoutConversation());
    const headers = signedHeaders(provider, SECRET, raw, { now: NOW });

    test('accepts the signature the provider computes over the exact body', () => {
      expect(verifySignature(provider, SECRET, headers, buf(raw), NOW)).toEqual({ ok: true });
    });

    test('rejects a valid signature presented with a tampered body', () => {
      const tampered = raw.replace('"id":', '"id" :');
      expect(tampered).not.toBe(raw);
      expect(verifySignature(provider, SECRET, headers, buf(tampered), NOW).ok).toBe(false);
    });

    test('rejects one extra byte (a trailing newline) after the signed body', () => {
      expect(verifySignature(provider, SECRET, headers, buf(`${raw}\n`), NOW).ok).toBe(false);
    });

    test('rejects a signature made with another secret', () => {
      const forged = signedHeaders(provider, 'whsec_someone_else', raw, { now: NOW });
      expect(verifySignature(provider, SECRET, forged, buf(raw), NOW).ok).toBe(false);
    });

    test('rejects a delivery without the signature header, saying which header is missing', () => {
      const name = provider === 'zendesk' ? 'x-zendesk-webhook-signature' : provider === 'front' ? 'x-front-signature' : 'x-helpscout-signature';
      const result = verifySignature(provider, SECRET, without(headers, name), buf(raw), NOW);
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.reason.toLowerCase()).toContain(name);
    });

    test('rejects a signature header that is not base64 or has the wrong length, without throwing', () => {
      const name = Object.keys(headers).find((h) => h.endsWith('signature'))!;
      for (const bad of ['not base64 at all!', 'AAAA', Buffer.alloc(64).toString('base64'), '']) {
        expect(verifySignature(provider, SECRET, { ...headers, [name]: bad }, buf(raw), NOW).ok).toBe(false);
      }
    });

    test('reads a header Node delivered as an array', () => {
      const name = Object.keys(headers).find((h) => h.endsWith('signature'))!;
      expect(verifySignature(provider, SECRET, { ...headers, [name]: [headers[name]!] }, buf(raw), NOW)).toEqual({ ok: true });
    });

    test('refuses to verify with an empty secret', () => {
      const emptyKeyed = signedHeaders(provider, '', raw, { now: NOW });
      expect(verifySignature(provider, '', emptyKeyed, buf(raw), NOW).ok).toBe(false);
    });

    test('never puts the secret or the expected signature in the reason', () => {
      const forged = signedHeaders(provider, 'whsec_someone_else', raw, { now: NOW });
      const result = verifySignature(provider, SECRET, forged, buf(raw), NOW);
      expect(result.ok).toBe(false);
      const expected = Object.entries(headers).find(([h]) => h.endsWith('signature'))![1];
      if (!result.ok) {
        expect(result.reason).not.toContain(SECRET);
        expect(result.reason).not.toContain(expected);
        expect(result.reason.length).toBeLessThan(80);
      }
    });

    test('compares MACs with crypto.timingSafeEqual', () => {
      // The live CommonJS module (the `import * as` namespace above is a copy under swc's interop).
      const liveCrypto = require('node:crypto') as typeof nodeCrypto;
      const spy = jest.spyOn(liveCrypto, 'timingSafeEqual');
      try {
        expect(verifySignature(provider, SECRET, headers, buf(raw), NOW)).toEqual({ ok: true });
        expect(spy).toHaveBeenCalled();
      } finally {
        spy.mockRestore();
      }
    });
  });

  describe('front rule webhooks (dev.frontapp.com/docs/rule-webhooks)', () => {
    const raw = rawOf((frontEvent() as { payload: Record<string, unknown> }).payload);

    test('accepts base64(HMAC-SHA1(secret, body)) with no timestamp header', () => {
      expect(verifySignature('front', SECRET, signedHeaders('front', SECRET, raw, { frontRule: true }), buf(raw), NOW)).toEqual({ ok: true });
    });

    test('rejects it under another secret or over another body', () => {
      const headers = signedHeaders('front', SECRET, raw, { frontRule: true });
      expect(verifySignature('front', 'another-secret', headers, buf(raw), NOW).ok).toBe(false);
      expect(verifySignature('front', SECRET, headers, buf(`${raw} `), NOW).ok).toBe(false);
    });

    test('an SHA-1 signature presented with a timestamp header is checked as an application webhook, and fails', () => {
      const headers = { ...signedHeaders('front', SECRET, raw, { frontRule: true }), 'x-front-request-timestamp': String(NOW.getTime()) };
      expect(verifySignature('front', SECRET, headers, buf(raw), NOW).ok).toBe(false);
    });
  });

  describe.each(['zendesk', 'front'] as const)('%s timestamp window', (provider) => {
    const raw = rawOf(provider === 'zendesk' ? zendeskEvent() : frontEvent());
    const timestampHeader = provider === 'zendesk' ? 'x-zendesk-webhook-signature-timestamp' : 'x-front-request-timestamp';

    test('rejects a correctly signed delivery timestamped 6 minutes ago', () => {
      const headers = signedHeaders(provider, SECRET, raw, { now: minutes(-6) });
      expect(verifySignature(provider, SECRET, headers, buf(raw), NOW).ok).toBe(false);
    });

    test('rejects a correctly signed delivery timestamped 6 minutes in the future', () => {
      const headers = signedHeaders(provider, SECRET, raw, { now: minutes(6) });
      expect(verifySignature(provider, SECRET, headers, buf(raw), NOW).ok).toBe(false);
    });

    test('accepts deliveries timestamped within 5 minutes either way (clock skew, retries)', () => {
      for (const at of [minutes(-4.5), minutes(4.5)]) {
        const headers = signedHeaders(provider, SECRET, raw, { now: at });
        expect(verifySignature(provider, SECRET, headers, buf(raw), NOW)).toEqual({ ok: true });
      }
    });

    test('the timestamp is signed: a stale signature replayed with a fresh timestamp header fails', () => {
      const stale = signedHeaders(provider, SECRET, raw, { now: minutes(-30) });
      const fresh = signedHeaders(provider, SECRET, raw, { now: NOW });
      const replay = { ...stale, [timestampHeader]: fresh[timestampHeader]! };
      expect(verifySignature(provider, SECRET, replay, buf(raw), NOW).ok).toBe(false);
    });

    test('rejects a delivery without the timestamp header', () => {
      const headers = signedHeaders(provider, SECRET, raw, { now: NOW });
      const result = verifySignature(provider, SECRET, without(headers, timestampHeader), buf(raw), NOW);
      expect(result.ok).toBe(false);
      if (!result.ok) expect(result.reason.toLowerCase()).toContain(timestampHeader);
    });

    test('rejects a malformed timestamp header even when the signature covers it', () => {
      // The last two are NOW's milliseconds written as an exponent and in hex: numbers, but not headers Front sends.
      const ms = NOW.getTime();
      for (const bad of ['yesterday', 'NaN', '12:00', '-1', '2025-03-04', '1741089600', (ms / 1e12).toString() + 'e12', `0x${ms.toString(16)}`]) {
        // Signed over the bad timestamp, so only the timestamp check can refuse it.
        const signed = provider === 'zendesk' ? `${bad}${raw}` : `${bad}:${raw}`;
        const signature = nodeCrypto.createHmac('sha256', SECRET).update(signed).digest('base64');
        const signatureHeader = provider === 'zendesk' ? 'x-zendesk-webhook-signature' : 'x-front-signature';
        const headers = { [signatureHeader]: signature, [timestampHeader]: bad };
        const result = verifySignature(provider, SECRET, headers, buf(raw), NOW);
        expect(result.ok).toBe(false);
        if (!result.ok) expect(result.reason).toContain('timestamp');
      }
    });
  });

  test('helpscout has no timestamp: a correctly signed redelivery a day later still verifies', () => {
    const raw = rawOf(helpscoutConversation());
    const headers = signedHeaders('helpscout', SECRET, raw, { now: NOW });
    expect(verifySignature('helpscout', SECRET, headers, buf(raw), new Date(NOW.getTime() + 86_400_000))).toEqual({ ok: true });
  });

  test('helpscout signs with HMAC-SHA1: a SHA-256 signature of the body is rejected', () => {
    const raw = rawOf(helpscoutConversation());
    const sha256 = nodeCrypto.createHmac('sha256', SECRET).update(raw).digest('base64');
    const headers = { ...signedHeaders('helpscout', SECRET, raw), 'x-helpscout-signature': sha256 };
    expect(verifySignature('helpscout', SECRET, headers, buf(raw), NOW).ok).toBe(false);
  });

  test('never throws on odd inputs', () => {
    const raw = buf('{}');
    const odd: unknown[] = [{}, { 'x-zendesk-webhook-signature': [] }, { 'x-front-signature': [undefined] }, null];
    for (const provider of [...WEBHOOK_PROVIDERS, 'ZENDESK' as WebhookProviderId]) {
      for (const headers of odd) {
        expect(() => verifySignature(provider, SECRET, headers as WebhookHeaders, raw, NOW)).not.toThrow();
        expect(verifySignature(provider, SECRET, headers as WebhookHeaders, raw, NOW).ok).toBe(false);
      }
      expect(verifySignature(provider, SECRET, {}, raw, new Date(NaN)).ok).toBe(false);
    }
  });
});

// ---------------------------------------------------------------------------------------------- zendesk

describe('classify: zendesk', () => {
  test('a ticket event becomes a ticket event keyed on the envelope id, fields normalised', () => {
    const body = zendeskEvent({
      eventId: 'cbe4028c-7239-495d-b020-f22348516046',
      ticketId: '35436',
      type: 'zen:event-type:ticket.created',
      time: '2025-01-08T10:12:07.672717030Z',
      status: 'Open',
      priority: 'HIGH',
      subject: '  Printer jammed  ',
      requesterId: '8447388090494',
    });
    expect(eventOf(classifyObj('zendesk', body))).toEqual({
      kind: 'event',
      dedupeKey: 'cbe4028c-7239-495d-b020-f22348516046',
      providerEventId: 'cbe4028c-7239-495d-b020-f22348516046',
      externalTicketId: '35436',
      type: 'zen:event-type:ticket.created',
      occurredAt: '2025-01-08T10:12:07.672Z',
      status: 'open',
      subject: 'Printer jammed',
      priority: 'high',
      requester: '8447388090494',
    });
  });

  // Every ticket event type of the "Ticket events" reference, and the messaging event on a ticket.
  test.each([
    'agent_assignment_changed', 'attachment_linked_to_comment', 'attachment_redacted_from_comment', 'brand_changed',
    'comment_added', 'comment_made_private', 'comment_redacted', 'custom_field_changed', 'custom_status_changed',
    'description_changed', 'external_id_changed', 'email_ccs_changed', 'followers_changed', 'form_changed',
    'group_assignment_changed', 'organization_changed', 'priority_changed', 'problem_link_changed', 'requester_changed',
    'status_changed', 'subject_changed', 'submitter_changed', 'tags_changed', 'task_due_at_changed', 'created',
    'marked_as_spam', 'merged', 'permanently_deleted', 'soft_deleted', 'type_changed', 'undeleted',
    'next_sla_breach_changed', 'schedule_changed', 'sla_policy_changed', 'ola_policy_changed',
  ].map((t) => `zen:event-type:ticket.${t}`).concat('zen:event-type:messaging_ticket.message_added'))('%s is a ticket event', (type) => {
    expect(eventOf(classifyObj('zendesk', zendeskEvent({ type }))).type).toBe(type);
  });

  test('numeric ticket and requester ids are stringified', () => {
    const event = eventOf(classifyObj('zendesk', zendeskEvent({ ticketId: 35436, requesterId: 8447388090494 })));
    expect(event.externalTicketId).toBe('35436');
    expect(event.requester).toBe('8447388090494');
  });

  test('finds the ticket id in the envelope subject when detail has none', () => {
    const body = zendeskEvent({ ticketId: '777' });
    delete body.detail.id;
    expect(eventOf(classifyObj('zendesk', body)).externalTicketId).toBe('777');
  });

  test('a ticket event with no ticket id anywhere is invalid', () => {
    const body = { ...zendeskEvent(), subject: 'zen:ticket:', detail: { status: 'Open' } };
    const result = classifyObj('zendesk', body);
    expect(result.kind).toBe('invalid');
  });

  test.each([
    'zen:event-type:user.created',
    'zen:event-type:user.deleted',
    'zen:event-type:organization.created',
    'zen:event-type:article.published',
    'zen:event-type:community_post.created',
    'zen:event-type:agent.state_changed',
    'zen:event-type:user.active_changed',
    'zen:event-type:organization.name_changed',
    'zen:event-type:omnichannel_config.group_capacity_changed',
  ])('%s is ignored', (type) => {
    expect(classifyObj('zendesk', zendeskUserEvent({ type }))).toEqual({ kind: 'ignored' });
  });

  test('the default non-ticket builder (user.created) is ignored even though it carries an id', () => {
    expect(classifyObj('zendesk', zendeskUserEvent())).toEqual({ kind: 'ignored' });
  });

  test('the occurred time is the envelope time, not the ticket update time', () => {
    const body = zendeskEvent({ time: '2025-02-01T09:00:00Z' });
    body.detail.updated_at = '2024-12-31T00:00:00Z';
    expect(eventOf(classifyObj('zendesk', body)).occurredAt).toBe('2025-02-01T09:00:00.000Z');
  });

  test('a ticket event without priority or subject records nulls', () => {
    const body = zendeskEvent({ priority: null });
    delete body.detail.subject;
    const event = eventOf(classifyObj('zendesk', body));
    expect(event.priority).toBeNull();
    expect(event.subject).toBeNull();
  });

  describe('trigger JSON (no type)', () => {
    test('is a ticket event of type "trigger" keyed on a hash of the body', () => {
      const body = zendeskTrigger({ ticketId: 42, status: 'Pending', title: 'Printer jammed' });
      const raw = rawOf(body);
      expect(eventOf(classify('zendesk', {}, body, buf(raw)))).toEqual({
        kind: 'event',
        dedupeKey: sha256Key('trigger', raw),
        providerEventId: null,
        externalTicketId: '42',
        type: 'trigger',
        occurredAt: null,
        status: 'pending',
        subject: 'Printer jammed',
        priority: null,
        requester: null,
      });
    });

    test('finds the ticket id as `id` or as `ticket.id`', () => {
      expect(eventOf(classifyObj('zendesk', { id: '981', status: 'Solved' })).externalTicketId).toBe('981');
      const nested = eventOf(classifyObj('zendesk', { ticket: { id: 982, title: 'Nested', status: 'Open', requester: { email: 'ada@example.com' } } }));
      expect(nested).toMatchObject({ externalTicketId: '982', subject: 'Nested', status: 'open', requester: 'ada@example.com' });
    });

    test('prefers ticket_id over id', () => {
      expect(eventOf(classifyObj('zendesk', { ticket_id: '5', id: '6' })).externalTicketId).toBe('5');
    });

    test('an admin `type` that is not a Zendesk event type is still trigger JSON', () => {
      const event = eventOf(classifyObj('zendesk', zendeskTrigger({ ticketId: 7, extra: { type: 'incident' } })));
      expect(event.type).toBe('trigger');
      expect(event.externalTicketId).toBe('7');
    });

    test('without any ticket id it is invalid', () => {
      expect(classifyObj('zendesk', { status: 'Open', title: 'No id here' }).kind).toBe('invalid');
      expect(classifyObj('zendesk', {}).kind).toBe('invalid');
    });

    test('identical redeliveries share a dedupe key; a different body does not', () => {
      const a = eventOf(classifyObj('zendesk', zendeskTrigger({ ticketId: 42, status: 'Open' })));
      const b = eventOf(classifyObj('zendesk', zendeskTrigger({ ticketId: 42, status: 'Open' })));
      const c = eventOf(classifyObj('zendesk', zendeskTrigger({ ticketId: 42, status: 'Solved' })));
      expect(a.dedupeKey).toBe(b.dedupeKey);
      expect(c.dedupeKey).not.toBe(a.dedupeKey);
    });
  });
});

// ------------------------------------------------------------------------------------------------ front

describe('classify: front', () => {
  test('an inbound event becomes a ticket event keyed on payload.id, on the conversation id', () => {
    const body = frontEvent({
      type: 'inbound',
      eventId: 'evt_55c8c149',
      conversationId: 'cnv_55c8c149',
      subject: 'Refund for order 1042',
      status: 'Unassigned',
      emittedAt: 1454449465.527,
      recipient: 'customer@example.com',
    });
    expect(eventOf(classifyObj('front', body))).toEqual({
      kind: 'event',
      dedupeKey: 'evt_55c8c149',
      providerEventId: 'evt_55c8c149',
      externalTicketId: 'cnv_55c8c149',
      type: 'inbound',
      occurredAt: '2016-02-02T21:44:25.527Z',
      status: 'unassigned',
      subject: 'Refund for order 1042',
      priority: null,
      requester: 'customer@example.com',
    });
  });

  // Every value of the Core API Event `type` enum (dev.frontapp.com/reference/events), decided one by one
  // (docs/decisions/intake.md, "Front application webhooks").
  test.each([
    'inbound', 'outbound', 'out_reply', 'forward', 'assign', 'unassign', 'archive', 'reopen', 'reminder', 'trash', 'restore',
    'tag', 'untag', 'move', 'comment', 'conversations_merged', 'sending_error', 'message_bounce_error', 'custom_field_updated',
    'ticket_status_update', 'call_missed', 'call_voicemail_transcript_added',
  ])('%s is a ticket event', (type) => {
    expect(eventOf(classifyObj('front', frontEvent({ type }))).type).toBe(type);
  });

  test.each([
    'mention', 'link_added', 'link_removed', 'macro_triggered', 'topic_identified', 'call_started', 'call_abandoned', 'call_queued',
    'call_on_hold', 'call_parked', 'call_resumed', 'call_connected', 'call_hangup', 'call_transferred', 'call_transcript_added',
  ])('%s is ignored', (type) => {
    expect(classifyObj('front', frontEvent({ type }))).toEqual({ kind: 'ignored' });
  });

  test.each([
    ['inbound_received', 'inbound'],
    ['outbound_sent', 'outbound'],
    ['message_delivery_failed', 'sending_error'],
    ['conversation_moved', 'move'],
    ['conversation_archived', 'archive'],
    ['conversation_reopened', 'reopen'],
    ['conversation_deleted', 'trash'],
    ['conversation_restored', 'restore'],
    ['conversation_snoozed', 'archive'],
    ['conversation_snooze_expired', 'reminder'],
    ['new_comment_added', 'comment'],
    ['assignee_changed', 'assign'],
    ['tag_added', 'tag'],
    ['tag_removed', 'untag'],
  ])('an application envelope %s whose preview has no type of its own is read as %s', (envelopeType, type) => {
    const body = frontEvent({ envelopeType }) as { payload: Record<string, unknown> };
    delete body.payload.type;
    expect(eventOf(classifyObj('front', body)).type).toBe(type);
  });

  test.each(['link_added', 'link_removed'])('an application envelope %s without a payload type is ignored', (envelopeType) => {
    const body = frontEvent({ envelopeType }) as { payload: Record<string, unknown> };
    delete body.payload.type;
    expect(classifyObj('front', body)).toEqual({ kind: 'ignored' });
  });

  test('sync is ignored and echoes the X-Front-Challenge header', () => {
    const body = frontSync();
    const headers = signedHeaders('front', SECRET, rawOf(body), { challenge: 'ch_7fa2b1' });
    expect(classifyObj('front', body, headers)).toEqual({ kind: 'ignored', challenge: 'ch_7fa2b1' });
  });

  test('sync without the header echoes the body challenge; the header wins when both are present', () => {
    const body = frontSync({ challenge: 'from_body' });
    expect(classifyObj('front', body)).toEqual({ kind: 'ignored', challenge: 'from_body' });
    expect(classifyObj('front', body, { 'x-front-challenge': 'from_header' })).toEqual({ kind: 'ignored', challenge: 'from_header' });
  });

  test('sync with no challenge at all is simply ignored', () => {
    expect(classifyObj('front', frontSync())).toEqual({ kind: 'ignored' });
  });

  test('a bare preview (conversation id and links only) is recorded with nulls', () => {
    const body = frontEvent({ type: 'archive', eventId: 'evt_prev1', conversationId: 'cnv_prev1', preview: true });
    expect(eventOf(classifyObj('front', body))).toMatchObject({
      dedupeKey: 'evt_prev1',
      externalTicketId: 'cnv_prev1',
      status: null,
      subject: null,
      priority: null,
      requester: null,
    });
  });

  test('a conversation event with no conversation id is invalid', () => {
    const body = frontEvent({ type: 'inbound' }) as { payload: Record<string, unknown> };
    delete body.payload.conversation;
    expect(classifyObj('front', body).kind).toBe('invalid');
  });

  test('a body without any event type is invalid', () => {
    expect(classifyObj('front', { payload: { id: 'evt_1' } }).kind).toBe('invalid');
  });

  test('rule-webhook style (the event itself, no envelope) is read the same way', () => {
    const envelope = frontEvent({ type: 'assign', eventId: 'evt_rule1', conversationId: 'cnv_rule1' }) as { payload: Record<string, unknown> };
    expect(eventOf(classifyObj('front', envelope.payload))).toMatchObject({ dedupeKey: 'evt_rule1', externalTicketId: 'cnv_rule1', type: 'assign' });
  });
});

// -------------------------------------------------------------------------------------------- helpscout

describe('classify: helpscout', () => {
  test('a conversation event becomes a ticket event keyed on a hash of the raw (signed) body', () => {
    const body = helpscoutConversation({
      id: 2391938111,
      subject: 'Cannot log in',
      status: 'Active',
      customerEmail: 'ada@example.com',
      createdAt: '2025-01-20T08:30:00Z',
      updatedAt: '2025-01-20T08:45:00Z',
    });
    const raw = rawOf(body);
    expect(eventOf(classify('helpscout', helpscoutHeaders('convo.created'), body, buf(raw)))).toEqual({
      kind: 'event',
      dedupeKey: bodyKey(raw),
      providerEventId: null,
      externalTicketId: '2391938111',
      type: 'convo.created',
      occurredAt: '2025-01-20T08:45:00.000Z',
      status: 'active',
      subject: 'Cannot log in',
      priority: null,
      requester: 'ada@example.com',
    });
  });

  test('the requester falls back to the customer id (as a string) when there is no email', () => {
    const body = helpscoutConversation({ customerId: 987654, customerEmail: null });
    expect(eventOf(classifyObj('helpscout', body, helpscoutHeaders('convo.assigned'))).requester).toBe('987654');
  });

  test('without a primary customer, the creator is the requester only when the creator is a customer', () => {
    const body = helpscoutConversation();
    delete body.primaryCustomer;
    body.createdBy = { id: 12, type: 'customer', email: 'bear@acme.com' };
    expect(eventOf(classifyObj('helpscout', body, helpscoutHeaders('convo.created'))).requester).toBe('bear@acme.com');
    body.createdBy = { id: 256, type: 'user', email: 'agent@acme.test' };
    expect(eventOf(classifyObj('helpscout', body, helpscoutHeaders('convo.created'))).requester).toBeNull();
  });

  test('convo.deleted with only {id} is recorded with what it has', () => {
    const body = helpscoutDeleted(123);
    expect(eventOf(classifyObj('helpscout', body, helpscoutHeaders('convo.deleted')))).toEqual({
      kind: 'event',
      dedupeKey: bodyKey('{"id":123}'),
      providerEventId: null,
      externalTicketId: '123',
      type: 'convo.deleted',
      occurredAt: null,
      status: null,
      subject: null,
      priority: null,
      requester: null,
    });
  });

  test.each([
    'convo.assigned',
    'convo.moved',
    'convo.status',
    'convo.tags',
    'convo.merged',
    'convo.customer.reply.created',
    'convo.agent.reply.created',
    'convo.note.created',
    'convo.custom-fields',
    'convo.created',
    'convo.ai-answers.created',
  ])('%s is a ticket event', (event) => {
    expect(eventOf(classifyObj('helpscout', helpscoutConversation(), helpscoutHeaders(event))).type).toBe(event);
  });

  // The rest of the Webhooks page's list (developer.helpscout.com/webhooks and the Create Webhook endpoint's events).
  test.each([
    'customer.created', 'customer.updated', 'customer.deleted', 'satisfaction.ratings', 'beacon.chat.created',
    'beacon.chat.customer.replied', 'tag.created', 'tag.updated', 'tag.deleted', 'message.survey.response.received',
    'organization.created', 'organization.updated', 'organization.deleted', 'user.status.changed', 'helpscout.test',
  ])(
    '%s is ignored',
    (event) => {
      const customer = { id: 29418, firstName: 'Ada', lastName: 'Lovelace', emails: [{ id: 1, value: 'ada@example.com', type: 'work' }] };
      expect(classifyObj('helpscout', customer, helpscoutHeaders(event))).toEqual({ kind: 'ignored' });
    },
  );

  test('the event name comes only from the header: without X-HelpScout-Event the delivery is invalid', () => {
    const body = { ...helpscoutConversation(), event: 'convo.created', type: 'convo.created' };
    const result = classifyObj('helpscout', body, { 'content-type': 'application/json' });
    expect(result.kind).toBe('invalid');
  });

  test('a conversation event with no id is invalid', () => {
    const body = helpscoutConversation();
    delete body.id;
    expect(classifyObj('helpscout', body, helpscoutHeaders('convo.status')).kind).toBe('invalid');
  });

  test('identical redeliveries get the same dedupe key', () => {
    const body = helpscoutConversation();
    const raw = rawOf(body);
    const first = eventOf(classify('helpscout', helpscoutHeaders('convo.created'), body, buf(raw)));
    const again = eventOf(classify('helpscout', helpscoutHeaders('convo.created'), JSON.parse(raw), buf(raw)));
    expect(again.dedupeKey).toBe(first.dedupeKey);
  });

  test('the same body under another (unsigned) event name gets the same dedupe key', () => {
    const body = helpscoutConversation();
    const created = eventOf(classifyObj('helpscout', body, helpscoutHeaders('convo.created')));
    const assigned = eventOf(classifyObj('helpscout', body, helpscoutHeaders('convo.assigned')));
    expect(assigned.dedupeKey).toBe(created.dedupeKey);
  });

  test('a different body (even one whitespace byte) under the same event name gets a different dedupe key', () => {
    const body = helpscoutConversation();
    const raw = rawOf(body);
    const a = eventOf(classify('helpscout', helpscoutHeaders('convo.status'), body, buf(raw)));
    const b = eventOf(classify('helpscout', helpscoutHeaders('convo.status'), body, buf(`${raw} `)));
    const c = eventOf(classifyObj('helpscout', { ...body, status: 'closed' }, helpscoutHeaders('convo.status')));
    expect(b.dedupeKey).not.toBe(a.dedupeKey);
    expect(c.dedupeKey).not.toBe(a.dedupeKey);
  });
});

// ------------------------------------------------------------------------------------------- robustness

describe('classify never throws', () => {
  const odd: Array<Record<string, unknown>> = [
    {},
    { type: 7, id: {}, detail: 5 },
    { type: 'zen:event-type:ticket.created', detail: [], subject: 42, time: 'not a time' },
    { type: 'zen:event-type:ticket.created', detail: { id: 1.5, status: 3, priority: {}, requester_id: -1 }, id: null },
    { type: 'inbound', payload: [] },
    { type: 'inbound', payload: { id: 12, conversation: { id: ['x'] }, emitted_at: 1e20 } },
    { type: 'inbound', payload: { conversation: { id: 'cnv_1', status: null }, emitted_at: '1454449465' } },
    { id: 'x'.repeat(10_000), ticket: null, primaryCustomer: 'ada@example.com' },
    { id: Number.MAX_VALUE, createdAt: '9999999-01-01', customer: { email: 5 } },
    JSON.parse('{"__proto__": {"id": 1}, "constructor": {"id": 2}}') as Record<string, unknown>,
  ];

  test.each(WEBHOOK_PROVIDERS)('%s: odd JSON objects are classified without throwing', (provider) => {
    for (const body of odd) {
      for (const headers of [{}, helpscoutHeaders('convo.created'), { 'x-front-challenge': ['a', 'b'] }]) {
        let result: Classified | undefined;
        expect(() => {
          result = classify(provider, headers, body, buf(rawOf(body)));
        }).not.toThrow();
        expect(['event', 'ignored', 'invalid']).toContain(result!.kind);
        if (result!.kind === 'event') {
          expect(typeof result!.externalTicketId).toBe('string');
          expect(result!.externalTicketId.length).toBeLessThanOrEqual(255);
          if (result!.occurredAt !== null) expect(new Date(result!.occurredAt).toISOString()).toBe(result!.occurredAt);
        }
      }
    }
  });

  test('ids that are not plausible ids (fractions, negatives, 10 kB strings, inherited properties) do not count', () => {
    expect(classifyObj('zendesk', { ticket_id: 1.5 }).kind).toBe('invalid');
    expect(classifyObj('zendesk', { ticket_id: -3 }).kind).toBe('invalid');
    expect(classifyObj('helpscout', { id: 'x'.repeat(10_000) }, helpscoutHeaders('convo.deleted')).kind).toBe('invalid');
    expect(classifyObj('zendesk', Object.create({ ticket_id: 9 }) as Record<string, unknown>).kind).toBe('invalid');
  });
});
