/**
 * Webhook intake from Zendesk, Front and Help Scout (issue 7; spec: receive_webhook, Webhook result,
 * Authentication rule 11, Errors, Limits; provider facts: shared/providers.md): integrations, intake rules,
 * signatures, classification, exactly-once recording, throttling, transcript reads, and a worker SIGKILLed
 * mid-burst. Everything goes over HTTP against the app, with real workers running the `webhooks` queue.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Response } from 'supertest';
import { startTestApp, type TestContext } from './helpers/context';
import { addMember, bearer, createWorkspace, mintKey, type Workspace } from './helpers/factories';
import { killGroup, killMidBurst, spawnWorker, workerStarted } from './helpers/processes';
import { eventually, sleep } from './helpers/wait';
import {
  frontEvent,
  frontSync,
  helpscoutConversation,
  helpscoutDeleted,
  newFrontConversationId,
  newHelpScoutId,
  newZendeskTicketId,
  rawOf,
  signedHeaders,
  zendeskEvent,
  zendeskTrigger,
  zendeskUserEvent,
  type SignOptions,
  type WebhookProvider,
} from './helpers/webhooks';

const PROVIDERS: WebhookProvider[] = ['zendesk', 'front', 'helpscout'];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const hex = (n: number) => randomBytes(n).toString('hex');
const newSecret = () => `whsec_${hex(16)}`;

// ------------------------------------------------------------------------------------------ deliveries

/** One delivery as the provider would post it: the exact bytes, and the header-borne parts. */
interface Delivery {
  body: Record<string, unknown>;
  raw: string;
  /** Help Scout's X-HelpScout-Event. */
  event?: string;
  /** Front's X-Front-Challenge. */
  challenge?: string;
  /** What the recorded transcript event should read as (ticket events only). */
  expected?: Record<string, unknown>;
}

const delivery = (body: Record<string, unknown>, extra: Omit<Delivery, 'body' | 'raw'> = {}): Delivery => ({ body, raw: rawOf(body), ...extra });

/** Per provider: realistic ticket events, non-ticket events, partial payloads and unreadable ones. */
interface Kit {
  newTicketId(): string;
  /** A ticket event about `ticketId`; every call is a distinct provider event (variant 0: created, else an update). */
  ticket(ticketId: string, variant?: number): Delivery;
  nonTicket(): Delivery[];
  partial(ticketId: string): Delivery;
  /** Ticket events with no ticket id anywhere in the payload. */
  noTicketId(): Delivery[];
}

const KITS: Record<WebhookProvider, Kit> = {
  zendesk: {
    newTicketId: newZendeskTicketId,
    ticket(ticketId, variant = 0) {
      const type = variant === 0 ? 'zen:event-type:ticket.created' : 'zen:event-type:ticket.status_changed';
      const status = variant === 0 ? 'Open' : 'Pending';
      const body = zendeskEvent({ ticketId, type, status, subject: `Printer jammed (${variant})` });
      return delivery(body, {
        expected: {
          provider_event_id: body.id,
          type,
          occurred_at: new Date(body.time).toISOString(),
          status: status.toLowerCase(),
          subject: `Printer jammed (${variant})`,
          priority: 'high',
          requester: '8447388090501',
        },
      });
    },
    nonTicket: () => [
      delivery(zendeskUserEvent()),
      delivery(zendeskUserEvent({ type: 'zen:event-type:organization.created' })),
      delivery(zendeskUserEvent({ type: 'zen:event-type:article.published' })),
    ],
    partial(ticketId) {
      // Trigger JSON written by the admin: no `type`, no event id, the ticket id as an unquoted placeholder.
      const body = zendeskTrigger({ ticketId: Number(ticketId), status: 'Solved', title: 'Trigger says solved' });
      return delivery(body, {
        expected: { provider_event_id: null, type: 'trigger', status: 'solved', subject: 'Trigger says solved', priority: null, requester: null, occurred_at: null },
      });
    },
    noTicketId() {
      const envelope = zendeskEvent();
      delete envelope.detail.id;
      envelope.subject = 'zen:ticket:';
      return [delivery({ status: 'Open', title: 'No ticket placeholder in this trigger' }), delivery(envelope)];
    },
  },
  front: {
    newTicketId: newFrontConversationId,
    ticket(conversationId, variant = 0) {
      const type = variant === 0 ? 'inbound' : 'assign';
      const status = variant === 0 ? 'unassigned' : 'assigned';
      const body = frontEvent({ type, conversationId, status, subject: `Refund for order 1042 (${variant})` });
      const payload = body.payload as { id: string; emitted_at: number };
      return delivery(body, {
        expected: {
          provider_event_id: payload.id,
          type,
          status,
          subject: `Refund for order 1042 (${variant})`,
          priority: null,
          requester: 'customer@example.com',
          emitted_at: payload.emitted_at,
        },
      });
    },
    nonTicket: () => [delivery(frontEvent({ type: 'mention' })), delivery(frontEvent({ type: 'link_added' })), delivery(frontEvent({ type: 'macro_triggered' }))],
    partial(conversationId) {
      const body = frontEvent({ conversationId, preview: true });
      const payload = body.payload as { id: string };
      return delivery(body, { expected: { provider_event_id: payload.id, type: 'inbound', status: null, subject: null, priority: null, requester: null } });
    },
    noTicketId() {
      const body = frontEvent();
      delete (body.payload as Record<string, unknown>).conversation;
      return [delivery(body)];
    },
  },
  helpscout: {
    newTicketId: () => String(newHelpScoutId()),
    ticket(id, variant = 0) {
      const event = variant === 0 ? 'convo.created' : 'convo.status';
      const status = variant === 0 ? 'active' : 'pending';
      const updatedAt = new Date(Date.now() - 30_000 + variant * 1000);
      const body = helpscoutConversation({ id: Number(id), status, subject: `Cannot log in (${variant})`, updatedAt, customerEmail: 'ada@example.com' });
      return delivery(body, {
        event,
        expected: {
          provider_event_id: null,
          type: event,
          occurred_at: new Date(Math.floor(updatedAt.getTime() / 1000) * 1000).toISOString(),
          status,
          subject: `Cannot log in (${variant})`,
          priority: null,
          requester: 'ada@example.com',
        },
      });
    },
    nonTicket: () => [
      delivery({ id: newHelpScoutId(), firstName: 'Ada', lastName: 'Lovelace', emails: [{ value: 'ada@example.com' }] }, { event: 'customer.created' }),
      delivery({ id: newHelpScoutId(), rating: 'great', conversationId: newHelpScoutId() }, { event: 'satisfaction.ratings' }),
      delivery({ id: 7, name: 'vip', color: '#929499' }, { event: 'tag.created' }),
    ],
    partial(id) {
      return delivery(helpscoutDeleted(Number(id)), {
        event: 'convo.deleted',
        expected: { provider_event_id: null, type: 'convo.deleted', status: null, subject: null, priority: null, requester: null, occurred_at: null },
      });
    },
    noTicketId() {
      const body = helpscoutConversation();
      delete body.id;
      return [delivery(body, { event: 'convo.created' })];
    },
  },
};

/** The headers an unsigned delivery carries: content type, plus the provider's non-signature headers. */
function plainHeaders(provider: WebhookProvider, d: Delivery): Record<string, string> {
  const h: Record<string, string> = { 'content-type': 'application/json' };
  if (provider === 'helpscout') h['x-helpscout-event'] = d.event ?? 'convo.created';
  if (d.challenge !== undefined) h['x-front-challenge'] = d.challenge;
  return h;
}

/** Signed with `secret` (or unsigned without one), over exactly `d.raw`. */
function headersFor(provider: WebhookProvider, d: Delivery, secret: string | undefined, opts: SignOptions = {}): Record<string, string> {
  if (secret === undefined) return plainHeaders(provider, d);
  return signedHeaders(provider, secret, d.raw, { ...(d.event ? { event: d.event } : {}), ...(d.challenge !== undefined ? { challenge: d.challenge } : {}), ...opts });
}

function postRaw(ctx: TestContext, provider: string, integrationId: string, raw: string | Buffer, headers: Record<string, string>) {
  return ctx.http.post(`/v1/webhooks/${provider}/${integrationId}`).set(headers).send(raw);
}

interface Integration {
  id: string;
  provider: WebhookProvider;
  name: string;
  signing_secret_set: boolean;
  webhook_url: string;
  created_at: string;
  /** Test-side only: the secret it was created with. */
  secret?: string;
}

async function createIntegration(ctx: TestContext, ws: Workspace, provider: WebhookProvider, secret?: string): Promise<Integration> {
  const res = await ctx.http
    .post('/v1/integrations')
    .set(bearer(ws.ownerKey))
    .send({ provider, name: `${provider} ${hex(3)}`, ...(secret !== undefined ? { signing_secret: secret } : {}) });
  if (res.status !== 201) throw new Error(`create integration: ${res.status} ${JSON.stringify(res.body)}`);
  return { ...(res.body as Integration), ...(secret !== undefined ? { secret } : {}) };
}

