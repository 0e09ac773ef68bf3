import { sql } from 'kysely';
import type { Executor } from '../../db';
import { pageKey } from '../../db/keyset';
import type { CustomerRow, NewCustomer } from '../../db/types';
import { emailKey, phoneDigits } from './keys';

export async function insertCustomer(db: Executor, tenantId: string, c: Omit<NewCustomer, 'tenant_id'>): Promise<CustomerRow | undefined> {
  return db
    .insertInto('customers')
    .values({ ...c, tenant_id: tenantId })
    .onConflict((oc) => oc.expression(sql`tenant_id, lower(email)`).where('email', '<>', '').doNothing())
    .returningAll()
    .executeTakeFirst();
}

export async function getCustomer(db: Executor, tenantId: string, id: string): Promise<CustomerRow | undefined> {
  return db.selectFrom('customers').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
}

/**
 * `email <> ''` is customers_email_key's predicate (a partial index: channel customers have no address): without it
 * PostgreSQL cannot use the index and reads the whole table for one address.
 */
export async function findCustomerByEmail(db: Executor, tenantId: string, email: string): Promise<CustomerRow | undefined> {
  return db
    .selectFrom('customers')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('email', '<>', '')
    .where(sql`lower(email)`, '=', email.toLowerCase())
    .executeTakeFirst();
}

/**
 * Newest first with id as tie-breaker; served by the customers_page index. A page past the first is found on the
 * index alone (an index-only scan walks the offset's entries without reading their rows), then its rows are read
 * by key: walking the offset through the table read every skipped row, and cost twice as much per row once the
 * rows grew the people's fields (issue 38).
 */
export async function listCustomers(db: Executor, tenantId: string, page: { limit?: number; offset: number }): Promise<CustomerRow[]> {
  if (page.offset > 0 && page.limit !== undefined) {
    const { rows } = await sql<CustomerRow>`
      SELECT c.* FROM (
        SELECT id, created_at FROM customers WHERE tenant_id = ${tenantId}
        ORDER BY created_at DESC, id DESC LIMIT ${page.limit} OFFSET ${page.offset}
      ) p
      JOIN customers c ON c.tenant_id = ${tenantId} AND c.id = p.id
      ORDER BY p.created_at DESC, p.id DESC`.execute(db);
    return rows;
  }
  let q = db
    .selectFrom('customers')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .offset(page.offset);
  if (page.limit !== undefined) q = q.limit(page.limit);
  return q.execute();
}

