import { sql } from 'kysely';
import type { Executor } from '../../db';
import type { TicketRow } from '../../db/types';

export interface LedgerKey {
  channel: string;
  providerMessageId: string;
}

/** Claims the delivery; false when the ledger already has it (waits for an in-flight claimant to finish). */
export async function claimDelivery(db: Executor, tenantId: string, k: LedgerKey, correlationId: string): Promise<boolean> {
  const r = await db
    .insertInto('ingest_deliveries')
    .values({ tenant_id: tenantId, channel: k.channel, provider_message_id: k.providerMessageId, first_correlation_id: correlationId })
    .onConflict((oc) => oc.columns(['tenant_id', 'channel', 'provider_message_id']).doNothing())
    .executeTakeFirst();
  return Number(r.numInsertedOrUpdatedRows ?? 0) === 1;
}

export async function getDelivery(db: Executor, tenantId: string, k: LedgerKey) {
  return db
    .selectFrom('ingest_deliveries')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('channel', '=', k.channel)
    .where('provider_message_id', '=', k.providerMessageId)
    .executeTakeFirstOrThrow();
}

/** Counts each copy once: a retried job re-presents the same correlation id, which adds nothing. */
export async function countDuplicate(db: Executor, tenantId: string, k: LedgerKey, correlationId: string): Promise<void> {
  await sql`
    with seen as (
      insert into ingest_duplicate_copies (tenant_id, channel, provider_message_id, correlation_id)
      values (${tenantId}, ${k.channel}, ${k.providerMessageId}, ${correlationId})
      on conflict do nothing
      returning 1
    )
    update ingest_deliveries set duplicate_count = duplicate_count + (select count(*) from seen), last_seen_at = now()
    where tenant_id = ${tenantId} and channel = ${k.channel} and provider_message_id = ${k.providerMessageId}`.execute(db);
}

export async function completeDelivery(db: Executor, tenantId: string, k: LedgerKey, r: { ticket_id: string; customer_id: string; was_created: boolean }) {
  await db
    .updateTable('ingest_deliveries')
    .set(r)
    .where('tenant_id', '=', tenantId)
    .where('channel', '=', k.channel)
    .where('provider_message_id', '=', k.providerMessageId)
    .execute();
}

export async function recentDeliveries(db: Executor, tenantId: string, page: { limit: number; offset: number; channel?: string }) {
  let q = db.selectFrom('ingest_deliveries').selectAll().where('tenant_id', '=', tenantId);
  if (page.channel) q = q.where('channel', '=', page.channel);
  return q.orderBy('first_seen_at', 'desc').orderBy('provider_message_id').limit(page.limit).offset(page.offset).execute();
}

/**
 * Takes the sender's lock (serialising work on one sender within a workspace, so two first messages create
 * one customer), then reads their customer. Two statements on purpose: one statement's snapshot is taken
 * before its lock wait and would miss the handle the previous holder just committed.
 */
export async function lockAndFindHandle(db: Executor, tenantId: string, kind: string, handle: string): Promise<string | undefined> {
  await sql`select pg_advisory_xact_lock(hashtextextended(${`${tenantId}|${kind}|${handle}`}, 0))`.execute(db);
  // A new statement, so a new snapshot: it sees the handle the previous lock holder committed.
  const { rows } = await sql<{ customer_id: string }>`
    select customer_id from customer_handles where tenant_id = ${tenantId} and kind = ${kind} and handle = ${handle}`.execute(db);
  return rows[0]?.customer_id;
}

export async function insertHandle(db: Executor, tenantId: string, kind: string, handle: string, customerId: string): Promise<void> {
  await db
    .insertInto('customer_handles')
    .values({ tenant_id: tenantId, kind, handle, customer_id: customerId })
    .onConflict((oc) => oc.columns(['tenant_id', 'kind', 'handle']).doNothing())
    .execute();
}

/** The newest ticket any of these Message-IDs belongs to. */
export async function ticketByMessageIds(db: Executor, tenantId: string, ids: string[]): Promise<string | undefined> {
  if (ids.length === 0) return undefined;
  const row = await db
    .selectFrom('email_message_ids')
    .select('ticket_id')
    .where('tenant_id', '=', tenantId)
    .where('message_id', 'in', ids)
    .orderBy('created_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row?.ticket_id;
}

export async function rememberMessageId(db: Executor, tenantId: string, messageId: string, ticketId: string): Promise<void> {
  await db
    .insertInto('email_message_ids')
    .values({ tenant_id: tenantId, message_id: messageId, ticket_id: ticketId })
    .onConflict((oc) => oc.columns(['tenant_id', 'message_id']).doNothing())
    .execute();
}

/**
 * The sender's latest ticket in this conversation that is still in play (not closed or spam). A merged one is
 * returned too: the caller forwards it to its winner.
 */
export async function openConversationTicket(
  db: Executor,
  tenantId: string,
  source: string,
  conversationKey: string,
  windowHours: number,
): Promise<string | undefined> {
  const row = await db
    .selectFrom('tickets')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('source', '=', source)
    .where('conversation_key', '=', conversationKey)
    .where('status', 'not in', ['closed', 'spam'] as TicketRow['status'][])
    .where('updated_at', '>', sql<Date>`now() - make_interval(hours => ${windowHours})`)
    .orderBy('updated_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row?.id;
}

export async function agentTenant(db: Executor, agentId: string): Promise<string | undefined> {
  const row = await db.selectFrom('agents').select('tenant_id').where('id', '=', agentId).executeTakeFirst();
  return row?.tenant_id;
}
