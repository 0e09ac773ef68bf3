import { sql } from 'kysely';
import type { Executor } from '../../db';
import type { OutboundMessageRow, OutboundState } from '../../db/types';
import type { StoredMailboxRef } from '../mailbox/store';

/** A new outbox row, in the reply's transaction. A second write for the same reply is a no-op. */
export async function insertOutbound(
  db: Executor,
  tenantId: string,
  o: { event_id: string; ticket_id: string; channel: string; recipient: string | null; state: 'queued' | 'sent'; sender?: string; template?: Record<string, unknown> },
): Promise<void> {
  await db
    .insertInto('outbound_messages')
    .values({
      tenant_id: tenantId,
      event_id: o.event_id,
      ticket_id: o.ticket_id,
      channel: o.channel,
      recipient: o.recipient,
      state: o.state,
      ...(o.sender ? { sender: o.sender } : {}),
      ...(o.template ? { template: JSON.stringify(o.template) } : {}),
      ...(o.state === 'sent' ? { sent_at: sql<Date>`now()` } : {}),
    })
    .onConflict((oc) => oc.columns(['tenant_id', 'event_id']).doNothing())
    .execute();
}

export async function getOutbound(db: Executor, tenantId: string, eventId: string): Promise<OutboundMessageRow | undefined> {
  return db.selectFrom('outbound_messages').selectAll().where('tenant_id', '=', tenantId).where('event_id', '=', eventId).executeTakeFirst();
}

/**
 * Claims a queued send whose backoff has passed: it becomes `sending`, committed on its own before any request
 * leaves. Exactly one run of the job gets the row; every other (a redelivery, the sweep's copy) gets nothing.
 */