/** Sends `d` to the integration, signed with its secret when it has one. */
function deliver(ctx: TestContext, i: Integration, d: Delivery, opts: SignOptions = {}) {
  return postRaw(ctx, i.provider, i.id, d.raw, headersFor(i.provider, d, i.secret, opts));
}

interface OkResult {
  status: 'ok';
  transcript_id: string;
  external_ticket_id: string;
}

async function recorded(ctx: TestContext, i: Integration, d: Delivery): Promise<OkResult> {
  const res = await deliver(ctx, i, d);
  if (res.status !== 200 || res.body.status !== 'ok') throw new Error(`deliver ${i.provider}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as OkResult;
}

interface Counts {
  deliveries: number;
  transcripts: number;
  events: number;
}

/** Row counts of the three intake tables, across every workspace (or one integration's). */
async function countRows(ctx: TestContext, integrationId?: string): Promise<Counts> {
  const n = async (q: ReturnType<typeof sql<{ n: number }>>) => Number((await q.execute(ctx.db)).rows[0]!.n);
  const byIntegration = integrationId ? sql`where integration_id = ${integrationId}` : sql``;
  return {
    deliveries: await n(sql<{ n: number }>`select count(*)::int as n from webhook_deliveries ${byIntegration}`),
    transcripts: await n(sql<{ n: number }>`select count(*)::int as n from transcripts ${byIntegration}`),
    events: await n(
      integrationId
        ? sql<{ n: number }>`select count(*)::int as n from transcript_events e join transcripts t on t.id = e.transcript_id where t.integration_id = ${integrationId}`
        : sql<{ n: number }>`select count(*)::int as n from transcript_events`,
    ),
  };
}
const NOTHING: Counts = { deliveries: 0, transcripts: 0, events: 0 };
const diff = (after: Counts, before: Counts): Counts => ({
  deliveries: after.deliveries - before.deliveries,
  transcripts: after.transcripts - before.transcripts,
  events: after.events - before.events,
});

async function expectNothingWritten(ctx: TestContext, action: () => Promise<unknown>) {
  const before = await countRows(ctx);
  await action();
  expect(diff(await countRows(ctx), before)).toEqual(NOTHING);
}

interface TranscriptEventView {
  id: string;
  provider_event_id: string | null;
  type: string;
  occurred_at: string | null;
  status: string | null;
  subject: string | null;
  priority: string | null;
  requester: string | null;
  received_at: string;
  raw: unknown;
}
interface TranscriptView {
  id: string;
  integration_id: string;
  provider: string;
  external_ticket_id: string;
  event_count: number;
  created_at: string;
  updated_at: string;
  limit: number;
  offset: number;
  events: TranscriptEventView[];
}

async function getTranscript(ctx: TestContext, token: string, id: string, query = ''): Promise<TranscriptView> {
  const res = await ctx.http.get(`/v1/transcripts/${id}${query}`).set(bearer(token));
  if (res.status !== 200) throw new Error(`transcript ${id}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as TranscriptView;
}

/** Checks one presented event against what its delivery should record. */
function expectEventOf(e: TranscriptEventView, d: Delivery) {
  const { emitted_at, ...expected } = d.expected!;
  expect(e).toMatchObject(expected);
  expect(e.id).toMatch(UUID);
  expect(e.received_at).toMatch(ISO);
  expect(e.raw).toEqual(d.body);
  if (emitted_at !== undefined) {
    // Front's emitted_at is unix seconds with a fraction; recorded to the millisecond.
    expect(e.occurred_at).toMatch(ISO);
    expect(Math.abs(Date.parse(e.occurred_at!) - (emitted_at as number) * 1000)).toBeLessThan(1.5);
  } else if (expected.occurred_at !== null) {
    expect(e.occurred_at).toMatch(ISO);
  }
}

// =============================================================================================== main

let ctx: TestContext;
let ws: Workspace;
let ws2: Workspace;
/** Per provider: one integration with a signing secret (deliveries signed), one without (unsigned). */
const signed = {} as Record<WebhookProvider, Integration>;
const open = {} as Record<WebhookProvider, Integration>;

beforeAll(async () => {
  ctx = await startTestApp();
  await ctx.startWorkers();
  [ws, ws2] = await Promise.all([createWorkspace(ctx), createWorkspace(ctx)]);
  for (const p of PROVIDERS) {
    signed[p] = await createIntegration(ctx, ws, p, newSecret());
    open[p] = await createIntegration(ctx, ws, p);
  }
});
afterAll(async () => {
  await ctx?.close();
});

// ------------------------------------------------------------------------------------- 1. integrations

describe('integrations (admin, admin-resources)', () => {
  test('POST /v1/integrations → 201 with id, provider, name, signing_secret_set and a webhook_url containing the id', async () => {
    for (const p of PROVIDERS) {
      const res = await ctx.http.post('/v1/integrations').set(bearer(ws.ownerKey)).send({ provider: p, name: `  My ${p}  `, signing_secret: newSecret() });
      expect(res.status).toBe(201);
      expect(Object.keys(res.body).sort()).toEqual(['created_at', 'id', 'name', 'provider', 'signing_secret_set', 'webhook_url']);
      expect(res.body).toMatchObject({ id: expect.stringMatching(UUID), provider: p, name: `My ${p}`, signing_secret_set: true, created_at: expect.stringMatching(ISO) });
      expect(res.body.webhook_url).toMatch(new RegExp(`/v1/webhooks/${p}/${res.body.id}$`));
      expect(Math.abs(Date.parse(res.body.created_at) - Date.now())).toBeLessThan(60_000);

      const unsigned = await ctx.http.post('/v1/integrations').set(bearer(ws.ownerKey)).send({ provider: p, name: 'No secret' });
      expect(unsigned.status).toBe(201);
      expect(unsigned.body.signing_secret_set).toBe(false);
    }
  });

  test('GET /v1/integrations lists the workspace\'s integrations only, newest first', async () => {
    const res = await ctx.http.get('/v1/integrations').set(bearer(ws.ownerKey));
    expect(res.status).toBe(200);
    const ids = (res.body.integrations as Integration[]).map((i) => i.id);
    for (const p of PROVIDERS) expect(ids).toEqual(expect.arrayContaining([signed[p].id, open[p].id]));
    const created = (res.body.integrations as Integration[]).map((i) => Date.parse(i.created_at));
    expect(created).toEqual([...created].sort((a, b) => b - a));
    const mine = (res.body.integrations as Integration[]).find((i) => i.id === signed.zendesk.id)!;
    const { secret: _secret, ...shape } = signed.zendesk;
    expect(mine).toEqual(shape);
    expect(mine.signing_secret_set).toBe(true);

    const other = await ctx.http.get('/v1/integrations').set(bearer(ws2.ownerKey));
    expect(other.status).toBe(200);
    expect((other.body.integrations as Integration[]).map((i) => i.id)).not.toContain(signed.zendesk.id);
  });

  test('the signing secret never leaves the service: not in responses, list, audit log or logs; sealed in the database', async () => {
    const secret = `plain-${hex(12)}`;
    const rotated = `rotated-${hex(12)}`;
    const responses: Response[] = [];
    const created = await ctx.http.post('/v1/integrations').set(bearer(ws.ownerKey)).send({ provider: 'zendesk', name: 'Leak check', signing_secret: secret });
    expect(created.status).toBe(201);
    responses.push(created);
    const id = created.body.id as string;
    responses.push(await ctx.http.put(`/v1/integrations/${id}/signing-secret`).set(bearer(ws.ownerKey)).send({ signing_secret: rotated }));
    responses.push(await ctx.http.get('/v1/integrations').set(bearer(ws.ownerKey)));
    // A delivery signed with it, accepted: nothing of the secret in that answer or its log line either.
    const integ: Integration = { ...(created.body as Integration), secret: rotated };
    responses.push(await deliver(ctx, integ, KITS.zendesk.ticket(KITS.zendesk.newTicketId())));
    expect(responses[3]!.status).toBe(200);
    const audit = await ctx.http.get('/v1/audit-log?limit=200').set(bearer(ws.ownerKey));
    expect(audit.status).toBe(200);
    responses.push(audit);

    for (const r of responses) {
      const text = JSON.stringify(r.body) + JSON.stringify(r.headers);
      expect(text).not.toContain(secret);
      expect(text).not.toContain(rotated);
    }
    // The audit log records what happened, without the secret.
    const entries = (audit.body.audit_entries as { action: string; target_id: string; details: Record<string, unknown> }[]).filter((e) => e.target_id === id);
    expect(entries.map((e) => e.action).sort()).toEqual(['integration.created', 'integration.signing_secret_set']);
    expect(entries.find((e) => e.action === 'integration.created')!.details).toMatchObject({ provider: 'zendesk', signing_secret_set: true });

    expect(ctx.logs.lines.length).toBeGreaterThan(0);
    for (const s of [secret, rotated]) {
      expect(ctx.logs.text).not.toContain(s);
      expect(ctx.logs.text).not.toContain(Buffer.from(s).toString('base64'));
    }

    const row = await ctx.db.selectFrom('integrations').select('signing_secret_sealed').where('id', '=', id).executeTakeFirstOrThrow();
    expect(row.signing_secret_sealed).toEqual(expect.any(String));
    for (const enc of ['utf8', 'base64', 'hex', 'base64url'] as const) {
      const form = Buffer.from(rotated).toString(enc);
      expect(row.signing_secret_sealed).not.toContain(form);
      expect(row.signing_secret_sealed).not.toContain(Buffer.from(secret).toString(enc));
    }
  });

  test('PUT signing-secret sets and rotates (old secret refused, new one accepted); "" removes it (unsigned accepted)', async () => {
    const kit = KITS.front;
    const i = await createIntegration(ctx, ws, 'front');
    expect(i.signing_secret_set).toBe(false);
    const first = newSecret();
    const set = await ctx.http.put(`/v1/integrations/${i.id}/signing-secret`).set(bearer(ws.ownerKey)).send({ signing_secret: first });
    expect(set.status).toBe(200);
    expect(set.body).toEqual({ id: i.id, provider: 'front', name: i.name, signing_secret_set: true, webhook_url: i.webhook_url, created_at: i.created_at });
    // Now an unsigned delivery is refused and a signed one accepted.
    expect((await deliver(ctx, i, kit.ticket(kit.newTicketId()))).status).toBe(401);
    expect((await deliver(ctx, { ...i, secret: first }, kit.ticket(kit.newTicketId()))).status).toBe(200);

    const second = newSecret();
    const rotate = await ctx.http.put(`/v1/integrations/${i.id}/signing-secret`).set(bearer(ws.ownerKey)).send({ signing_secret: second });
    expect(rotate.status).toBe(200);
    expect(rotate.body.signing_secret_set).toBe(true);
    const stale = await deliver(ctx, { ...i, secret: first }, kit.ticket(kit.newTicketId()));
    expect(stale.status).toBe(401);
    expect(stale.body.code).toBe('signature_invalid');
    expect((await deliver(ctx, { ...i, secret: second }, kit.ticket(kit.newTicketId()))).status).toBe(200);

    const removed = await ctx.http.put(`/v1/integrations/${i.id}/signing-secret`).set(bearer(ws.ownerKey)).send({ signing_secret: '' });
    expect(removed.status).toBe(200);
    expect(removed.body.signing_secret_set).toBe(false);
    const row = await ctx.db.selectFrom('integrations').select('signing_secret_sealed').where('id', '=', i.id).executeTakeFirstOrThrow();
    expect(row.signing_secret_sealed).toBeNull();
    expect((await deliver(ctx, i, kit.ticket(kit.newTicketId()))).status).toBe(200);

    const audit = await ctx.http.get('/v1/audit-log?limit=200').set(bearer(ws.ownerKey));
    const actions = (audit.body.audit_entries as { action: string; target_id: string }[]).filter((e) => e.target_id === i.id).map((e) => e.action);
    expect(actions.sort()).toEqual(['integration.created', 'integration.signing_secret_removed', 'integration.signing_secret_set', 'integration.signing_secret_set']);

    // A too-short secret is refused and changes nothing.
    const short = await ctx.http.put(`/v1/integrations/${i.id}/signing-secret`).set(bearer(ws.ownerKey)).send({ signing_secret: 'short' });
    expect(short.status).toBe(400);
  });

  test('DELETE → 204; the webhook URL then answers 404 and writes nothing; a second DELETE is 404', async () => {
    for (const p of PROVIDERS) {
      const i = await createIntegration(ctx, ws, p);
      const kit = KITS[p];
      expect((await deliver(ctx, i, kit.ticket(kit.newTicketId()))).status).toBe(200);
      const del = await ctx.http.delete(`/v1/integrations/${i.id}`).set(bearer(ws.ownerKey));
      expect(del.status).toBe(204);
      expect(del.text).toBe('');
      // Its transcripts and ledger go with it.
      expect(await countRows(ctx, i.id)).toEqual(NOTHING);
      await expectNothingWritten(ctx, async () => {
        const res = await deliver(ctx, i, kit.ticket(kit.newTicketId()));
        expect(res.status).toBe(404);
      });
      const list = await ctx.http.get('/v1/integrations').set(bearer(ws.ownerKey));
      expect((list.body.integrations as Integration[]).map((x) => x.id)).not.toContain(i.id);
      expect((await ctx.http.delete(`/v1/integrations/${i.id}`).set(bearer(ws.ownerKey))).status).toBe(404);
    }
  });

  test('an editor (and a viewer) gets 403 on every integration operation; nothing changes', async () => {
    const [editor, viewer] = await Promise.all([addMember(ctx, ws, 'editor'), addMember(ctx, ws, 'viewer')]);
    for (const who of [editor, viewer]) {
      const create = await ctx.http.post('/v1/integrations').set(bearer(who.token)).send({ provider: 'zendesk', name: 'Nope' });
      expect(create.status).toBe(403);
      expect(create.body.code).toBe('insufficient_role');
      expect((await ctx.http.get('/v1/integrations').set(bearer(who.token))).status).toBe(403);
      expect((await ctx.http.put(`/v1/integrations/${open.zendesk.id}/signing-secret`).set(bearer(who.token)).send({ signing_secret: newSecret() })).status).toBe(403);
      expect((await ctx.http.delete(`/v1/integrations/${open.zendesk.id}`).set(bearer(who.token))).status).toBe(403);
    }
    const list = await ctx.http.get('/v1/integrations').set(bearer(ws.ownerKey));
    const z = (list.body.integrations as Integration[]).find((x) => x.id === open.zendesk.id)!;
    expect(z.signing_secret_set).toBe(false);
    expect((list.body.integrations as Integration[]).some((x) => x.name === 'Nope')).toBe(false);
  });

  test('another workspace\'s integration id is 404 for PUT, DELETE and its transcripts, and stays intact', async () => {
    const i = await createIntegration(ctx, ws, 'helpscout');
    expect((await ctx.http.put(`/v1/integrations/${i.id}/signing-secret`).set(bearer(ws2.ownerKey)).send({ signing_secret: newSecret() })).status).toBe(404);
    expect((await ctx.http.delete(`/v1/integrations/${i.id}`).set(bearer(ws2.ownerKey))).status).toBe(404);
    expect((await ctx.http.get(`/v1/integrations/${i.id}/transcripts`).set(bearer(ws2.ownerKey))).status).toBe(404);
    const row = await ctx.db.selectFrom('integrations').selectAll().where('id', '=', i.id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ tenant_id: ws.tenantId, signing_secret_sealed: null });
    // An unknown id is the same 404 for the owner.
    expect((await ctx.http.delete(`/v1/integrations/${randomUUID()}`).set(bearer(ws.ownerKey))).status).toBe(404);
  });

  test('an unknown provider, unknown fields, a missing name or a short secret in the body → 400, nothing created', async () => {
    const count = async () => Number((await sql<{ n: number }>`select count(*)::int as n from integrations`.execute(ctx.db)).rows[0]!.n);
    const before = await count();
    for (const body of [
      { provider: 'intercom', name: 'Unknown provider' },
      { provider: 'Zendesk', name: 'Upper case' },
      { provider: 'zendesk', name: 'Extra field', webhook_url: 'https://evil.test/' },
      { provider: 'zendesk', name: 'Extra field', tenant_id: ws2.tenantId },
      { provider: 'zendesk' },
      { provider: 'zendesk', name: 'Short secret', signing_secret: 'abc' },
    ]) {
      const res = await ctx.http.post('/v1/integrations').set(bearer(ws.ownerKey)).send(body);
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status: 400, code: 'validation_failed' });
    }
    const unknownField = await ctx.http.put(`/v1/integrations/${open.front.id}/signing-secret`).set(bearer(ws.ownerKey)).send({ signing_secret: '', extra: 1 });
    expect(unknownField.status).toBe(400);
    expect(await count()).toBe(before);
  });
});

