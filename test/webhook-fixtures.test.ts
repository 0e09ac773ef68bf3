/**
 * Helpdesk webhook intake against the providers' own documented payloads (test/fixtures/{zendesk,front,helpscout}/,
 * each file's source in that folder's SOURCES.md), posted as the provider posts them (signed), through the real
 * route with workers: the transcript, its external id, subject, requester and status, dedupe on redelivery,
 * ignored non-ticket events, Front's validation request and rule webhooks.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { bearer } from './helpers/factories';
import { rawOf, signedHeaders, type SignOptions, type WebhookProvider } from './helpers/webhooks';
import { useTestApp } from './helpers/use-test-app';

type Json = Record<string, unknown>;
const fixture = (provider: WebhookProvider, name: string): Json =>
  JSON.parse(readFileSync(join(__dirname, 'fixtures', provider, `${name}.json`), 'utf8')) as Json;

interface Integration {
  id: string;
  provider: WebhookProvider;
  secret: string;
}
interface TranscriptEvent {
  type: string;
  provider_event_id: string | null;
  occurred_at: string | null;
  status: string | null;
  subject: string | null;
  priority: string | null;
  requester: string | null;
  raw: unknown;
}

const hook = {} as Record<WebhookProvider, Integration>;

const { ctx, ws } = useTestApp({ workers: true, workspaces: 1 });
beforeAll(async () => {
  for (const provider of ['zendesk', 'front', 'helpscout'] as const) {
    const secret = randomBytes(20).toString('hex');
    const res = await ctx.http.post('/v1/integrations').set(bearer(ws.ownerKey)).send({ provider, name: `${provider} fixtures`, signing_secret: secret });
    if (res.status !== 201) throw new Error(`integration: ${res.status} ${JSON.stringify(res.body)}`);
    hook[provider] = { id: res.body.id as string, provider, secret };
  }
});

/** Posts the fixture's exact bytes, signed with the integration's secret as the provider would sign them. */
function post(i: Integration, body: Json, opts: SignOptions = {}) {
  const raw = rawOf(body);
  return ctx.http.post(`/v1/webhooks/${i.provider}/${i.id}`).set(signedHeaders(i.provider, i.secret, raw, opts)).send(raw);
}

