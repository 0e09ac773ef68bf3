/**
 * Helpdesk webhook deliveries for the intake tests: per provider, realistic ticket events, non-ticket events,
 * partial and unreadable payloads (KITS), posted as the provider would (signed or not), and readers for what
 * they wrote (ledger counts, transcripts). Shared by the webhooks*.test.ts files.
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { type TestContext } from './context';
import { bearer, type Workspace } from './factories';
import { useTestApp } from './use-test-app';
import {
  frontEvent,
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
} from './webhooks';

export const PROVIDERS: WebhookProvider[] = ['zendesk', 'front', 'helpscout'];
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
export const hex = (n: number) => randomBytes(n).toString('hex');
export const newSecret = () => `whsec_${hex(16)}`;

// ------------------------------------------------------------------------------------------ deliveries

/** One delivery as the provider would post it: the exact bytes, and the header-borne parts. */
export interface Delivery {
  body: Record<string, unknown>;
  raw: string;
  /** Help Scout's X-HelpScout-Event. */
  event?: string;
  /** Front's X-Front-Challenge. */
  challenge?: string;
  /** What the recorded transcript event should read as (ticket events only). */
  expected?: Record<string, unknown>;
}

export const delivery = (body: Record<string, unknown>, extra: Omit<Delivery, 'body' | 'raw'> = {}): Delivery => ({ body, raw: rawOf(body), ...extra });

/** Per provider: realistic ticket events, non-ticket events, partial payloads and unreadable ones. */
export interface Kit {
  newTicketId(): string;
  /** A ticket event about `ticketId`; every call is a distinct provider event (variant 0: created, else an update). */
  ticket(ticketId: string, variant?: number): Delivery;
  nonTicket(): Delivery[];
  partial(ticketId: string): Delivery;
  /** Ticket events with no ticket id anywhere in the payload. */
  noTicketId(): Delivery[];
}

export const KITS: Record<WebhookProvider, Kit> = {
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
export function plainHeaders(provider: WebhookProvider, d: Delivery): Record<string, string> {
  const h: Record<string, string> = { 'content-type': 'application/json' };
  if (provider === 'helpscout') h['x-helpscout-event'] = d.event ?? 'convo.created';
  if (d.challenge !== undefined) h['x-front-challenge'] = d.challenge;
  return h;
}

/** Signed with `secret` (or unsigned without one), over exactly `d.raw`. */
export function headersFor(provider: WebhookProvider, d: Delivery, secret: string | undefined, opts: SignOptions = {}): Record<string, string> {
  if (secret === undefined) return plainHeaders(provider, d);
  return signedHeaders(provider, secret, d.raw, { ...(d.event ? { event: d.event } : {}), ...(d.challenge !== undefined ? { challenge: d.challenge } : {}), ...opts });
}

export function postRaw(ctx: TestContext, provider: string, integrationId: string, raw: string | Buffer, headers: Record<string, string>) {
  return ctx.http.post(`/v1/webhooks/${provider}/${integrationId}`).set(headers).send(raw);
}

export interface Integration {
  id: string;
  provider: WebhookProvider;
  name: string;
  signing_secret_set: boolean;
  webhook_url: string;
  created_at: string;
  /** Test-side only: the secret it was created with. */
  secret?: string;
}

export async function createIntegration(ctx: TestContext, ws: Workspace, provider: WebhookProvider, secret?: string): Promise<Integration> {
  const res = await ctx.http
    .post('/v1/integrations')
    .set(bearer(ws.ownerKey))
    .send({ provider, name: `${provider} ${hex(3)}`, ...(secret !== undefined ? { signing_secret: secret } : {}) });
  if (res.status !== 201) throw new Error(`create integration: ${res.status} ${JSON.stringify(res.body)}`);
  return { ...(res.body as Integration), ...(secret !== undefined ? { secret } : {}) };
}

/** Sends `d` to the integration, signed with its secret when it has one. */
export function deliver(ctx: TestContext, i: Integration, d: Delivery, opts: SignOptions = {}) {
  return postRaw(ctx, i.provider, i.id, d.raw, headersFor(i.provider, d, i.secret, opts));
}

export interface OkResult {
  status: 'ok';
  transcript_id: string;
  external_ticket_id: string;
}

export async function recorded(ctx: TestContext, i: Integration, d: Delivery): Promise<OkResult> {
  const res = await deliver(ctx, i, d);
  if (res.status !== 200 || res.body.status !== 'ok') throw new Error(`deliver ${i.provider}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as OkResult;
}

export interface Counts {
  deliveries: number;
  transcripts: number;
  events: number;
}

/** Row counts of the three intake tables, across every workspace (or one integration's). */
export async function countRows(ctx: TestContext, integrationId?: string): Promise<Counts> {
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
export const NOTHING: Counts = { deliveries: 0, transcripts: 0, events: 0 };
export const diff = (after: Counts, before: Counts): Counts => ({
  deliveries: after.deliveries - before.deliveries,
  transcripts: after.transcripts - before.transcripts,
  events: after.events - before.events,
});

export async function expectNothingWritten(ctx: TestContext, action: () => Promise<unknown>) {
  const before = await countRows(ctx);
  await action();
  expect(diff(await countRows(ctx), before)).toEqual(NOTHING);
}

export interface TranscriptEventView {
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
export interface TranscriptView {
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

export async function getTranscript(ctx: TestContext, token: string, id: string, query = ''): Promise<TranscriptView> {
  const res = await ctx.http.get(`/v1/transcripts/${id}${query}`).set(bearer(token));
  if (res.status !== 200) throw new Error(`transcript ${id}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as TranscriptView;
}

/** Checks one presented event against what its delivery should record. */
export function expectEventOf(e: TranscriptEventView, d: Delivery) {
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


/** The common suite: an app with workers, two workspaces, and per provider one signed and one unsigned integration. */
export interface WebhookSuite {
  ctx: TestContext;
  ws: Workspace;
  ws2: Workspace;
  /** Per provider: one integration with a signing secret (deliveries signed), one without (unsigned). */
  signed: Record<WebhookProvider, Integration>;
  open: Record<WebhookProvider, Integration>;
}

/** The webhook files' app for the file: workers running, two workspaces, and per provider a signed and an unsigned integration in the first. */
export function useWebhookSuite(): WebhookSuite {
  const signed = {} as Record<WebhookProvider, Integration>;
  const open = {} as Record<WebhookProvider, Integration>;
  const { ctx, workspaces: [ws, ws2] } = useTestApp({
    workers: true,
    workspaces: 2,
    setup: async () => {
      for (const p of PROVIDERS) {
        signed[p] = await createIntegration(ctx, ws, p, newSecret());
        open[p] = await createIntegration(ctx, ws, p);
      }
    },
  });
  return { ctx, ws, ws2, signed, open };
}