// ------------------------------------------------------------------------------------- 2. intake rules

describe('intake rules: a clear 4xx and nothing written', () => {
  test.each([['intercom'], ['Zendesk'], ['FRONT'], ['HelpScout'], ['help_scout']])('provider %p is not one of the three (lower case) → 404', async (provider) => {
    const lower = provider.toLowerCase() as WebhookProvider;
    const target = PROVIDERS.includes(lower) ? open[lower] : open.zendesk;
    const kit = KITS[target.provider];
    const d = kit.ticket(kit.newTicketId());
    await expectNothingWritten(ctx, async () => {
      const res = await postRaw(ctx, provider, target.id, d.raw, plainHeaders(target.provider, d));
      expect(res.status).toBe(404);
    });
    // The same delivery at the lower-case path is accepted: the 404 was the provider name's.
    expect((await postRaw(ctx, target.provider, target.id, d.raw, plainHeaders(target.provider, d))).status).toBe(200);
  });

  test.each(PROVIDERS.map((p) => [p]))('%s: unknown, deleted, other-provider and malformed integration ids → 404', async (p) => {
    const kit = KITS[p];
    const deleted = await createIntegration(ctx, ws, p);
    await ctx.http.delete(`/v1/integrations/${deleted.id}`).set(bearer(ws.ownerKey)).expect(204);
    const otherProvider = open[PROVIDERS.find((x) => x !== p)!];
    await expectNothingWritten(ctx, async () => {
      for (const id of [randomUUID(), deleted.id, otherProvider.id, 'not-a-uuid', `${open[p].id}x`, '123']) {
        const d = kit.ticket(kit.newTicketId());
        const res = await postRaw(ctx, p, id, d.raw, plainHeaders(p, d));
        expect({ id, status: res.status }).toEqual({ id, status: 404 });
      }
    });
  });

  test.each(PROVIDERS.map((p) => [p]))('%s: Content-Type text/plain (or none) → 415; application/json with a charset is fine', async (p) => {
    const kit = KITS[p];
    await expectNothingWritten(ctx, async () => {
      for (const type of ['text/plain', 'application/x-www-form-urlencoded']) {
        const d = kit.ticket(kit.newTicketId());
        const res = await postRaw(ctx, p, open[p].id, d.raw, { ...plainHeaders(p, d), 'content-type': type });
        expect(res.status).toBe(415);
        expect(res.body.code).toBe('unsupported_media_type');
      }
      // No Content-Type at all (a Buffer body gets none from the client).
      const d = kit.ticket(kit.newTicketId());
      const { 'content-type': _ct, ...rest } = plainHeaders(p, d);
      const res = await ctx.http.post(`/v1/webhooks/${p}/${open[p].id}`).set(rest).send(Buffer.from(d.raw));
      expect(res.request.getHeader('content-type')).toBeUndefined();
      expect(res.status).toBe(415);
    });
    const d = kit.ticket(kit.newTicketId());
    const ok = await postRaw(ctx, p, open[p].id, d.raw, { ...plainHeaders(p, d), 'content-type': 'application/json; charset=utf-8' });
    expect(ok.status).toBe(200);
  });

  test.each(PROVIDERS.map((p) => [p]))('%s: a body that is not JSON → 400; JSON that is not an object → 400 webhook_payload_invalid', async (p) => {
    const kit = KITS[p];
    const headers = plainHeaders(p, kit.ticket(kit.newTicketId()));
    await expectNothingWritten(ctx, async () => {
      for (const raw of ['{"id": 1,', 'ticket_id=123', '']) {
        const res = await postRaw(ctx, p, open[p].id, raw, headers);
        expect({ raw, status: res.status }).toEqual({ raw, status: 400 });
      }
      for (const raw of ['[{"ticket_id":123}]', '"zen:ticket:123"', '123', 'null', 'true']) {
        const res = await postRaw(ctx, p, open[p].id, raw, headers);
        expect({ raw, status: res.status, code: res.body.code }).toEqual({ raw, status: 400, code: 'webhook_payload_invalid' });
      }
    });
  });

  test.each(PROVIDERS.map((p) => [p]))('%s: a 1 MiB+ body → 413 (a ticket event that would otherwise be recorded)', async (p) => {
    const kit = KITS[p];
    const d = kit.ticket(kit.newTicketId());
    const padded = { ...d.body, padding: 'x'.repeat(1024 * 1024) };
    const raw = rawOf(padded);
    expect(Buffer.byteLength(raw)).toBeGreaterThan(1024 * 1024);
    await expectNothingWritten(ctx, async () => {
      const res = await postRaw(ctx, p, open[p].id, raw, plainHeaders(p, d));
      expect(res.status).toBe(413);
      expect(res.body.code).toBe('payload_too_large');
    });
    // Just under the limit, the same event is recorded.
    const fits = rawOf({ ...d.body, padding: 'x'.repeat(1024 * 1024 - Buffer.byteLength(d.raw) - 64) });
    expect(Buffer.byteLength(fits)).toBeLessThanOrEqual(1024 * 1024);
    expect((await postRaw(ctx, p, open[p].id, fits, plainHeaders(p, d))).status).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------- 3. signatures

describe('signatures', () => {
  describe.each(PROVIDERS.map((p) => [p]))('%s with a signing secret', (p) => {
    const kit = KITS[p];

    test('correctly signed → 200 {status: ok, transcript_id, external_ticket_id}, recorded', async () => {
      const ticketId = kit.newTicketId();
      const d = kit.ticket(ticketId);
      const before = await countRows(ctx, signed[p].id);
      const res = await deliver(ctx, signed[p], d);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ status: 'ok', transcript_id: expect.stringMatching(UUID), external_ticket_id: ticketId });
      expect(diff(await countRows(ctx, signed[p].id), before)).toEqual({ deliveries: 1, transcripts: 1, events: 1 });
    });

    test('tampered body, wrong secret, missing headers, a signature over another body → 401 signature_invalid, nothing written', async () => {
      const d = kit.ticket(kit.newTicketId());
      const good = headersFor(p, d, signed[p].secret);
      const other = kit.ticket(kit.newTicketId());
      const signatureHeaders = Object.keys(good).filter((h) => /signature|timestamp/.test(h));
      expect(signatureHeaders.length).toBeGreaterThan(0);
      const cases: [string, string, Record<string, string>][] = [
        ['tampered body (one character changed)', d.raw.replace(/"(Open|active|unassigned)"/, (_, s: string) => `"${s.toUpperCase()}"`), good],
        ['tampered body (trailing whitespace)', `${d.raw} `, good],
        ['wrong secret', d.raw, headersFor(p, d, newSecret())],
        ['no signature headers', d.raw, plainHeaders(p, d)],
        ...signatureHeaders.map((h): [string, string, Record<string, string>] => [`without ${h}`, d.raw, Object.fromEntries(Object.entries(good).filter(([k]) => k !== h))]),
        ['a valid signature over a different body', d.raw, headersFor(p, other, signed[p].secret)],
        ['an empty signature', d.raw, { ...good, ...Object.fromEntries(signatureHeaders.filter((h) => /signature$/.test(h)).map((h) => [h, ''])) }],
        ['a garbage signature', d.raw, { ...good, ...Object.fromEntries(signatureHeaders.filter((h) => /signature$/.test(h)).map((h) => [h, '!!!not base64!!!'])) }],
      ];
      expect(cases[0]![1]).not.toBe(d.raw);
      await expectNothingWritten(ctx, async () => {
        for (const [what, raw, headers] of cases) {
          const res = await postRaw(ctx, p, signed[p].id, raw, headers);
          expect({ what, status: res.status, code: res.body.code }).toEqual({ what, status: 401, code: 'signature_invalid' });
        }
      });
      // The untouched delivery still goes through: the refusals were the signatures'.
      expect((await postRaw(ctx, p, signed[p].id, d.raw, good)).status).toBe(200);
    });

    test('a signed non-ticket event with a bad signature is 401 too (verified before classification)', async () => {
      const [d] = kit.nonTicket();
      const res = await postRaw(ctx, p, signed[p].id, d!.raw, headersFor(p, d!, newSecret()));
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('signature_invalid');
    });

    if (p !== 'helpscout') {
      test('a timestamp 6 minutes old (or ahead) → 401; 4 minutes old is within the window', async () => {
        await expectNothingWritten(ctx, async () => {
          for (const offset of [-6 * 60_000, 6 * 60_000, -60 * 60_000]) {
            const d = kit.ticket(kit.newTicketId());
            const res = await deliver(ctx, signed[p], d, { now: new Date(Date.now() + offset) });
            expect({ offset, status: res.status, code: res.body.code }).toEqual({ offset, status: 401, code: 'signature_invalid' });
          }
        });
        const d = kit.ticket(kit.newTicketId());
        expect((await deliver(ctx, signed[p], d, { now: new Date(Date.now() - 4 * 60_000) })).status).toBe(200);
      });
    }
  });

  test.each(PROVIDERS.map((p) => [p]))('%s without a signing secret: unsigned deliveries are accepted (signature headers ignored)', async (p) => {
    const kit = KITS[p];
    const a = kit.ticket(kit.newTicketId());
    const res = await deliver(ctx, open[p], a);
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('ok');
    const b = kit.ticket(kit.newTicketId());
    expect((await postRaw(ctx, p, open[p].id, b.raw, headersFor(p, b, newSecret()))).status).toBe(200);
  });
});

// ------------------------------------------------------------------------------------ 4. classification

describe('classification', () => {
  describe.each(PROVIDERS.map((p) => [p]))('%s', (p) => {
    const kit = KITS[p];

    test('non-ticket events → 200 {status: ignored} exactly, nothing written', async () => {
      await expectNothingWritten(ctx, async () => {
        for (const d of kit.nonTicket()) {
          const res = await deliver(ctx, signed[p], d);
          expect({ type: d.event ?? d.body.type, status: res.status, body: res.body }).toEqual({ type: d.event ?? d.body.type, status: 200, body: { status: 'ignored' } });
        }
      });
    });

    test('first sight of a ticket creates its transcript; a second event appends to it, in order', async () => {
      const ticketId = kit.newTicketId();
      const a = kit.ticket(ticketId, 0);
      const b = kit.ticket(ticketId, 1);
      const before = await countRows(ctx, signed[p].id);
      const ra = await recorded(ctx, signed[p], a);
      expect(diff(await countRows(ctx, signed[p].id), before)).toEqual({ deliveries: 1, transcripts: 1, events: 1 });
      const rb = await recorded(ctx, signed[p], b);
      expect(rb).toEqual({ status: 'ok', transcript_id: ra.transcript_id, external_ticket_id: ticketId });
      expect(diff(await countRows(ctx, signed[p].id), before)).toEqual({ deliveries: 2, transcripts: 1, events: 2 });

      const t = await getTranscript(ctx, ws.ownerKey, ra.transcript_id);
      expect(t).toMatchObject({ id: ra.transcript_id, integration_id: signed[p].id, provider: p, external_ticket_id: ticketId, event_count: 2, limit: 50, offset: 0 });
      expect(t.created_at).toMatch(ISO);
      expect(Date.parse(t.updated_at)).toBeGreaterThanOrEqual(Date.parse(t.created_at));
      // Newest first.
      expect(t.events).toHaveLength(2);
      expectEventOf(t.events[0]!, b);
      expectEventOf(t.events[1]!, a);
      expect(Date.parse(t.events[0]!.received_at)).toBeGreaterThanOrEqual(Date.parse(t.events[1]!.received_at));

      // The same ticket id at another integration is another transcript.
      const elsewhere = await recorded(ctx, open[p], kit.ticket(ticketId, 2));
      expect(elsewhere.transcript_id).not.toBe(ra.transcript_id);
    });

    test('a partial payload is recorded with what it has', async () => {
      const ticketId = kit.newTicketId();
      const first = await recorded(ctx, signed[p], kit.ticket(ticketId));
      const d = kit.partial(ticketId);
      const before = await countRows(ctx, signed[p].id);
      const r = await recorded(ctx, signed[p], d);
      expect(r).toEqual({ status: 'ok', transcript_id: first.transcript_id, external_ticket_id: ticketId });
      expect(diff(await countRows(ctx, signed[p].id), before)).toEqual({ deliveries: 1, transcripts: 0, events: 1 });
      const t = await getTranscript(ctx, ws.ownerKey, r.transcript_id);
      expectEventOf(t.events[0]!, d);

      // A partial payload about a ticket never seen opens its transcript.
      const fresh = kit.newTicketId();
      const alone = await recorded(ctx, signed[p], kit.partial(fresh));
      expect(alone.external_ticket_id).toBe(fresh);
      expect(alone.transcript_id).not.toBe(first.transcript_id);
    });

    test('a ticket event with no ticket id anywhere → 400 webhook_payload_invalid, nothing written', async () => {
      await expectNothingWritten(ctx, async () => {
        for (const d of kit.noTicketId()) {
          const res = await deliver(ctx, signed[p], d);
          expect(res.status).toBe(400);
          expect(res.body.code).toBe('webhook_payload_invalid');
        }
      });
    });
  });

  test('front: sync echoes the X-Front-Challenge value and writes nothing', async () => {
    const challenge = `chl_${hex(8)}`;
    await expectNothingWritten(ctx, async () => {
      const res = await deliver(ctx, signed.front, delivery(frontSync(), { challenge }));
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ status: 'ignored', challenge });
      const unsignedRes = await deliver(ctx, open.front, delivery(frontSync(), { challenge: 'second' }));
      expect(unsignedRes.body).toEqual({ status: 'ignored', challenge: 'second' });
    });
  });

  test('front: application-webhook envelopes (inbound_received, outbound_sent, conversation_archived) and rule webhooks are recorded by their event type', async () => {
    const conversationId = KITS.front.newTicketId();
    for (const type of ['inbound', 'outbound', 'archive']) {
      const body = frontEvent({ type, conversationId });
      expect(body.type).not.toBe(type);
      const r = await recorded(ctx, signed.front, delivery(body));
      expect(r.external_ticket_id).toBe(conversationId);
    }
    // A rule webhook posts the event object itself, with no envelope.
    const rule = frontEvent({ type: 'tag', conversationId }).payload as Record<string, unknown>;
    const r = await recorded(ctx, signed.front, delivery(rule));
    expect(r.external_ticket_id).toBe(conversationId);
    const t = await getTranscript(ctx, ws.ownerKey, r.transcript_id);
    expect(t.events.map((e: { type: string }) => e.type).sort()).toEqual(['archive', 'inbound', 'outbound', 'tag']);
    // An application event whose event object is not a conversation event is still ignored.
    const mention = await deliver(ctx, signed.front, delivery(frontEvent({ type: 'mention', envelopeType: 'mention_added' })));
    expect(mention.body).toEqual({ status: 'ignored' });
  });

  test('helpscout: a delivery without X-HelpScout-Event is refused (400), nothing written', async () => {
    const d = KITS.helpscout.ticket(KITS.helpscout.newTicketId());
    await expectNothingWritten(ctx, async () => {
      const res = await postRaw(ctx, 'helpscout', open.helpscout.id, d.raw, { 'content-type': 'application/json' });
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('webhook_payload_invalid');
    });
  });

  test('zendesk: a numeric ticket id is recorded as a string; a trigger and an event about the same ticket share a transcript', async () => {
    const ticketId = KITS.zendesk.newTicketId();
    const fromEvent = await recorded(ctx, signed.zendesk, delivery(zendeskEvent({ ticketId: Number(ticketId) })));
    expect(fromEvent.external_ticket_id).toBe(ticketId);
    const fromTrigger = await recorded(ctx, signed.zendesk, KITS.zendesk.partial(ticketId));
    expect(fromTrigger).toEqual(fromEvent);
    const nested = await recorded(ctx, signed.zendesk, delivery({ ticket: { id: Number(ticketId), status: 'Closed' }, note: 'nested placeholder' }));
    expect(nested.transcript_id).toBe(fromEvent.transcript_id);
  });
});

