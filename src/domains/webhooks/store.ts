import { sql } from 'kysely';
import type { Executor } from '../../db';
import { addRoute, removeRoute } from '../routing/store';
import { pageKey, pastCursor, type Keyset } from '../../db/keyset';
import type { Cursor } from '../../lib/paging';
import type { IntegrationRow, TranscriptEventRow, TranscriptRow } from '../../db/types';

export async function insertIntegration(db: Executor, tenantId: string, i: { id: string; provider: IntegrationRow['provider']; name: string; signing_secret_sealed: string | null }) {
  await addRoute(db, tenantId, 'integration', i.id);
  return db.insertInto('integrations').values({ ...i, tenant_id: tenantId }).returningAll().executeTakeFirstOrThrow();
}

export async function countIntegrations(db: Executor, tenantId: string): Promise<number> {
  const row = await db.selectFrom('integrations').select((eb) => eb.fn.countAll<string>().as('n')).where('tenant_id', '=', tenantId).executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function listIntegrations(db: Executor, tenantId: string) {
  return db.selectFrom('integrations').selectAll().where('tenant_id', '=', tenantId).orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
}

export async function getIntegration(db: Executor, tenantId: string, id: string) {
  return db.selectFrom('integrations').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
}

export async function setSigningSecret(db: Executor, tenantId: string, id: string, sealed: string | null) {
  return db
    .updateTable('integrations')
    .set({ signing_secret_sealed: sealed, updated_at: sql`now()` })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
}

export async function deleteIntegration(db: Executor, tenantId: string, id: string): Promise<boolean> {
  const r = await db.deleteFrom('integrations').where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
  if (Number(r.numDeletedRows) !== 1) return false;
  await removeRoute(db, tenantId, 'integration', id);
  return true;
}

/** The intake lookup: the integration id in the URL is what selects the workspace, so this is not tenant-scoped. */
export async function crossTenantIntegrationForIntake(db: Executor, id: string) {
  return db
    .selectFrom('routes as r')
    .innerJoin('integrations as i', (j) => j.onRef('i.tenant_id', '=', 'r.tenant_id').on('i.id', '=', id))
    .select(['i.id', 'i.tenant_id', 'i.provider', 'i.signing_secret_sealed'])
    .where('r.kind', '=', 'integration')
    .where('r.key', '=', id)
    .executeTakeFirst();
}

export interface DeliveryKey {
  integrationId: string;
  dedupeKey: string;
}
export const deliveryId = (k: DeliveryKey) => `${k.integrationId}|${k.dedupeKey}`;

/** Claims deliveries in one statement, in the order given (callers sort by key); returns the winning correlation ids. */
export async function claimDeliveries(db: Executor, tenantId: string, claims: (DeliveryKey & { correlationId: string })[]): Promise<Set<string>> {
  if (claims.length === 0) return new Set();
  const { rows } = await sql<{ first_correlation_id: string }>`
    insert into webhook_deliveries (tenant_id, integration_id, dedupe_key, first_correlation_id)
    select ${tenantId}::uuid, u.integration_id, u.dedupe_key, u.corr
    from unnest(${claims.map((c) => c.integrationId)}::uuid[], ${claims.map((c) => c.dedupeKey)}::text[], ${claims.map((c) => c.correlationId)}::text[])
      with ordinality as u(integration_id, dedupe_key, corr, n)
    order by u.n
    on conflict (tenant_id, integration_id, dedupe_key) do nothing
    returning first_correlation_id`.execute(db);
  return new Set(rows.map((r) => r.first_correlation_id));
}

export interface DeliveryRecord {
  integration_id: string;
  dedupe_key: string;
  first_correlation_id: string;
  transcript_id: string;
  external_ticket_id: string;
}

export async function getDeliveries(db: Executor, tenantId: string, keys: DeliveryKey[]): Promise<Map<string, DeliveryRecord>> {
  if (keys.length === 0) return new Map();
  const { rows } = await sql<DeliveryRecord>`
    select d.integration_id, d.dedupe_key, d.first_correlation_id, d.transcript_id, d.external_ticket_id
    from unnest(${keys.map((k) => k.integrationId)}::uuid[], ${keys.map((k) => k.dedupeKey)}::text[]) as u(integration_id, dedupe_key)
    cross join lateral (
      select * from webhook_deliveries d
      where d.tenant_id = ${tenantId} and d.integration_id = u.integration_id and d.dedupe_key = u.dedupe_key
      limit 1
    ) as d`.execute(db);
  return new Map(rows.map((r) => [deliveryId({ integrationId: r.integration_id, dedupeKey: r.dedupe_key }), r]));
}

/** Counts each copy once: a retried job re-presents the same correlation ids, which add nothing. */
export async function countDuplicates(db: Executor, tenantId: string, copies: (DeliveryKey & { correlationId: string })[]): Promise<void> {
  if (copies.length === 0) return;
  await sql`
    with u as (
      select * from unnest(${copies.map((k) => k.integrationId)}::uuid[], ${copies.map((k) => k.dedupeKey)}::text[], ${copies.map((k) => k.correlationId)}::text[])
        as u(integration_id, dedupe_key, corr)
    ), seen as (
      insert into webhook_duplicate_copies (tenant_id, integration_id, dedupe_key, correlation_id)
      select ${tenantId}::uuid, integration_id, dedupe_key, corr from u
      on conflict do nothing
      returning integration_id, dedupe_key
    ), keys as (
      select integration_id, dedupe_key, (select count(*) from seen s where s.integration_id = u.integration_id and s.dedupe_key = u.dedupe_key) as n
      from (select distinct integration_id, dedupe_key from u) u
    )
    update webhook_deliveries d set duplicate_count = d.duplicate_count + keys.n
    from keys
    where d.tenant_id = ${tenantId} and d.integration_id = keys.integration_id and d.dedupe_key = keys.dedupe_key`.execute(db);
}

export async function completeDeliveries(db: Executor, tenantId: string, done: (DeliveryKey & { transcriptId: string; externalTicketId: string })[]) {
  if (done.length === 0) return;
  await sql`
    update webhook_deliveries d set transcript_id = u.transcript_id, external_ticket_id = u.external_ticket_id
    from unnest(${done.map((d) => d.integrationId)}::uuid[], ${done.map((d) => d.dedupeKey)}::text[], ${done.map((d) => d.transcriptId)}::uuid[],
                ${done.map((d) => d.externalTicketId)}::text[]) as u(integration_id, dedupe_key, transcript_id, external_ticket_id)
    where d.tenant_id = ${tenantId} and d.integration_id = u.integration_id and d.dedupe_key = u.dedupe_key`.execute(db);
}

export const transcriptKey = (integrationId: string, externalTicketId: string) => `${integrationId}|${externalTicketId}`;

/**
 * The transcript of each (integration, external ticket), created on first sight. New ones are inserted in
 * key order (concurrent jobs creating the same transcript wait on each other in one order), then every id
 * is read back with one index probe per key.
 */
export async function transcriptsFor(db: Executor, tenantId: string, wanted: { id: string; integrationId: string; externalTicketId: string }[]): Promise<Map<string, string>> {
  if (wanted.length === 0) return new Map();
  const sorted = [...new Map(wanted.map((w) => [transcriptKey(w.integrationId, w.externalTicketId), w])).values()].sort((a, b) =>
    transcriptKey(a.integrationId, a.externalTicketId).localeCompare(transcriptKey(b.integrationId, b.externalTicketId)),
  );
  await sql`
    insert into transcripts (id, tenant_id, integration_id, external_ticket_id)
    select u.id, ${tenantId}::uuid, u.integration_id, u.external_ticket_id
    from unnest(${sorted.map((w) => w.id)}::uuid[], ${sorted.map((w) => w.integrationId)}::uuid[], ${sorted.map((w) => w.externalTicketId)}::text[])
      with ordinality as u(id, integration_id, external_ticket_id, n)
    order by u.n
    on conflict (tenant_id, integration_id, external_ticket_id) do nothing`.execute(db);
  const { rows } = await sql<{ integration_id: string; external_ticket_id: string; id: string }>`
    select u.integration_id, u.external_ticket_id, t.id
    from unnest(${sorted.map((w) => w.integrationId)}::uuid[], ${sorted.map((w) => w.externalTicketId)}::text[]) as u(integration_id, external_ticket_id)
    cross join lateral (
      select id from transcripts t
      where t.integration_id = u.integration_id and t.external_ticket_id = u.external_ticket_id and t.tenant_id = ${tenantId}
      limit 1
    ) as t`.execute(db);
  return new Map(rows.map((r) => [transcriptKey(r.integration_id, r.external_ticket_id), r.id]));
}

export interface NewTranscriptEvent {
  id: string;
  transcript_id: string;
  provider_event_id: string | null;
  type: string;
  occurred_at: string | null;
  status: string | null;
  subject: string | null;
  priority: string | null;
  requester: string | null;
  raw: string;
}

/** Events in the order given (seq follows it), and each transcript's count and updated_at moved on; the rows as written. */
export async function appendEvents(db: Executor, tenantId: string, events: NewTranscriptEvent[]): Promise<TranscriptEventRow[]> {
  if (events.length === 0) return [];
  const col = <K extends keyof NewTranscriptEvent>(k: K) => events.map((e) => e[k]);
  const { rows } = await sql<TranscriptEventRow>`
    insert into transcript_events (id, tenant_id, transcript_id, provider_event_id, type, occurred_at, status, subject, priority, requester, raw)
    select u.id, ${tenantId}::uuid, u.transcript_id, u.provider_event_id, u.type, u.occurred_at, u.status, u.subject, u.priority, u.requester, u.raw::jsonb
    from unnest(${col('id')}::uuid[], ${col('transcript_id')}::uuid[], ${col('provider_event_id')}::text[], ${col('type')}::text[],
                ${col('occurred_at')}::timestamptz[], ${col('status')}::text[], ${col('subject')}::text[], ${col('priority')}::text[],
                ${col('requester')}::text[], ${col('raw')}::text[])
      with ordinality as u(id, transcript_id, provider_event_id, type, occurred_at, status, subject, priority, requester, raw, n)
    order by u.n
    returning *`.execute(db);
  await sql`
    update transcripts t set event_count = t.event_count + u.n, updated_at = now()
    from (select transcript_id, count(*)::int as n from unnest(${col('transcript_id')}::uuid[]) as transcript_id group by 1) as u
    where t.tenant_id = ${tenantId} and t.id = u.transcript_id`.execute(db);
  return rows;
}

export async function getTranscript(db: Executor, tenantId: string, id: string): Promise<(TranscriptRow & { provider: string }) | undefined> {
  return db
    .selectFrom('transcripts as t')
    .innerJoin('integrations as i', (j) => j.onRef('i.tenant_id', '=', 't.tenant_id').onRef('i.id', '=', 't.integration_id'))
    .selectAll('t')
    .select('i.provider')
    .where('t.tenant_id', '=', tenantId)
    .where('t.id', '=', id)
    .executeTakeFirst();
}

/** Newest first. */
export async function listEvents(db: Executor, tenantId: string, transcriptId: string, page: { limit: number; offset: number }): Promise<TranscriptEventRow[]> {
  return db
    .selectFrom('transcript_events')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('transcript_id', '=', transcriptId)
    .orderBy('seq', 'desc')
    .limit(page.limit)
    .offset(page.offset)
    .execute();
}

/** Most recently active first. */
const TRANSCRIPT_PAGES: Keyset = { key: 'updated_at', tie: 'id', kind: 'timestamp', direction: 'desc' };

export async function listTranscripts(db: Executor, tenantId: string, integrationId: string, page: { limit: number; after?: Cursor }) {
  let q = db
    .selectFrom('transcripts')
    .selectAll()
    .select(pageKey(TRANSCRIPT_PAGES).as('page_key'))
    .where('tenant_id', '=', tenantId)
    .where('integration_id', '=', integrationId);
  if (page.after) q = q.where(pastCursor(TRANSCRIPT_PAGES, page.after));
  return q.orderBy('updated_at', 'desc').orderBy('id', 'desc').limit(page.limit + 1).execute();
}
