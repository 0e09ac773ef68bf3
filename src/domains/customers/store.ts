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
export async function insertWithHandle(db: Executor, tenantId: string, c: { id: string; display_name: string; kind: string; handle: string }): Promise<string> {
  const { rows } = await sql<{ customer_id: string }>`
    with c as (
      insert into customers (id, tenant_id, display_name, email) values (${c.id}, ${tenantId}, ${c.display_name}, '') returning id
    )
    insert into customer_handles (tenant_id, kind, handle, customer_id)
    select ${tenantId}, ${c.kind}, ${c.handle}, id from c
    returning customer_id`.execute(db);
  return rows[0]!.customer_id;
}