// -------------------------------------------------------------------------------------- 5. exactly once

describe('exactly once', () => {
  describe.each(PROVIDERS.map((p) => [p]))('%s', (p) => {
    const kit = KITS[p];

    test('a redelivered event (re-signed later) returns the same transcript and adds nothing', async () => {
      const ticketId = kit.newTicketId();
      const d = kit.ticket(ticketId);
      const first = await recorded(ctx, signed[p], d);
      const before = await countRows(ctx);
      for (let i = 1; i <= 3; i++) {
        // Signed at another time: the Zendesk/Front timestamp headers (and so the signatures) differ.
        const again = await deliver(ctx, signed[p], d, { now: new Date(Date.now() - i * 2000) });
        expect(again.status).toBe(200);
        expect(again.body).toEqual(first);
      }
      expect(diff(await countRows(ctx), before)).toEqual(NOTHING);
      const ledger = await ctx.db.selectFrom('webhook_deliveries').selectAll().where('integration_id', '=', signed[p].id).where('transcript_id', '=', first.transcript_id).execute();
      expect(ledger).toHaveLength(1);
      expect(ledger[0]).toMatchObject({ duplicate_count: 3, external_ticket_id: ticketId });
      expect((await getTranscript(ctx, ws.ownerKey, first.transcript_id)).event_count).toBe(1);
    });

    test('50 concurrent deliveries of one event: all 200, one transcript id, exactly one event; another event then adds one', async () => {
      const ticketId = kit.newTicketId();
      const d = kit.ticket(ticketId);
      const before = await countRows(ctx, signed[p].id);
      const rs = await Promise.all(Array.from({ length: 50 }, () => deliver(ctx, signed[p], d)));
      expect(rs.map((r) => r.status)).toEqual(Array(50).fill(200));
      expect(new Set(rs.map((r) => r.body.transcript_id)).size).toBe(1);
      for (const r of rs) expect(r.body).toEqual({ status: 'ok', transcript_id: rs[0]!.body.transcript_id, external_ticket_id: ticketId });
      expect(diff(await countRows(ctx, signed[p].id), before)).toEqual({ deliveries: 1, transcripts: 1, events: 1 });
      const t = await getTranscript(ctx, ws.ownerKey, rs[0]!.body.transcript_id);
      expect(t.event_count).toBe(1);
      expect(t.events).toHaveLength(1);
      expectEventOf(t.events[0]!, d);

      const next = kit.ticket(ticketId, 1);
      const r2 = await recorded(ctx, signed[p], next);
      expect(r2.transcript_id).toBe(rs[0]!.body.transcript_id);
      expect(diff(await countRows(ctx, signed[p].id), before)).toEqual({ deliveries: 2, transcripts: 1, events: 2 });
      expect((await getTranscript(ctx, ws.ownerKey, r2.transcript_id)).event_count).toBe(2);
    });
  });

  test('helpscout: one signed body replayed 24× under 24 different (unsigned) event headers records one event; another body is a new event', async () => {
    const kit = KITS.helpscout;
    const ticketId = kit.newTicketId();
    const d = kit.ticket(ticketId);
    const before = await countRows(ctx, signed.helpscout.id);
    const first = await recorded(ctx, signed.helpscout, d);
    const names = ['convo.assigned', 'convo.moved', 'convo.status', 'convo.tags', 'convo.merged', 'convo.deleted'];
    for (let i = 1; i < 24; i++) {
      const res = await deliver(ctx, signed.helpscout, { ...d, event: `${names[i % names.length]!}${i}` });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status: 'ok', transcript_id: first.transcript_id });
    }
    expect(diff(await countRows(ctx, signed.helpscout.id), before)).toEqual({ deliveries: 1, transcripts: 1, events: 1 });
    const ledger = await ctx.db.selectFrom('webhook_deliveries').select('duplicate_count').where('integration_id', '=', signed.helpscout.id).where('transcript_id', '=', first.transcript_id).execute();
    expect(ledger.map((r) => Number(r.duplicate_count))).toEqual([23]);
    // The first delivery's event name is the one recorded.
    expect((await getTranscript(ctx, ws.ownerKey, first.transcript_id)).events.map((e) => e.type)).toEqual(['convo.created']);

    const changed = { ...d.body, status: 'closed' };
    const rebodied = await recorded(ctx, signed.helpscout, delivery(changed, { event: d.event! }));
    expect(rebodied.transcript_id).toBe(first.transcript_id);
    expect(diff(await countRows(ctx, signed.helpscout.id), before)).toEqual({ deliveries: 2, transcripts: 1, events: 2 });
  });

  test('zendesk/front: the dedupe key is the provider event id, per integration', async () => {
    for (const p of ['zendesk', 'front'] as const) {
      const kit = KITS[p];
      const d = kit.ticket(kit.newTicketId());
      const a = await recorded(ctx, signed[p], d);
      // The same event at another integration of the workspace is that integration's own first sight.
      const b = await recorded(ctx, open[p], d);
      expect(b.transcript_id).not.toBe(a.transcript_id);
      expect((await getTranscript(ctx, ws.ownerKey, b.transcript_id)).event_count).toBe(1);
    }
  });
});

