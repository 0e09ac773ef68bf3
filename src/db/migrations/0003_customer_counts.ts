import { type Kysely, sql } from 'kysely';

/**
 * The directory reports an exact total on every page read. Counting a large workspace's rows each time costs
 * tens of milliseconds at 100k customers, so statement-level triggers keep a per-workspace count, maintained
 * by the database itself whatever code path inserts or deletes customers.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE customer_counts (
      tenant_id uuid PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
      n bigint NOT NULL CHECK (n >= 0)
    );
    INSERT INTO customer_counts (tenant_id, n) SELECT tenant_id, count(*) FROM customers GROUP BY tenant_id;

    CREATE FUNCTION customer_counts_add() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO customer_counts (tenant_id, n)
      SELECT tenant_id, count(*) FROM new_rows GROUP BY tenant_id
      ON CONFLICT (tenant_id) DO UPDATE SET n = customer_counts.n + excluded.n;
      RETURN NULL;
    END $$;

    CREATE FUNCTION customer_counts_remove() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE customer_counts c SET n = c.n - d.k
      FROM (SELECT tenant_id, count(*) AS k FROM old_rows GROUP BY tenant_id) d
      WHERE c.tenant_id = d.tenant_id;
      RETURN NULL;
    END $$;

    CREATE TRIGGER customers_count_insert AFTER INSERT ON customers
      REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION customer_counts_add();
    CREATE TRIGGER customers_count_delete AFTER DELETE ON customers
      REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION customer_counts_remove();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER customers_count_insert ON customers;
    DROP TRIGGER customers_count_delete ON customers;
    DROP FUNCTION customer_counts_add(), customer_counts_remove();
    DROP TABLE customer_counts;
  `.execute(db);
}
