import { sql } from 'kysely';
import type { Executor } from '../../db';
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

export async function findCustomerByEmail(db: Executor, tenantId: string, email: string): Promise<CustomerRow | undefined> {
  return db
    .selectFrom('customers')
    .selectAll()
    .where('tenant_id', '=', tenantId)
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
  const rows = await db
    .selectFrom('customers')
    .selectAll()
    .where('tenant_id', '=', tenantId)
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