describe('a webhooks.batch job run again after a crash', () => {
  test('answers as the first run did and counts each copy once (the copies ledger), however often the job reruns', async () => {
    const i = signed.zendesk;
    const item = (id: string) => ({
      id,
      tenant_id: ws.tenantId,
      integration_id: i.id,
      dedupe_key: `evt-rerun-${hex(4)}`,
      provider_event_id: null,
      external_ticket_id: `rerun-${hex(4)}`,
      type: 'zen:event-type:ticket.created',
      occurred_at: null,
      status: 'open',
      subject: 'Rerun',
      priority: null,
      requester: null,
      raw: '{}',
    });
    const original = item(`corr-${hex(6)}`);
    const copy = { ...original, id: `corr-${hex(6)}` };
    const firstRun = await ctx.services.webhookProcessor.processBatch([original, copy]);
    const retry = await ctx.services.webhookProcessor.processBatch([original, copy]);
    const again = await ctx.services.webhookProcessor.processBatch([copy]);
    expect(retry).toEqual(firstRun);
    expect(again).toEqual([firstRun[1]]);
    expect(firstRun.map((r) => (r.value as { was_duplicate: boolean }).was_duplicate)).toEqual([false, true]);
    const [row] = await ctx.db.selectFrom('webhook_deliveries').select('duplicate_count').where('integration_id', '=', i.id).where('dedupe_key', '=', original.dedupe_key).execute();
    expect(Number(row!.duplicate_count)).toBe(1);
  });
});