async function recorded(i: Integration, body: Json, opts: SignOptions = {}): Promise<{ transcript_id: string; external_ticket_id: string }> {
  const res = await post(i, body, opts);
  if (res.status !== 200 || res.body.status !== 'ok') throw new Error(`${i.provider}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { transcript_id: string; external_ticket_id: string };
}

/** The transcript's events, oldest first (the read presents them newest first). */
async function events(transcriptId: string): Promise<TranscriptEvent[]> {
  const res = await ctx.http.get(`/v1/transcripts/${transcriptId}`).set(bearer(ws.ownerKey));
  expect(res.status).toBe(200);
  return [...(res.body.events as TranscriptEvent[])].reverse();
}

/** Ledger rows of one integration: what was recorded and how many copies came after. */
async function ledger(i: Integration) {
  return ctx.db
    .selectFrom('webhook_deliveries')
    .select(['dedupe_key', 'duplicate_count'])
    .where('integration_id', '=', i.id)
    .execute();
}

async function expectIgnored(i: Integration, body: Json, opts: SignOptions = {}) {
  const before = (await ledger(i)).length;
  const res = await post(i, body, opts);
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ status: 'ignored' });
  expect((await ledger(i)).length).toBe(before);
}

describe('Zendesk event subscriptions (documented payloads)', () => {
  test('ticket created, status changed and a comment make one transcript for the ticket, read from the envelope', async () => {
    const created = fixture('zendesk', 'ticket-created');
    const first = await recorded(hook.zendesk, created);
    expect(first.external_ticket_id).toBe('5158');
    const second = await recorded(hook.zendesk, fixture('zendesk', 'ticket-status-changed'));
    const third = await recorded(hook.zendesk, fixture('zendesk', 'ticket-comment-added'));
    expect([second.transcript_id, third.transcript_id]).toEqual([first.transcript_id, first.transcript_id]);
    const evs = await events(first.transcript_id);
    expect(evs.map((e) => [e.type, e.provider_event_id, e.status])).toEqual([
      ['zen:event-type:ticket.created', 'cbe4028c-7239-495d-b020-f22348516046', 'open'],
      ['zen:event-type:ticket.status_changed', 'b8a06e2f-7d3c-4a4b-9e2e-4f1e0c6b3d11', 'pending'],
      ['zen:event-type:ticket.comment_added', '4c9b2a1e-5f3d-4e8a-b7c6-0d1e2f3a4b5c', 'pending'],
    ]);
    // Upper-case enums as Zendesk sends them, normalised; the requester (not the acting agent); the event time.
    expect(evs[0]).toMatchObject({ subject: 'ticket_created', priority: 'low', requester: '8447388090495', occurred_at: '2025-01-08T10:12:07.672Z', raw: created });
  });

  test('a redelivered event (same envelope id, signed again later) is a duplicate: counted, not recorded twice', async () => {
    const body = fixture('zendesk', 'ticket-created');
    body.id = 'e1c0ffee-0000-4000-8000-000000000001';
    (body.detail as Json).id = '6001';
    body.subject = 'zen:ticket:6001';
    const first = await recorded(hook.zendesk, body);
    const again = await recorded(hook.zendesk, body, { now: new Date(Date.now() + 30_000) });
    expect(again).toEqual(first);
    expect(await events(first.transcript_id)).toHaveLength(1);
    const row = (await ledger(hook.zendesk)).find((r) => r.dedupe_key === body.id);
    expect(Number(row!.duplicate_count)).toBe(1);
  });

  test('a messaging event on a ticket (messaging_ticket.message_added) is recorded on that ticket', async () => {
    const r = await recorded(hook.zendesk, fixture('zendesk', 'messaging-ticket-message-added'));
    expect(r.external_ticket_id).toBe('141');
    const [e] = await events(r.transcript_id);
    expect(e).toMatchObject({ type: 'zen:event-type:messaging_ticket.message_added', provider_event_id: '01JQMQH83YNAKWSWJ8B1QH2NSC', occurred_at: '2025-02-11T14:32:05.254Z' });
  });

  test('a user event (the reference\'s example envelope) is answered ignored and writes nothing', async () => {
    await expectIgnored(hook.zendesk, fixture('zendesk', 'user-active-changed'));
  });
});

describe('Front application and rule webhooks (documented shapes)', () => {
  test('the validation request (sync) echoes X-Front-Challenge', async () => {
    const res = await post(hook.front, fixture('front', 'application-sync'), { challenge: 'chl_7f3a9c' });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ignored', challenge: 'chl_7f3a9c' });
    expect(await ledger(hook.front)).toEqual([]);
  });

  test('inbound_received, outbound_sent and conversation_archived land on the conversation\'s transcript by their event type', async () => {
    const inbound = await recorded(hook.front, fixture('front', 'application-inbound-received'));
    expect(inbound.external_ticket_id).toBe('cnv_yo1kg5q');
    await recorded(hook.front, fixture('front', 'application-outbound-sent'));
    await recorded(hook.front, fixture('front', 'application-conversation-archived'));
    const evs = await events(inbound.transcript_id);
    expect(evs.map((e) => [e.type, e.provider_event_id, e.status])).toEqual([
      ['inbound', 'evt_4ckcra8e', 'unassigned'],
      ['outbound', 'evt_4ckcrb2q', 'assigned'],
      ['archive', 'evt_4ckcrc7m', 'archived'],
    ]);
    expect(evs[0]).toMatchObject({ subject: 'How to prank Dwight Schrute', requester: 'purpleboss@limitlesspaper.com', occurred_at: '2023-12-20T20:03:36.413Z' });
  });

  test('a redelivered application event is a duplicate of the first', async () => {
    const body = fixture('front', 'application-inbound-received');
    (body.payload as Json).id = 'evt_redeliv1';
    const first = await recorded(hook.front, body);
    const before = (await events(first.transcript_id)).length;
    expect(await recorded(hook.front, body)).toEqual(first);
    expect(await events(first.transcript_id)).toHaveLength(before);
    expect(Number((await ledger(hook.front)).find((r) => r.dedupe_key === 'evt_redeliv1')!.duplicate_count)).toBe(1);
  });

  test('a rule webhook (the event object itself, HMAC-SHA1 over the body, no timestamp) is verified and recorded', async () => {
    const r = await recorded(hook.front, fixture('front', 'rule-event-tag'), { frontRule: true });
    expect(r.external_ticket_id).toBe('cnv_yo1kg5q');
    expect((await events(r.transcript_id)).map((e) => e.type)).toContain('tag');
    // The same body signed with another secret is refused.
    const raw = rawOf(fixture('front', 'rule-event-tag'));
    const forged = await ctx.http
      .post(`/v1/webhooks/front/${hook.front.id}`)
      .set(signedHeaders('front', 'not-the-secret', raw, { frontRule: true }))
      .send(raw);
    expect(forged.status).toBe(401);
  });

  test('a mention (rule webhook) and link_added (application webhook) are not ticket events', async () => {
    await expectIgnored(hook.front, fixture('front', 'rule-event-mention'), { frontRule: true });
    await expectIgnored(hook.front, fixture('front', 'application-link-added'));
  });
});

describe('Help Scout webhooks (the official SDK\'s payloads)', () => {
  test('a conversation event: the conversation id, subject, status and primary customer; a later event joins it', async () => {
    const convo = fixture('helpscout', 'conversation');
    const r = await recorded(hook.helpscout, convo, { event: 'convo.created' });
    expect(r.external_ticket_id).toBe('123');
    // A customer reply re-sends the conversation object, changed (status, userUpdatedAt).
    const replied = { ...convo, status: 'active', userUpdatedAt: '2017-04-22T09:01:12Z' };
    expect((await recorded(hook.helpscout, replied, { event: 'convo.customer.reply.created' })).transcript_id).toBe(r.transcript_id);
    const evs = await events(r.transcript_id);
    expect(evs.map((e) => [e.type, e.status, e.occurred_at])).toEqual([
      ['convo.created', 'closed', '2017-04-21T14:43:24.000Z'],
      ['convo.customer.reply.created', 'active', '2017-04-22T09:01:12.000Z'],
    ]);
    // The primary customer has only an id in this payload: that id is the requester (not the creator's e-mail).
    expect(evs[0]).toMatchObject({ subject: 'Need Help', requester: '238604', provider_event_id: null });
  });

  test('the same bytes delivered again are a duplicate (Help Scout sends no event id)', async () => {
    const body = { ...fixture('helpscout', 'conversation'), id: 456 };
    const first = await recorded(hook.helpscout, body, { event: 'convo.assigned' });
    expect(await recorded(hook.helpscout, body, { event: 'convo.assigned' })).toEqual(first);
    expect(await events(first.transcript_id)).toHaveLength(1);
  });

  test('convo.deleted carries only the id and is recorded with nothing else', async () => {
    const r = await recorded(hook.helpscout, { ...fixture('helpscout', 'convo-deleted'), id: 789 }, { event: 'convo.deleted' });
    expect(r.external_ticket_id).toBe('789');
    expect(await events(r.transcript_id)).toEqual([
      expect.objectContaining({ type: 'convo.deleted', status: null, subject: null, requester: null, occurred_at: null }),
    ]);
  });

  test('the test ping (helpscout.test) and customer events are not ticket events', async () => {
    await expectIgnored(hook.helpscout, fixture('helpscout', 'helpscout-test'), { event: 'helpscout.test' });
    await expectIgnored(hook.helpscout, fixture('helpscout', 'customer'), { event: 'customer.created' });
  });
});
