import { randomBytes, randomInt } from 'node:crypto';
import { sql } from 'kysely';
import type { TestContext } from './context';
import { bearer, type Workspace } from './factories';
import { emailPayload, newEmailMessageId, smsPayload, telegramUpdate, webChatPayload, whatsappPayload } from './payloads';

/** The five channels that have an adapter. */
export const ADAPTER_CHANNELS = ['email', 'sms', 'whatsapp', 'telegram', 'web_chat'] as const;
export type AdapterChannel = (typeof ADAPTER_CHANNELS)[number];

/** Every registered channel, in registry order. */
export const REGISTERED_CHANNELS = ['email', 'sms', 'whatsapp', 'telegram', 'web_chat', 'facebook', 'instagram', 'line', 'viber'] as const;

export interface IngestVia {
  tenant_id?: string;
  agent_id?: string;
  token?: string;
}

/** POST /v1/ingest/{channel} with no credential: {tenant_id | agent_id, payload} or ?token=. */
export function ingest(ctx: TestContext, channel: string, payload: unknown, via: IngestVia | string) {
  const v: IngestVia = typeof via === 'string' ? { tenant_id: via } : via;
  const path = v.token !== undefined ? `/v1/ingest/${channel}?token=${encodeURIComponent(v.token)}` : `/v1/ingest/${channel}`;
  const body: Record<string, unknown> = { payload };
  if (v.tenant_id !== undefined) body.tenant_id = v.tenant_id;
  if (v.agent_id !== undefined) body.agent_id = v.agent_id;
  return ctx.http.post(path).send(body);
}

export interface RowCounts {
  tickets: number;
  ticket_events: number;
  customers: number;
  customer_handles: number;
  email_message_ids: number;
  ingest_deliveries: number;
  duplicate_total: number;
}

/** Row counts across the whole database (every workspace), so a write anywhere shows up. */
export async function countRows(ctx: TestContext, tenantId?: string): Promise<RowCounts> {
  const where = tenantId ? sql`where tenant_id = ${tenantId}` : sql``;
  const n = async (table: string) =>
    Number((await sql<{ n: number }>`select count(*)::int as n from ${sql.table(table)} ${where}`.execute(ctx.db)).rows[0]!.n);
  const dup = await sql<{ n: number }>`select coalesce(sum(duplicate_count), 0)::int as n from ingest_deliveries ${where}`.execute(ctx.db);
  return {
    tickets: await n('tickets'),
    ticket_events: await n('ticket_events'),
    customers: await n('customers'),
    customer_handles: await n('customer_handles'),
    email_message_ids: await n('email_message_ids'),
    ingest_deliveries: await n('ingest_deliveries'),
    duplicate_total: Number(dup.rows[0]!.n),
  };
}

/** Connects a channel through the API as the workspace owner; returns the connection (with its one-time token). */
export async function connect(ctx: TestContext, ws: Workspace, channel: string, body: Record<string, unknown> = {}) {
  const res = await ctx.http
    .put(`/v1/channels/${channel}`)
    .set(bearer(ws.ownerKey))
    .send({ config: {}, ...body });
  if (res.status !== 200) throw new Error(`connect ${channel} failed: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { details: { inbound_token?: string }; [k: string]: unknown };
}

export async function ticketDetail(ctx: TestContext, ws: Workspace, id: string) {
  const res = await ctx.http.get(`/v1/tickets/${id}`).set(bearer(ws.ownerKey));
  if (res.status !== 200) throw new Error(`ticket ${id}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as TicketDetail;
}

export interface TicketEvent {
  id: string;
  kind: string;
  body: string;
  meta: Record<string, unknown>;
  actor_type: string;
  actor_user_id?: string;
  actor_name?: string;
  created_at: string;
}
export interface TicketDetail {
  id: string;
  subject: string;
  description: string;
  status: string;
  source: string;
  customer_id: string;
  customer_name: string;
  customer_email: string;
  merged_into_id?: string;
  reopened_at?: string;
  events: TicketEvent[];
}

// ------------------------------------------------------------------------------------------------ senders

const hex = (bytes: number) => randomBytes(bytes).toString('hex');
const digits = (n: number) => Array.from({ length: n }, () => randomInt(0, 10)).join('');
let telegramUser = randomInt(1, 900_000) * 1000 + 7_100_000_000;

/**
 * One customer talking on one channel: every `next(text)` is a fresh provider message from the same sender,
 * in the same conversation. Email messages after the first reply to the previous one (In-Reply-To and
 * References), as a mail client would; chat channels thread by sender alone.
 */
export interface Conversation {
  channel: AdapterChannel;
  /** What the customer's name should read as on the ticket. */
  customerName: string;
  /** The email address the customer gets (email and web chat with an email), else ''. */
  customerEmail: string;
  next(text: string, o?: { threaded?: boolean }): Record<string, unknown>;
  /** Message-IDs sent so far (email only), normalised. */
  messageIds: string[];
}

export function conversation(channel: AdapterChannel): Conversation {
  switch (channel) {
    case 'email': {
      const from = `cust.${hex(5)}@customer.test`;
      const ids: string[] = [];
      return {
        channel,
        customerName: 'Ada Lovelace',
        customerEmail: from,
        messageIds: ids,
        next(text, o = {}) {
          const id = newEmailMessageId();
          const threaded = (o.threaded ?? true) && ids.length > 0;
          const p = emailPayload({
            from,
            messageId: id,
            text,
            ...(threaded ? { inReplyTo: ids[ids.length - 1], references: [...ids] } : {}),
          });
          ids.push(id.toLowerCase());
          return p as unknown as Record<string, unknown>;
        },
      };
    }
    case 'sms': {
      const from = `+1555${digits(7)}`;
      return { channel, customerName: from, customerEmail: '', messageIds: [], next: (text) => smsPayload({ from, body: text }) };
    }
    case 'whatsapp': {
      const from = `1650${digits(7)}`;
      return { channel, customerName: 'Grace Hopper', customerEmail: '', messageIds: [], next: (text) => whatsappPayload({ from, text }) };
    }
    case 'telegram': {
      const fromId = (telegramUser += 1);
      return { channel, customerName: 'Alan Turing', customerEmail: '', messageIds: [], next: (text) => telegramUpdate({ fromId, text }) };
    }
    case 'web_chat': {
      const visitorId = `v_${hex(6)}`;
      return { channel, customerName: 'Visitor Vera', customerEmail: '', messageIds: [], next: (text) => webChatPayload({ visitorId, text, name: 'Visitor Vera' }) };
    }
  }
}