describe('exactly once across concurrent jobs (WEBHOOK_BATCH_MAX=1: every delivery its own job)', () => {
  let jctx: TestContext;
  let jws: Workspace;
  const integrations = {} as Record<WebhookProvider, Integration>;
  beforeAll(async () => {
    jctx = await startTestApp({ env: { WEBHOOK_BATCH_MAX: '1' } });
    await jctx.startWorkers();
    jws = await createWorkspace(jctx);
    for (const p of PROVIDERS) integrations[p] = await createIntegration(jctx, jws, p, newSecret());
  });
  afterAll(async () => {
    await jctx?.close();
  });

  test.each(PROVIDERS.map((p) => [p]))('%s: 50 concurrent copies of one event in 50 jobs → one event, one transcript, 49 duplicates counted', async (p) => {
    const kit = KITS[p];
    const ticketId = kit.newTicketId();
    const d = kit.ticket(ticketId);
    const rs = await Promise.all(Array.from({ length: 50 }, () => deliver(jctx, integrations[p], d)));
    expect(rs.map((r) => r.status)).toEqual(Array(50).fill(200));
    expect(new Set(rs.map((r) => r.body.transcript_id)).size).toBe(1);
    const t = await getTranscript(jctx, jws.ownerKey, rs[0]!.body.transcript_id);
    expect(t).toMatchObject({ external_ticket_id: ticketId, event_count: 1 });
    expect(t.events).toHaveLength(1);
    const ledger = await jctx.db.selectFrom('webhook_deliveries').selectAll().where('transcript_id', '=', t.id).execute();
    expect(ledger.map((l) => l.duplicate_count)).toEqual([49]);
  });

  test.each(PROVIDERS.map((p) => [p]))('%s: 20 different events about one new ticket, concurrently in 20 jobs → one transcript holding all 20', async (p) => {
    const kit = KITS[p];
    const ticketId = kit.newTicketId();
    const ds = Array.from({ length: 20 }, (_, v) => kit.ticket(ticketId, v));
    const rs = await Promise.all(ds.map((d) => deliver(jctx, integrations[p], d)));
    expect(rs.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(new Set(rs.map((r) => r.body.transcript_id)).size).toBe(1);
    const transcripts = await jctx.db.selectFrom('transcripts').selectAll().where('integration_id', '=', integrations[p].id).where('external_ticket_id', '=', ticketId).execute();
    expect(transcripts).toHaveLength(1);
    expect(transcripts[0]).toMatchObject({ id: rs[0]!.body.transcript_id, event_count: 20 });
    const t = await getTranscript(jctx, jws.ownerKey, transcripts[0]!.id);
    expect(t.events).toHaveLength(20);
    expect(t.events.map((e) => e.raw)).toEqual(expect.arrayContaining(ds.map((d) => d.body)));
  });
});

describe('payloads PostgreSQL cannot store as sent (NUL character, lone surrogate escape)', () => {
  let nctx: TestContext;
  let nws: Workspace;
  let integ: Integration;
  beforeAll(async () => {
    nctx = await startTestApp({ env: { JOB_WAIT_MS: '2000' } });
    await nctx.startWorkers();
    nws = await createWorkspace(nctx);
    integ = await createIntegration(nctx, nws, 'zendesk', newSecret());
  });
  afterAll(async () => {
    await nctx?.close();
  });

  test('answered 200 (recorded) or 400 (nothing written), never accepted and lost; innocent deliveries sent alongside are recorded', async () => {
    const kit = KITS.zendesk;
    // Valid JSON (RFC 8259 allows any escaped code point), but PostgreSQL refuses U+0000 in text and jsonb,
    // and unpaired surrogate escapes in jsonb.
    const poison = [
      delivery(zendeskTrigger({ title: 'Printer \u0000 jammed' })),
      delivery(zendeskEvent({ subject: 'Printer jammed \ud800' })),
    ];
    expect(poison[0]!.raw).toContain('\\u0000');
    expect(poison[1]!.raw).toContain('\\ud800');
    const innocents = Array.from({ length: 4 }, () => kit.ticket(kit.newTicketId()));
    const rs = await Promise.all([...poison, ...innocents].map((d) => deliver(nctx, integ, d)));
    const answers = rs.map((r) => `${r.status} ${r.body.status ?? r.body.code}`);
    // eslint-disable-next-line no-console
    console.log(`NUL / lone surrogate probe answers: ${answers.join(', ')}`);

    expect(rs.slice(poison.length).map((r) => r.status)).toEqual(Array(innocents.length).fill(200));
    for (const r of rs.slice(0, poison.length)) expect(['200 ok', '400 webhook_payload_invalid']).toContain(`${r.status} ${r.status === 200 ? r.body.status : r.body.code}`);
    const events = await sql<{ n: number }>`select count(*)::int as n from transcript_events`.execute(nctx.db);
    expect(events.rows[0]!.n).toBe(innocents.length + rs.slice(0, poison.length).filter((r) => r.status === 200).length);
  });
});

// ---------------------------------------------------------------------------------------------- 7. reading

describe('reading transcripts', () => {
  test('GET /v1/transcripts/{id} pages events newest first with limit and offset', async () => {
    const kit = KITS.zendesk;
    const ticketId = kit.newTicketId();
    const ds = [0, 1, 2, 3, 4].map((v) => kit.ticket(ticketId, v));
    let transcriptId = '';
    for (const d of ds) transcriptId = (await recorded(ctx, signed.zendesk, d)).transcript_id;
    const newestFirst = [...ds].reverse().map((d) => d.expected!.provider_event_id);

    const all = await getTranscript(ctx, ws.ownerKey, transcriptId);
    expect(all.event_count).toBe(5);
    expect(all.events.map((e) => e.provider_event_id)).toEqual(newestFirst);
    const p1 = await getTranscript(ctx, ws.ownerKey, transcriptId, '?limit=2');
    expect(p1).toMatchObject({ limit: 2, offset: 0, event_count: 5 });
    expect(p1.events.map((e) => e.provider_event_id)).toEqual(newestFirst.slice(0, 2));
    const p2 = await getTranscript(ctx, ws.ownerKey, transcriptId, '?limit=2&offset=2');
    expect(p2.events.map((e) => e.provider_event_id)).toEqual(newestFirst.slice(2, 4));
    const p3 = await getTranscript(ctx, ws.ownerKey, transcriptId, '?limit=2&offset=4');
    expect(p3.events.map((e) => e.provider_event_id)).toEqual(newestFirst.slice(4));
    expect((await getTranscript(ctx, ws.ownerKey, transcriptId, '?offset=5')).events).toEqual([]);
    for (const q of ['?limit=0', '?limit=201', '?offset=-1', '?limit=abc', '?sort=asc']) {
      expect({ q, status: (await ctx.http.get(`/v1/transcripts/${transcriptId}${q}`).set(bearer(ws.ownerKey))).status }).toEqual({ q, status: 400 });
    }
  });

  test('GET /v1/integrations/{id}/transcripts lists the integration\'s transcripts, most recently active first, paginated', async () => {
    const i = await createIntegration(ctx, ws, 'front', newSecret());
    const kit = KITS.front;
    const [t1, t2, t3] = [kit.newTicketId(), kit.newTicketId(), kit.newTicketId()];
    const a = await recorded(ctx, i, kit.ticket(t1, 0));
    const b = await recorded(ctx, i, kit.ticket(t2, 0));
    const c = await recorded(ctx, i, kit.ticket(t3, 0));
    await recorded(ctx, i, kit.ticket(t1, 1)); // t1 is now the most recently active

    const res = await ctx.http.get(`/v1/integrations/${i.id}/transcripts`).set(bearer(ws.ownerKey));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ limit: 50, offset: 0 });
    expect(res.body.transcripts.map((t: { id: string }) => t.id)).toEqual([a.transcript_id, c.transcript_id, b.transcript_id]);
    expect(res.body.transcripts[0]).toEqual({ id: a.transcript_id, external_ticket_id: t1, event_count: 2, created_at: expect.stringMatching(ISO), updated_at: expect.stringMatching(ISO) });
    expect(res.body.transcripts[1]).toMatchObject({ external_ticket_id: t3, event_count: 1 });

    const page = await ctx.http.get(`/v1/integrations/${i.id}/transcripts?limit=1&offset=1`).set(bearer(ws.ownerKey));
    expect(page.body).toMatchObject({ limit: 1, offset: 1 });
    expect(page.body.transcripts.map((t: { id: string }) => t.id)).toEqual([c.transcript_id]);
    const unknown = await ctx.http.get(`/v1/integrations/${randomUUID()}/transcripts`).set(bearer(ws.ownerKey));
    expect(unknown.status).toBe(404);
  });

  test('a viewer and a key with helpdesk-ingress:read may read; a key without it gets 403; another workspace gets 404', async () => {
    const kit = KITS.helpscout;
    const r = await recorded(ctx, signed.helpscout, kit.ticket(kit.newTicketId()));
    const viewer = await addMember(ctx, ws, 'viewer');
    const [reader, other] = await Promise.all([
      mintKey(ctx, ws.ownerKey, { scopes: ['helpdesk-ingress:read'] }),
      mintKey(ctx, ws.ownerKey, { scopes: ['tickets:read', 'admin-resources:read'] }),
    ]);
    for (const token of [viewer.token, reader.secret]) {
      expect((await ctx.http.get(`/v1/transcripts/${r.transcript_id}`).set(bearer(token))).status).toBe(200);
      expect((await ctx.http.get(`/v1/integrations/${signed.helpscout.id}/transcripts`).set(bearer(token))).status).toBe(200);
    }
    for (const path of [`/v1/transcripts/${r.transcript_id}`, `/v1/integrations/${signed.helpscout.id}/transcripts`]) {
      const res = await ctx.http.get(path).set(bearer(other.secret));
      expect(res.status).toBe(403);
      expect((await ctx.http.get(path)).status).toBe(401);
      const foreign = await ctx.http.get(path).set(bearer(ws2.ownerKey));
      expect(foreign.status).toBe(404);
      expect(JSON.stringify(foreign.body)).not.toContain(r.external_ticket_id);
    }
    expect((await ctx.http.get(`/v1/transcripts/${randomUUID()}`).set(bearer(ws.ownerKey))).status).toBe(404);
    expect((await ctx.http.get('/v1/transcripts/not-a-uuid').set(bearer(ws.ownerKey))).status).toBe(404);
  });

  test('integration_id (the secret half of the webhook URL) is shown only to an admin who may list integrations, never to a viewer, editor or helpdesk-ingress:read key', async () => {
    const kit = KITS.helpscout;
    const r = await recorded(ctx, signed.helpscout, kit.ticket(kit.newTicketId()));
    const viewer = await addMember(ctx, ws, 'viewer');
    const editor = await addMember(ctx, ws, 'editor');
    const reader = await mintKey(ctx, ws.ownerKey, { scopes: ['helpdesk-ingress:read'] });
    for (const token of [viewer.token, editor.token, reader.secret]) {
      for (const path of [`/v1/transcripts/${r.transcript_id}`, `/v1/integrations/${signed.helpscout.id}/transcripts`]) {
        const res = await ctx.http.get(path).set(bearer(token));
        expect(res.status).toBe(200);
        expect(res.body).not.toHaveProperty('integration_id');
        expect(JSON.stringify(res.body)).not.toContain(signed.helpscout.id);
      }
    }
    const admin = await addMember(ctx, ws, 'admin');
    for (const token of [admin.token, ws.ownerKey]) {
      expect((await getTranscript(ctx, token, r.transcript_id)).integration_id).toBe(signed.helpscout.id);
    }
  });
});