export async function claimOutbound(db: Executor, tenantId: string, eventId: string): Promise<OutboundMessageRow | undefined> {
  return db
    .updateTable('outbound_messages')
    // Milliseconds, as a JavaScript Date holds them: the claim's time is what settles it (settleClaim).
    .set({ state: 'sending', claimed_at: sql<Date>`date_trunc('milliseconds', clock_timestamp())`, attempts: sql<number>`attempts + 1`, updated_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('event_id', '=', eventId)
    .where('state', '=', 'queued')
    .where((eb) => eb.or([eb('next_attempt_at', 'is', null), eb('next_attempt_at', '<=', sql<Date>`now()`)]))
    .returningAll()
    .executeTakeFirst();
}

export interface Settlement {
  state: OutboundState;
  sender?: string;
  provider_message_id?: string | null;
  message_id?: string | null;
  last_error?: string | null;
  error_code?: string | null;
  segments?: number | null;
  next_attempt_at?: Date | null;
  /** Handing a claim back unsent: its attempt did not count. */
  attempts?: number;
  sent?: boolean;
}

/**
 * Ends a claim with what the attempt came to. Only the claim that is still current settles: when the sweep
 * already declared it `unknown` (the worker was presumed dead), the late answer changes nothing here.
 */
export async function settleClaim(db: Executor, tenantId: string, eventId: string, claimedAt: Date, s: Settlement): Promise<boolean> {
  const { sent, ...cols } = s;
  const r = await db
    .updateTable('outbound_messages')
    .set({ ...cols, ...(sent ? { sent_at: sql<Date>`now()` } : {}), updated_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('event_id', '=', eventId)
    .where('state', '=', 'sending')
    .where('claimed_at', '=', claimedAt)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}

/** Back to the queue on an agent's explicit retry; only from a state that sent nothing for sure or is unknown. */
export async function requeueOutbound(db: Executor, tenantId: string, eventId: string, from: OutboundState[]): Promise<OutboundMessageRow | undefined> {
  return db
    .updateTable('outbound_messages')
    .set({ state: 'queued', next_attempt_at: null, claimed_at: null, last_error: null, error_code: null, updated_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('event_id', '=', eventId)
    .where('state', 'in', from)
    .returningAll()
    .executeTakeFirst();
}

/** The sends a status callback names, locked so two callbacks for one message move it in turn. */
export async function lockByProviderIds(db: Executor, tenantId: string, channel: string, ids: string[]): Promise<OutboundMessageRow[]> {
  if (ids.length === 0) return [];
  return db
    .selectFrom('outbound_messages')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('channel', '=', channel)
    .where('provider_message_id', 'in', ids)
    .orderBy('event_id')
    .forUpdate()
    .execute();
}

/** A status callback's move; `delivered_at`/`read_at` keep when it happened. */
export async function moveState(db: Executor, tenantId: string, eventId: string, u: { state: OutboundState; last_error?: string | null; error_code?: string | null }) {
  await db
    .updateTable('outbound_messages')
    .set({
      ...u,
      ...(u.state === 'delivered' ? { delivered_at: sql<Date>`now()` } : {}),
      ...(u.state === 'read' ? { read_at: sql<Date>`now()`, delivered_at: sql<Date>`coalesce(delivered_at, now())` } : {}),
      updated_at: sql`now()`,
    })
    .where('tenant_id', '=', tenantId)
    .where('event_id', '=', eventId)
    .execute();
}

/** Sends still queued a while after they were due (their job was lost, e.g. Redis was down). */
export async function crossTenantStaleOutbound(db: Executor, olderThanSeconds: number): Promise<{ tenant_id: string; event_id: string; attempts: number }[]> {
  return db
    .selectFrom('outbound_messages')
    .select(['tenant_id', 'event_id', 'attempts'])
    .where('state', '=', 'queued')
    .where(sql<boolean>`coalesce(next_attempt_at, created_at) < now() - make_interval(secs => ${olderThanSeconds})`)
    .limit(1000)
    .execute();
}

/** Claims older than the send timeout: the worker holding them died mid-send (or hangs past its deadline). */
export async function crossTenantAbandonedClaims(db: Executor, olderThanMs: number): Promise<{ tenant_id: string; event_id: string; claimed_at: Date }[]> {
  const rows = await db
    .selectFrom('outbound_messages')
    .select(['tenant_id', 'event_id', 'claimed_at'])
    .where('state', '=', 'sending')
    .where('claimed_at', '<', sql<Date>`now() - make_interval(secs => ${olderThanMs / 1000})`)
    .limit(1000)
    .execute();
  return rows.map((r) => ({ ...r, claimed_at: r.claimed_at! }));
}

/** A provider said this customer's handle of the channel cannot be reached (Telegram: the bot was blocked). */
export async function markUnreachable(db: Executor, tenantId: string, customerId: string, kind: string, reason: string) {
  await db
    .updateTable('customer_handles')
    .set({ unreachable_at: sql<Date>`now()`, unreachable_reason: reason })
    .where('tenant_id', '=', tenantId)
    .where('customer_id', '=', customerId)
    .where('kind', '=', kind)
    .execute();
}


/** The customer's latest message on a ticket: its provider id, its own timestamp, and its kind. */
export async function lastInbound(db: Executor, tenantId: string, ticketId: string): Promise<{ provider_message_id: string | null; sent_at: string | null; created_at: Date } | undefined> {
  const { rows } = await sql<{ provider_message_id: string | null; sent_at: string | null; created_at: Date }>`
    select meta->>'provider_message_id' as provider_message_id, meta->>'sent_at' as sent_at, created_at
    from ticket_events
    where tenant_id = ${tenantId} and ticket_id = ${ticketId} and kind like 'inbound\\_%'
    order by created_at desc, seq desc
    limit 1`.execute(db);
  return rows[0];
}

/** What a reply's send needs: the reply, its ticket, the customer, and for email the thread's Message-IDs (oldest first). */
export async function replyContext(db: Executor, tenantId: string, eventId: string) {
  const row = await db
    .selectFrom('ticket_events as e')
    .innerJoin('tickets as t', (j) => j.onRef('t.tenant_id', '=', 'e.tenant_id').onRef('t.id', '=', 'e.ticket_id'))
    .innerJoin('customers as c', (j) => j.onRef('c.tenant_id', '=', 't.tenant_id').onRef('c.id', '=', 't.customer_id'))
    .select(['e.body', 'e.ticket_id', 't.subject', 't.source', 't.conversation_key', 't.customer_id', 'c.email', 'c.display_name'])
    .where('e.tenant_id', '=', tenantId)
    .where('e.id', '=', eventId)
    .executeTakeFirst();
  if (!row) return undefined;
  const last = await lastInbound(db, tenantId, row.ticket_id);
  if (row.source !== 'email') return { ...row, lastInbound: last, thread: [] as string[], lastInboundMessageId: null, lastInboundSubject: null, lastInboundMailbox: null };
  // The thread as written: the customers' Message-IDs (case kept, from their events) and ours, oldest first.
  // A customer's message also says its subject and, when the connected mailbox polled it, where it sits there.
  const { rows: thread } = await sql<{ message_id: string; inbound: boolean; subject: string | null; mailbox: StoredMailboxRef | null }>`
    select message_id, inbound, subject, mailbox from (
      select meta->>'message_id' as message_id, true as inbound, meta->>'subject' as subject, meta->'mailbox' as mailbox, created_at, seq
      from ticket_events
      where tenant_id = ${tenantId} and ticket_id = ${row.ticket_id} and kind = 'inbound_email' and meta ? 'message_id'
      union all
      select o.message_id, false, null, null, o.sent_at, 0
      from outbound_messages o
      where o.tenant_id = ${tenantId} and o.ticket_id = ${row.ticket_id} and o.channel = 'email' and o.state in ('sent', 'delivered', 'read') and o.message_id is not null
    ) t
    order by created_at, seq`.execute(db);
  const lastMail = [...thread].reverse().find((t) => t.inbound);
  return {
    ...row,
    lastInbound: last,
    thread: thread.map((t) => t.message_id),
    lastInboundMessageId: lastMail?.message_id ?? null,
    lastInboundSubject: lastMail?.subject ?? null,
    lastInboundMailbox: lastMail?.mailbox ?? null,
  };
}

/** A customer handle of a kind, when the ticket has no conversation key to answer on (a ticket made by API). */
export async function handleOf(db: Executor, tenantId: string, customerId: string, kind: string): Promise<{ handle: string; unreachable_at: Date | null } | undefined> {
  return db
    .selectFrom('customer_handles')
    .select(['handle', 'unreachable_at'])
    .where('tenant_id', '=', tenantId)
    .where('customer_id', '=', customerId)
    .where('kind', '=', kind)
    .executeTakeFirst();
}

/** A ticket's deliveries, newest reply first (GET /v1/tickets/{id}/deliveries). */
export async function ticketDeliveries(db: Executor, tenantId: string, ticketId: string): Promise<OutboundMessageRow[]> {
  return db.selectFrom('outbound_messages').selectAll().where('tenant_id', '=', tenantId).where('ticket_id', '=', ticketId).orderBy('created_at', 'desc').limit(500).execute();
}

/**
 * One part of a reply sent in several provider messages, acknowledged: recorded (committed) before the next part
 * goes, and only while this worker's claim holds, so a retry never sends an acknowledged part again.
 */
export async function recordPart(db: Executor, tenantId: string, eventId: string, claimedAt: Date, part: { index: number; provider_message_id: string }): Promise<boolean> {
  const r = await db
    .updateTable('outbound_messages')
    .set({ parts: sql`parts || ${JSON.stringify([part])}::jsonb`, updated_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('event_id', '=', eventId)
    .where('state', '=', 'sending')
    .where('claimed_at', '=', claimedAt)
    .executeTakeFirst();
  return Number(r.numUpdatedRows) === 1;
}