/** Kept exact by triggers on customers (migrations 0003, 0006): at most 16 shard rows summed, not a count of the workspace. */
export async function countCustomers(db: Executor, tenantId: string): Promise<number> {
  const row = await db
    .selectFrom('customer_counts')
    .select((eb) => eb.fn.sum<string>('n').as('n'))
    .where('tenant_id', '=', tenantId)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/** A channel customer without an address and their handle, in one statement (the sender lock is held). */
/** New customers known only by a channel handle, each with its handle, in one statement. */
export async function insertWithHandles(db: Executor, tenantId: string, cs: { id: string; display_name: string; kind: string; handle: string }[]): Promise<CustomerRow[]> {
  if (cs.length === 0) return [];
  const { rows } = await sql<CustomerRow>`
    with u as (
      select * from unnest(${cs.map((c) => c.id)}::uuid[], ${cs.map((c) => c.display_name)}::text[], ${cs.map((c) => c.kind)}::text[], ${cs.map((c) => c.handle)}::text[])
        as u(id, display_name, kind, handle)
    ), c as (
      insert into customers (id, tenant_id, display_name, email) select id, ${tenantId}::uuid, display_name, '' from u returning *
    ), h as (
      insert into customer_handles (tenant_id, kind, handle, customer_id)
      select ${tenantId}::uuid, u.kind, u.handle, c.id from c join u on u.id = c.id
    )
    select * from c`.execute(db);
  return rows;
}

/** Customers by address, keyed by the lower-cased address. */
export async function findByEmails(db: Executor, tenantId: string, emails: string[]): Promise<Map<string, CustomerRow>> {
  if (emails.length === 0) return new Map();
  // `email <> ''`: the unique index's predicate (see findCustomerByEmail).
  const rows = await db
    .selectFrom('customers')
    .selectAll()
    .where('tenant_id', '=', tenantId)
    .where('email', '<>', '')
    .where(sql`lower(email)`, 'in', emails.map((e) => e.toLowerCase()))
    .execute();
  return new Map(rows.map((r) => [r.email.toLowerCase(), r]));
}

/** Inserts those whose address is new and returns them; an address taken meanwhile is skipped (the caller reads it back). */
export async function insertManyByEmail(db: Executor, tenantId: string, cs: { id: string; display_name: string; email: string }[]): Promise<CustomerRow[]> {
  if (cs.length === 0) return [];
  return db
    .insertInto('customers')
    .values(cs.map((c) => ({ ...c, tenant_id: tenantId, company: '', country: '', metadata: '{}' })))
    .onConflict((oc) => oc.expression(sql`tenant_id, lower(email)`).where('email', '<>', '').doNothing())
    .returningAll()
    .execute();
}

export interface Handle {
  kind: string;
  handle: string;
}
export const handleId = (h: Handle) => `${h.kind}|${h.handle}`;

export async function findHandles(db: Executor, tenantId: string, handles: Handle[]): Promise<Map<string, string>> {
  if (handles.length === 0) return new Map();
  // One primary-key probe per handle, never a scan of the workspace's handles: the LIMIT keeps the planner
  // from flattening the LATERAL into a join it would pick by (possibly stale) statistics.
  const { rows } = await sql<{ kind: string; handle: string; customer_id: string }>`
    select u.kind, u.handle, h.customer_id
    from unnest(${handles.map((h) => h.kind)}::text[], ${handles.map((h) => h.handle)}::text[]) as u(kind, handle)
    cross join lateral (
      select customer_id from customer_handles h where h.tenant_id = ${tenantId} and h.kind = u.kind and h.handle = u.handle limit 1
    ) as h`.execute(db);
  return new Map(rows.map((r) => [handleId(r), r.customer_id]));
}

export async function insertHandles(db: Executor, tenantId: string, handles: (Handle & { customer_id: string })[]): Promise<void> {
  if (handles.length === 0) return;
  await db
    .insertInto('customer_handles')
    .values(handles.map((h) => ({ tenant_id: tenantId, kind: h.kind, handle: h.handle, customer_id: h.customer_id })))
    .onConflict((oc) => oc.columns(['tenant_id', 'kind', 'handle']).doNothing())
    .execute();
}

/** What a customer search looks for: the fragment as sent (trimmed) and, when it is a phone number, its digits. */
export interface CustomerFragment {
  fragment: string;
  digits: string | null;
}

/**
 * A customer search hit: the row, its rank (0 the email or a handle is the fragment, 1 a word or handle starts
 * with it, 2 it is inside; 3 a match of a broad fragment, whose ranks are not told apart) and its page key.
 */
export type CustomerHit = CustomerRow & { tier: number; page_key: string };

/** Where a page starts: past this row (its rank, created_at as written in the cursor, id). */
export interface CustomerSearchCursor {
  tier: number;
  key: string;
  id: string;
}

/** The text a customer is found by, exactly as migration 0039 indexes it (customers_search_text). */
const customerText = sql`search_customer_fold(c.display_name || ' ' || c.email || ' ' || c.company)`;
const PHONE_KINDS = sql`('phone', 'whatsapp_id')`;
const hitKey = pageKey({ key: 'c.created_at', kind: 'timestamp', direction: 'desc' });

/**
 * The pieces of SQL every customer search statement shares. The fragment reaches LIKE folded (lower case, no
 * accents, as the indexes hold the text) and with `\`, `%` and `_` escaped (backslash is LIKE's default escape):
 * never as a pattern of the caller's. Folding a constant is done once, when PostgreSQL plans the statement.
 */
function fragmentSql(s: CustomerFragment) {
  const folded = sql`search_customer_fold(${s.fragment})`;
  const escaped = sql`replace(replace(replace(${folded}, '\\', '\\\\'), '%', '\\%'), '_', '\\_')`;
  return { folded, escaped, contains: sql`'%' || ${escaped} || '%'` };
}

/** The search's branches, each one trigram index scan led by the workspace: (customer_id, rank) of every hit. */
function hitBranches(tenantId: string, s: CustomerFragment) {
  const { folded, escaped, contains } = fragmentSql(s);
  const byText = sql`
    SELECT c.id AS customer_id,
           CASE WHEN lower(c.email) = lower(${s.fragment}) THEN 0
                WHEN ' ' || ${customerText} LIKE '% ' || ${escaped} || '%' THEN 1
                ELSE 2 END AS tier
    FROM customers c
    WHERE c.tenant_id = ${tenantId} AND ${customerText} LIKE ${contains}`;
  const byHandle = sql`
    SELECT h.customer_id,
           CASE WHEN search_customer_fold(h.handle) = ${folded} THEN 0 WHEN search_customer_fold(h.handle) LIKE ${escaped} || '%' THEN 1 ELSE 2 END
    FROM customer_handles h
    WHERE h.tenant_id = ${tenantId} AND search_customer_fold(h.handle) LIKE ${contains}`;
  const byDigits =
    s.digits === null
      ? null
      : sql`
    SELECT h.customer_id,
           CASE WHEN search_phone_digits(h.handle) = ${s.digits} THEN 0 WHEN search_phone_digits(h.handle) LIKE ${`${s.digits}%`} THEN 1 ELSE 2 END
    FROM customer_handles h
    WHERE h.tenant_id = ${tenantId} AND h.kind IN ${PHONE_KINDS} AND search_phone_digits(h.handle) LIKE ${`%${s.digits}%`}`;
  return sql.join(byDigits ? [byText, byHandle, byDigits] : [byText, byHandle], sql` UNION ALL `);
}

const pastCustomer = (after?: CustomerSearchCursor) => (after ? sql`AND (c.created_at, c.id) < (${after.key}::timestamptz, ${after.id}::uuid)` : sql``);

/**
 * A page of a search ranked whole: every hit's best rank (by name, email and company, or by any of its handles),
 * then newest first within a rank, id breaking ties, past `after`. Ranking reads every hit, so with a `cap` the
 * branches stop reading at `cap + 1` hits and a search with more answers no rows and `broad` (the service then
 * walks it newest first); one statement either way. Without a cap (the later pages of a ranked search) every hit
 * is read.
 */
export async function rankedCustomerHits(
  db: Executor,
  tenantId: string,
  s: CustomerFragment & { limit: number; cap: number | null; after?: CustomerSearchCursor },
): Promise<{ hits: CustomerHit[]; broad: boolean }> {
  const past = s.after ? sql`AND (b.tier > ${s.after.tier} OR (b.tier = ${s.after.tier} AND (c.created_at, c.id) < (${s.after.key}::timestamptz, ${s.after.id}::uuid)))` : sql``;
  const cap = s.cap === null ? sql`ALL` : sql`${s.cap + 1}`;
  const within = s.cap === null ? sql`true` : sql`n.hit_count <= ${s.cap}`;
  // One row at least (the count), with the page's rows joined to it; a count past the cap joins none.
  const { rows } = await sql<Partial<CustomerHit> & { hit_count: number }>`
    WITH hits AS MATERIALIZED (
      SELECT customer_id, tier FROM (${hitBranches(tenantId, s)}) branches LIMIT ${cap}
    ), n AS (
      SELECT count(*)::int AS hit_count FROM hits
    )
    SELECT n.hit_count, p.*
    FROM n LEFT JOIN LATERAL (
      SELECT c.*, b.tier, ${hitKey} AS page_key
      FROM (SELECT customer_id, min(tier) AS tier FROM hits GROUP BY customer_id) b
      JOIN customers c ON c.tenant_id = ${tenantId} AND c.id = b.customer_id
      WHERE ${within} ${past}
      ORDER BY b.tier, c.created_at DESC, c.id DESC
      LIMIT ${s.limit + 1}
    ) p ON true`.execute(db);
  const broad = s.cap !== null && (rows[0]?.hit_count ?? 0) > s.cap;
  const hits = rows.filter((r) => r.id !== null && r.id !== undefined).map(({ hit_count: _n, ...hit }) => hit as CustomerHit);
  return { hits, broad };
}

/**
 * The customers whose email or a handle is the fragment itself (rank 0), newest first, past `after`: equality
 * lookups (the email's unique index, the handles' trigram indexes), whatever the fragment's breadth.
 */
export async function exactCustomerHits(db: Executor, tenantId: string, s: CustomerFragment & { limit: number; after?: CustomerSearchCursor }): Promise<CustomerHit[]> {
  const { folded } = fragmentSql(s);
  const digits = s.digits === null ? sql`` : sql`OR (h.kind IN ${PHONE_KINDS} AND search_phone_digits(h.handle) = ${s.digits})`;
  const { rows } = await sql<CustomerHit>`
    SELECT c.*, 0 AS tier, ${hitKey} AS page_key
    FROM customers c
    WHERE c.tenant_id = ${tenantId}
      AND c.id IN (
        SELECT e.id FROM customers e WHERE e.tenant_id = ${tenantId} AND e.email <> '' AND lower(e.email) = lower(${s.fragment})
        UNION
        SELECT h.customer_id FROM customer_handles h WHERE h.tenant_id = ${tenantId} AND (search_customer_fold(h.handle) = ${folded} ${digits}))
      ${pastCustomer(s.after)}
    ORDER BY c.created_at DESC, c.id DESC
    LIMIT ${s.limit + 1}`.execute(db);
  return rows;
}

/**
 * The other hits of a broad fragment (rank 3), newest first, past `after`, leaving out `exclude` (the exact ones,
 * already shown): a walk of the directory's page index (customers_page) that stops at the page's last row. The
 * name, email and company are tested with position(), which no index answers, so PostgreSQL cannot trade the walk
 * for a scan of every hit; the handles that match are read once (their trigram indexes) and looked up per row.
 * A fragment with more hits than the service's cap is at least that dense, so the walk is short.
 */
export async function newestCustomerHits(
  db: Executor,
  tenantId: string,
  s: CustomerFragment & { limit: number; exclude: string[]; after?: CustomerSearchCursor },
): Promise<CustomerHit[]> {
  const { folded, contains } = fragmentSql(s);
  const digits = s.digits === null ? sql`` : sql`OR (h.kind IN ${PHONE_KINDS} AND search_phone_digits(h.handle) LIKE ${`%${s.digits}%`})`;
  const { rows } = await sql<CustomerHit>`
    SELECT c.*, 3 AS tier, ${hitKey} AS page_key
    FROM customers c
    WHERE c.tenant_id = ${tenantId}
      AND (position(${folded} IN ${customerText}) > 0
           OR c.id IN (SELECT h.customer_id FROM customer_handles h WHERE h.tenant_id = ${tenantId} AND (search_customer_fold(h.handle) LIKE ${contains} ${digits})))
      AND c.id <> ALL(${s.exclude}::uuid[])
      ${pastCustomer(s.after)}
    ORDER BY c.created_at DESC, c.id DESC
    LIMIT ${s.limit + 1}`.execute(db);
  return rows;
}

// ------------------------------------------------------------------------------------------------ people (issue 38)

/** A handle as stored: with when a provider last said it cannot be reached (0034), if it did. */
export type HandleRow = Handle & { unreachable_at: Date | null };

/** The handles of some customers, in kind and handle order, keyed by customer. */
export async function handlesOf(db: Executor, tenantId: string, customerIds: string[]): Promise<Map<string, HandleRow[]>> {
  const out = new Map<string, HandleRow[]>(customerIds.map((id) => [id, []]));
  if (customerIds.length === 0) return out;
  // One array parameter, whatever the count (the directory without a limit is the whole workspace); the
  // customer_handles_customer index (0038) answers each id.
  const { rows } = await sql<HandleRow & { customer_id: string }>`
    SELECT customer_id, kind, handle, unreachable_at FROM customer_handles
    WHERE tenant_id = ${tenantId} AND customer_id = ANY(${customerIds}::uuid[])
    ORDER BY kind, handle`.execute(db);
  for (const r of rows) out.get(r.customer_id)?.push({ kind: r.kind, handle: r.handle, unreachable_at: r.unreachable_at });
  return out;
}

/** Customers locked for a change, in id order (two writers locking the same pair cannot wait on each other). */
export async function lockCustomers(db: Executor, tenantId: string, ids: string[]): Promise<CustomerRow[]> {
  const { rows } = await sql<CustomerRow>`
    SELECT * FROM customers WHERE tenant_id = ${tenantId} AND id = ANY(${ids}::uuid[]) ORDER BY id FOR UPDATE`.execute(db);
  return rows;
}

/** Where a merged-away customer went, or undefined. */
export async function mergeOf(db: Executor, tenantId: string, id: string): Promise<{ id: string; merged_into_id: string; merged_at: Date } | undefined> {
  return db.selectFrom('customer_merges').select(['id', 'merged_into_id', 'merged_at']).where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
}

export type CustomerChange = Partial<Pick<CustomerRow, 'display_name' | 'email' | 'phone' | 'notes' | 'locale' | 'time_zone' | 'company' | 'country'>> & {
  metadataPatch?: Record<string, unknown>;
};

/**
 * One customer's UPDATE (the row trigger moves the version). An address another customer holds answers
 * undefined: the unique index (tenant_id, lower(email)) refuses it, caught as ON CONFLICT cannot be on UPDATE.
 */
export async function updateCustomer(db: Executor, tenantId: string, id: string, change: CustomerChange): Promise<CustomerRow> {
  const { metadataPatch, ...columns } = change;
  return db
    .updateTable('customers')
    .set({
      ...columns,
      ...(metadataPatch ? { metadata: sql`jsonb_strip_nulls(metadata || ${JSON.stringify(metadataPatch)}::jsonb)` as unknown as string } : {}),
      updated_at: sql`now()`,
    })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/** Replaces a customer's handles with these (kinds and handles already normalised; none held by another). */
export async function replaceHandles(db: Executor, tenantId: string, customerId: string, handles: Handle[]): Promise<void> {
  await sql`
    DELETE FROM customer_handles h
    WHERE h.tenant_id = ${tenantId} AND h.customer_id = ${customerId}
      AND (h.kind, h.handle) NOT IN (SELECT * FROM unnest(${handles.map((x) => x.kind)}::text[], ${handles.map((x) => x.handle)}::text[]))`.execute(db);
  await insertHandles(db, tenantId, handles.map((h) => ({ ...h, customer_id: customerId })));
}

/** The customer holding this address as an extra email handle (a merged-away person's address), if any. */
export async function findByEmailHandle(db: Executor, tenantId: string, emails: string[]): Promise<Map<string, string>> {
  if (emails.length === 0) return new Map();
  const found = await findHandles(db, tenantId, emails.map((e) => ({ kind: 'email', handle: e.toLowerCase() })));
  return new Map([...found].map(([k, v]) => [k.slice('email|'.length), v]));
}

/**
 * Merge: everything of `from` moves to `into` (its handles, its address as an email handle, its tickets, its
 * intake ledger rows), `from` is deleted (the directory count follows by its trigger) and remembered in
 * customer_merges, earlier merges into `from` now pointing at `into`. The callers hold both rows locked.
 * Answers the ids of the tickets moved.
 */
export async function mergeInto(db: Executor, tenantId: string, from: CustomerRow, into: CustomerRow): Promise<string[]> {
  await sql`UPDATE customer_handles SET customer_id = ${into.id} WHERE tenant_id = ${tenantId} AND customer_id = ${from.id}`.execute(db);
  // The merged-away address stays the person's: an extra email handle of the survivor (or its address, when it had none).
  if (into.email !== '' && from.email !== '' && from.email.toLowerCase() !== into.email.toLowerCase()) {
    await insertHandles(db, tenantId, [{ kind: 'email', handle: from.email.toLowerCase(), customer_id: into.id }]);
  }
  const { rows } = await sql<{ id: string }>`
    UPDATE tickets SET customer_id = ${into.id}, updated_at = now() WHERE tenant_id = ${tenantId} AND customer_id = ${from.id} RETURNING id`.execute(db);
  await sql`UPDATE ingest_deliveries SET customer_id = ${into.id} WHERE tenant_id = ${tenantId} AND customer_id = ${from.id}`.execute(db);
  await sql`UPDATE customer_merges SET merged_into_id = ${into.id} WHERE tenant_id = ${tenantId} AND merged_into_id = ${from.id}`.execute(db);
  await sql`INSERT INTO customer_merges (tenant_id, id, merged_into_id) VALUES (${tenantId}, ${from.id}, ${into.id})`.execute(db);
  await sql`DELETE FROM customers WHERE tenant_id = ${tenantId} AND id = ${from.id}`.execute(db);
  return rows.map((r) => r.id);
}

/**
 * Customers who may be the same person as `c`: the same address once lower-cased and stripped of a +tag (their
 * address or an email handle), the same phone digits (their phone or a phone/WhatsApp handle), or the same name
 * at the same mail domain. Each reason is an index lookup; at most `limit` customers, newest first.
 */
export async function duplicatesOf(db: Executor, tenantId: string, c: CustomerRow, handles: Handle[], limit: number): Promise<{ id: string; reasons: string[] }[]> {
  const emailKeys = [...new Set([c.email, ...handles.filter((h) => h.kind === 'email').map((h) => h.handle)].filter((e) => e !== '').map(emailKey))];
  const digits = [...new Set([c.phone, ...handles.filter((h) => h.kind === 'phone' || h.kind === 'whatsapp_id').map((h) => h.handle)].map(phoneDigits).filter((d) => d.length >= 7))];
  const domain = c.email.includes('@') ? c.email.slice(c.email.indexOf('@') + 1).toLowerCase() : '';
  const { rows } = await sql<{ id: string; reasons: string[] }>`
    WITH hits AS (
      SELECT id, 'email' AS reason FROM customers
      WHERE tenant_id = ${tenantId} AND email <> '' AND customer_email_key(email) = ANY(${emailKeys}::text[])
      UNION ALL
      SELECT customer_id, 'email' FROM customer_handles
      WHERE tenant_id = ${tenantId} AND kind = 'email' AND customer_email_key(handle) = ANY(${emailKeys}::text[])
      UNION ALL
      SELECT id, 'phone' FROM customers
      WHERE tenant_id = ${tenantId} AND phone <> '' AND search_phone_digits(phone) = ANY(${digits}::text[])
      UNION ALL
      SELECT customer_id, 'phone' FROM customer_handles
      WHERE tenant_id = ${tenantId} AND kind IN ('phone', 'whatsapp_id') AND search_phone_digits(handle) = ANY(${digits}::text[])
      UNION ALL
      SELECT id, 'name_domain' FROM customers
      WHERE tenant_id = ${tenantId} AND email <> '' AND ${domain} <> ''
        AND lower(display_name) = lower(${c.display_name}) AND lower(split_part(email, '@', 2)) = ${domain}
    )
    SELECT h.id, array_agg(DISTINCT h.reason ORDER BY h.reason) AS reasons
    FROM hits h JOIN customers c ON c.tenant_id = ${tenantId} AND c.id = h.id
    WHERE h.id <> ${c.id} AND c.erased_at IS NULL
    GROUP BY h.id, c.created_at
    ORDER BY c.created_at DESC, h.id DESC
    LIMIT ${limit}`.execute(db);
  return rows;
}

/** Customers by id, keyed by id. */
export async function customersByIds(db: Executor, tenantId: string, ids: string[]): Promise<Map<string, CustomerRow>> {
  if (ids.length === 0) return new Map();
  const rows = await db.selectFrom('customers').selectAll().where('tenant_id', '=', tenantId).where('id', 'in', ids).execute();
  return new Map(rows.map((r) => [r.id, r]));
}

/**
 * Takes the senders' locks by their names (senderKey), as intake takes them (the ingest store's lockSenders): one
 * statement, in hash order, so two holders never wait on each other in a cycle.
 */
export async function lockSenderKeys(db: Executor, tenantId: string, keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  await sql`
    select pg_advisory_xact_lock(h)
    from (select distinct hashtextextended(${tenantId} || '|' || k, 0) as h from unnest(${keys}::text[]) as k order by h) as ordered`.execute(db);
}

/** The search documents of these tickets rebuilt (their customer's name, address or handles changed). */
export async function reindexTickets(db: Executor, tenantId: string, ticketIds: string[]): Promise<void> {
  if (ticketIds.length === 0) return;
  await sql`SELECT search_rebuild_ticket(${tenantId}::uuid, t) FROM unnest(${ticketIds}::uuid[]) AS t`.execute(db);
}

/** The search documents of every ticket of a customer rebuilt, in one statement. */
export async function reindexTicketsOf(db: Executor, tenantId: string, customerId: string): Promise<void> {
  await sql`SELECT search_rebuild_ticket(${tenantId}::uuid, t.id) FROM tickets t WHERE t.tenant_id = ${tenantId} AND t.customer_id = ${customerId}`.execute(db);
}