// =========================================================================== 3b. WEBHOOKS_REQUIRE_SIGNATURE

describe('WEBHOOKS_REQUIRE_SIGNATURE=true', () => {
  let rctx: TestContext;
  let rws: Workspace;
  const withSecret = {} as Record<WebhookProvider, Integration>;
  const without = {} as Record<WebhookProvider, Integration>;
  beforeAll(async () => {
    rctx = await startTestApp({ env: { WEBHOOKS_REQUIRE_SIGNATURE: 'true' } });
    await rctx.startWorkers();
    rws = await createWorkspace(rctx);
    for (const p of PROVIDERS) {
      withSecret[p] = await createIntegration(rctx, rws, p, newSecret());
      without[p] = await createIntegration(rctx, rws, p);
    }
  });
  afterAll(async () => {
    await rctx?.close();
  });

  test.each(PROVIDERS.map((p) => [p]))('%s: unsigned to an integration without a secret → 401 signature_required; signed to one with a secret → 200', async (p) => {
    const kit = KITS[p];
    await expectNothingWritten(rctx, async () => {
      for (const d of [kit.ticket(kit.newTicketId()), kit.nonTicket()[0]!]) {
        const res = await deliver(rctx, without[p], d);
        expect(res.status).toBe(401);
        expect(res.body.code).toBe('signature_required');
      }
      // Unsigned to the integration with a secret is a signature mismatch, not "required".
      const d = kit.ticket(kit.newTicketId());
      const res = await postRaw(rctx, p, withSecret[p].id, d.raw, plainHeaders(p, d));
      expect(res.status).toBe(401);
      expect(res.body.code).toBe('signature_invalid');
    });
    const ticketId = kit.newTicketId();
    const ok = await deliver(rctx, withSecret[p], kit.ticket(ticketId));
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ status: 'ok', transcript_id: expect.stringMatching(UUID), external_ticket_id: ticketId });
  });
});

// ========================================================================================== 6. throttle

describe('throttle (WEBHOOK_RATE_POINTS=3 per 2 s window, per integration)', () => {
  let tctx: TestContext;
  let tws: Workspace;
  beforeAll(async () => {
    tctx = await startTestApp({ env: { WEBHOOK_RATE_POINTS: '3', WEBHOOK_RATE_WINDOW_SECONDS: '2' } });
    await tctx.startWorkers();
    tws = await createWorkspace(tctx);
  });
  afterAll(async () => {
    await tctx?.close();
  });

  test('the 4th delivery → 429 with integer Retry-After, nothing written; other integrations unaffected; replayed after the window → 200 and recorded', async () => {
    const integrations = {} as Record<WebhookProvider, Integration>;
    for (const p of PROVIDERS) integrations[p] = await createIntegration(tctx, tws, p, newSecret());
    const neighbour = await createIntegration(tctx, tws, 'zendesk', newSecret());

    const throttled = {} as Record<WebhookProvider, { d: Delivery; ticketId: string; res: Response }>;
    for (const p of PROVIDERS) {
      const kit = KITS[p];
      const ticketId = kit.newTicketId();
      for (let v = 0; v < 3; v++) expect((await deliver(tctx, integrations[p], kit.ticket(ticketId, v))).status).toBe(200);
      const d = kit.ticket(ticketId, 3);
      const before = await countRows(tctx);
      const res = await deliver(tctx, integrations[p], d);
      expect(res.status).toBe(429);
      expect(res.headers['retry-after']).toMatch(/^\d+$/);
      const retryAfter = Number(res.headers['retry-after']);
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(2);
      expect(diff(await countRows(tctx), before)).toEqual(NOTHING);
      throttled[p] = { d, ticketId, res };
    }
    // Throttling is per integration: a neighbour in the same workspace is still served.
    expect((await deliver(tctx, neighbour, KITS.zendesk.ticket(KITS.zendesk.newTicketId()))).status).toBe(200);

    await sleep(Math.max(...PROVIDERS.map((p) => Number(throttled[p].res.headers['retry-after']))) * 1000 + 100);
    for (const p of PROVIDERS) {
      const { d, ticketId } = throttled[p];
      const before = await countRows(tctx, integrations[p].id);
      const replay = await deliver(tctx, integrations[p], d);
      expect(replay.status).toBe(200);
      expect(replay.body).toMatchObject({ status: 'ok', external_ticket_id: ticketId });
      // Recorded as new: it never entered the ledger when it was throttled.
      expect(diff(await countRows(tctx, integrations[p].id), before)).toEqual({ deliveries: 1, transcripts: 0, events: 1 });
      const t = await getTranscript(tctx, tws.ownerKey, replay.body.transcript_id);
      expect(t.event_count).toBe(4);
      expectEventOf(t.events[0]!, d);
    }
  });
});

