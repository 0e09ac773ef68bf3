import { sql } from 'kysely';
import type { Executor } from '../../db';
import { pageKey } from '../../db/keyset';
import type { CustomerRow, NewCustomer } from '../../db/types';

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

/** Newest first with id as tie-breaker; served by the customers_page index. */
export async function listCustomers(db: Executor, tenantId: string, page: { limit?: number; offset: number }): Promise<CustomerRow[]> {
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
