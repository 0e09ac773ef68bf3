import { sql } from 'kysely';
import type { Executor } from '../../db';
import { crossTenantRoute } from '../routing/store';
import type { IngestDeliveryRow } from '../../db/types';
import { pageKey, pastCursor, type Keyset } from '../../db/keyset';
import type { Cursor } from '../../lib/paging';

export interface LedgerKey {
  channel: string;
  providerMessageId: string;
}

export interface Claim extends LedgerKey {
  correlationId: string;
}

/**
 * Claims deliveries in one statement, in the order given (callers sort by key, so two batches wait on each
 * other's rows in one order and never in a cycle). A row another transaction is still inserting is waited
 * for. Returns the correlation ids whose claim won.
 */
export async function claimDeliveries(db: Executor, tenantId: string, claims: Claim[]): Promise<Set<string>> {
  if (claims.length === 0) return new Set();
  const { rows } = await sql<{ first_correlation_id: string }>`
    insert into ingest_deliveries (tenant_id, channel, provider_message_id, first_correlation_id)
    select ${tenantId}::uuid, u.channel, u.pmid, u.corr
    from unnest(${claims.map((c) => c.channel)}::text[], ${claims.map((c) => c.providerMessageId)}::text[], ${claims.map((c) => c.correlationId)}::text[])
      with ordinality as u(channel, pmid, corr, n)
    order by u.n
    on conflict (tenant_id, channel, provider_message_id) do nothing
    returning first_correlation_id`.execute(db);
  return new Set(rows.map((r) => r.first_correlation_id));
}

export const ledgerId = (k: LedgerKey) => `${k.channel}|${k.providerMessageId}`;

export async function getDeliveries(db: Executor, tenantId: string, keys: LedgerKey[]) {
  if (keys.length === 0) return new Map<string, IngestDeliveryRow>();
  const { rows } = await sql<IngestDeliveryRow>`
    select d.*
    from unnest(${keys.map((k) => k.channel)}::text[], ${keys.map((k) => k.providerMessageId)}::text[]) as u(channel, pmid)
    cross join lateral (
      select * from ingest_deliveries d where d.tenant_id = ${tenantId} and d.channel = u.channel and d.provider_message_id = u.pmid limit 1
    ) as d`.execute(db);
  return new Map(rows.map((r) => [ledgerId({ channel: r.channel, providerMessageId: r.provider_message_id }), r]));
}

/** Counts each copy once: a retried job re-presents the same correlation id, which adds nothing. */
export async function countDuplicates(db: Executor, tenantId: string, copies: Claim[]): Promise<void> {
  if (copies.length === 0) return;
  await sql`
    with u as (
      select * from unnest(${copies.map((c) => c.channel)}::text[], ${copies.map((c) => c.providerMessageId)}::text[], ${copies.map((c) => c.correlationId)}::text[])
        as u(channel, pmid, corr)
    ), seen as (
      insert into ingest_duplicate_copies (tenant_id, channel, provider_message_id, correlation_id)
      select ${tenantId}::uuid, channel, pmid, corr from u
      on conflict do nothing
      returning channel, provider_message_id
    ), keys as (
      select channel, pmid, (select count(*) from seen s where s.channel = u.channel and s.provider_message_id = u.pmid) as n
      from (select distinct channel, pmid from u) u
    )
    update ingest_deliveries d set duplicate_count = d.duplicate_count + keys.n, last_seen_at = now()
    from keys
    where d.tenant_id = ${tenantId} and d.channel = keys.channel and d.provider_message_id = keys.pmid`.execute(db);
}

export async function completeDeliveries(
  db: Executor,
  tenantId: string,
  done: (LedgerKey & { ticket_id: string; customer_id: string; was_created: boolean })[],
): Promise<void> {
  if (done.length === 0) return;
  await sql`
    update ingest_deliveries d set ticket_id = u.ticket_id, customer_id = u.customer_id, was_created = u.was_created
    from unnest(${done.map((d) => d.channel)}::text[], ${done.map((d) => d.providerMessageId)}::text[], ${done.map((d) => d.ticket_id)}::uuid[],
                ${done.map((d) => d.customer_id)}::uuid[], ${done.map((d) => d.was_created)}::boolean[])
      as u(channel, pmid, ticket_id, customer_id, was_created)
    where d.tenant_id = ${tenantId} and d.channel = u.channel and d.provider_message_id = u.pmid`.execute(db);
}

const DELIVERY_PAGES: Keyset = { key: 'seq', kind: 'sequence', direction: 'desc' };

/** Newest first, one keyset page (src/lib/paging.ts), read with one extra row. */
export async function recentDeliveries(db: Executor, tenantId: string, page: { limit: number; after?: Cursor; channel?: string }) {
  let q = db.selectFrom('ingest_deliveries').selectAll().select(pageKey(DELIVERY_PAGES).as('page_key')).where('tenant_id', '=', tenantId);
  if (page.channel) q = q.where('channel', '=', page.channel);
  if (page.after) q = q.where(pastCursor(DELIVERY_PAGES, page.after));
  return q.orderBy('seq', 'desc').limit(page.limit + 1).execute();
}

/**
 * Takes the senders' locks (serialising work on one sender within a workspace, so two first messages create
 * one customer, and a customer merge waits for a message of the person being merged): the customers' store's.
 * Callers read customers in a later statement: a statement's snapshot is taken before its lock waits.
 */
export { lockSenderKeys as lockSenders } from '../customers/store';

export async function crossTenantAgentWorkspace(db: Executor, agentId: string): Promise<string | undefined> {
  return crossTenantRoute(db, 'agent', agentId);
}