// ============================================================================ 8. SIGKILL of a worker process

describe('a worker process SIGKILLed mid-burst', () => {
  let kctx: TestContext;
  let kws: Workspace;
  const children: ChildProcess[] = [];
  const integrations = {} as Record<WebhookProvider, Integration>;

  /** tsx runs the worker in a child node process: the worker gets its own process group so a kill reaches both. */
  function startWorker(): { proc: ChildProcess; output: () => string; started: Promise<void> } {
    const worker = spawnWorker(kctx.config, { detached: true, env: { WORKER_CONCURRENCY: '4' } });
    children.push(worker.proc);
    return { proc: worker.proc, output: worker.output, started: workerStarted(worker) };
  }

  beforeAll(async () => {
    // No in-process workers; a short wait so requests whose job died answer 202 promptly; small batches so the
    // burst is many jobs and the kill lands with some in a worker's hands.
    kctx = await startTestApp({ env: { JOB_WAIT_MS: '2000', WEBHOOK_BATCH_MAX: '4' } });
    kws = await createWorkspace(kctx);
    for (const p of PROVIDERS) integrations[p] = await createIntegration(kctx, kws, p, newSecret());
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) killGroup(c);
    await kctx?.close();
  });

  /** The identity of a recorded event: its provider event id, or (Help Scout) the conversation `number` we made unique. */
  const keyOf = (provider: string, raw: Record<string, unknown>) =>
    provider === 'zendesk' ? String(raw.id) : provider === 'front' ? String((raw.payload as { id: string }).id) : String(raw.number);

  test('after a new worker starts and clients retry 5xx/202 until 200, every distinct event is recorded exactly once', async () => {
    const TICKETS = 20;
    const EVENTS_PER_TICKET = 3;
    interface Send {
      integration: Integration;
      key: string;
      raw: string;
      headers: Record<string, string>;
    }
    const distinct: Send[] = [];
    let number = 1;
    for (const p of PROVIDERS) {
      const kit = KITS[p];
      for (let t = 0; t < TICKETS; t++) {
        const ticketId = kit.newTicketId();
        for (let v = 0; v < EVENTS_PER_TICKET; v++) {
          let d = kit.ticket(ticketId, v);
          if (p === 'helpscout') d = delivery({ ...d.body, number: number++ }, { event: d.event! });
          distinct.push({ integration: integrations[p], key: keyOf(p, d.body), raw: d.raw, headers: headersFor(p, d, integrations[p].secret) });
        }
      }
    }
    const DISTINCT = distinct.length;
    expect(new Set(distinct.map((s) => `${s.integration.provider}|${s.key}`)).size).toBe(DISTINCT);
    // Every 5th event delivered a second time, interleaved with the originals.
    const sends: Send[] = [];
    distinct.forEach((s, i) => {
      sends.push(s);
      if (i % 5 === 0) sends.push(s);
    });
    const redeliveries = sends.length - DISTINCT;

    const first = startWorker();
    await first.started;
    const queue = kctx.runtime.queues.queue('webhooks');
    const started = Date.now();
    const deadline = started + 50_000;
    const attempts: number[] = Array(sends.length).fill(0);
    const nonFinal: number[] = [];

    const untilOk = async (s: Send, i: number): Promise<Response> => {
      for (;;) {
        attempts[i]!++;
        const res = await postRaw(kctx, s.integration.provider, s.integration.id, s.raw, s.headers);
        if (res.status === 200) return res;
        if (res.status !== 202 && res.status < 500) throw new Error(`unexpected ${res.status}: ${JSON.stringify(res.body)}`);
        nonFinal.push(res.status);
        if (Date.now() > deadline) throw new Error(`delivery ${i} never answered 200 (last ${res.status})`);
        await sleep(200);
      }
    };
    const responses = Promise.all(sends.map((s, i) => untilOk(s, i)));

    // Kill once the worker is demonstrably mid-burst: something committed, jobs in its hands.
    await sleep(20);
    const { atKill, killedAt: killedClock, orphaned } = await killMidBurst({
      proc: first.proc,
      midBurst: async () => {
        const [c, active] = await Promise.all([countRows(kctx), queue.getActiveCount()]);
        return c.deliveries > 0 && active > 0 ? c : undefined;
      },
      activeCount: () => queue.getActiveCount(),
      redis: kctx.runtime.redis,
      stalledCheckKey: `${kctx.config.REDIS_PREFIX}:webhooks:stalled-check`,
    });
    const killedAt = killedClock - started;
    const second = startWorker();
    await second.started;

    const rs = await responses;
    const answeredAt = Date.now() - started;

    // Wait for the orphaned jobs to be re-run by BullMQ (their items are then copies of what the retries wrote).
    await eventually(
      async () => {
        const q = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'waiting-children');
        return Object.values(q).reduce((a, b) => a + b, 0) === 0 ? true : undefined;
      },
      50_000,
      'the webhooks queue to drain (orphaned jobs re-run)',
      250,
    );
    const failed = (await queue.getJobCounts('failed')).failed ?? 0;
    const c = await countRows(kctx);
    const events = await kctx.db
      .selectFrom('transcript_events as e')
      .innerJoin('transcripts as t', 't.id', 'e.transcript_id')
      .select(['e.transcript_id', 'e.raw', 't.integration_id', 't.external_ticket_id', 't.event_count'])
      .where('e.tenant_id', '=', kws.tenantId)
      .execute();
    const dupSum = Number(
      (await sql<{ n: number }>`select coalesce(sum(duplicate_count), 0)::int as n from webhook_deliveries where tenant_id = ${kws.tenantId}`.execute(kctx.db)).rows[0]!.n,
    );
    // eslint-disable-next-line no-console
    console.log(
      `webhooks SIGKILL test: ${sends.length} requests (${DISTINCT} distinct); killed at ${killedAt} ms with ${atKill.deliveries} deliveries ` +
        `committed and ${orphaned} active job(s) orphaned; ${nonFinal.length} non-200 answers retried (${nonFinal.filter((s) => s === 202).length} × 202); ` +
        `all answered 200 by ${answeredAt} ms, drained by ${Date.now() - started} ms; duplicate_count sum ${dupSum}; failed jobs ${failed}`,
    );

    expect(failed).toBe(0);
    expect(rs.map((r) => r.status)).toEqual(Array(sends.length).fill(200));
    expect(c).toEqual({ deliveries: DISTINCT, transcripts: TICKETS * PROVIDERS.length, events: DISTINCT });
    // Exactly the events sent, each once.
    const provOf = new Map(PROVIDERS.map((p) => [integrations[p].id, p]));
    const recordedKeys = events.map((e) => `${provOf.get(e.integration_id)}|${keyOf(provOf.get(e.integration_id)!, e.raw as Record<string, unknown>)}`);
    expect([...recordedKeys].sort()).toEqual(distinct.map((s) => `${s.integration.provider}|${s.key}`).sort());
    // Each transcript's count agrees with its events.
    const perTranscript = new Map<string, number>();
    for (const e of events) perTranscript.set(e.transcript_id, (perTranscript.get(e.transcript_id) ?? 0) + 1);
    for (const e of events) expect(e.event_count).toBe(perTranscript.get(e.transcript_id));
    expect([...perTranscript.values()]).toEqual(Array(TICKETS * PROVIDERS.length).fill(EVENTS_PER_TICKET));
    // Every answer names the transcript that holds its event.
    const transcriptOf = new Map(events.map((e, i) => [recordedKeys[i]!, { id: e.transcript_id, ticket: e.external_ticket_id }]));
    rs.forEach((r, i) => {
      const s = sends[i]!;
      const t = transcriptOf.get(`${s.integration.provider}|${s.key}`)!;
      expect(r.body).toEqual({ status: 'ok', transcript_id: t.id, external_ticket_id: t.ticket });
    });
    expect(dupSum).toBeGreaterThanOrEqual(redeliveries);
  }, 90_000);
});
