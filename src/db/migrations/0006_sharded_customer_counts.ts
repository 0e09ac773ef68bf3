import { type Kysely, sql } from 'kysely';

/**
 * One counter row per workspace made every transaction that creates a customer wait for every other one in
 * the same workspace until commit (the trigger's row lock): ingest bursts serialised on it. Sixteen shards
 * per workspace, picked by the writing backend, spread that lock; the read sums sixteen rows at most.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE customer_counts ADD COLUMN shard smallint NOT NULL DEFAULT 0;
    ALTER TABLE customer_counts DROP CONSTRAINT customer_counts_pkey;
    ALTER TABLE customer_counts ADD PRIMARY KEY (tenant_id, shard);
    ALTER TABLE customer_counts DROP CONSTRAINT customer_counts_n_check;

    CREATE OR REPLACE FUNCTION customer_counts_add() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO customer_counts (tenant_id, shard, n)
      SELECT tenant_id, pg_backend_pid() % 16, count(*) FROM new_rows GROUP BY tenant_id
      ON CONFLICT (tenant_id, shard) DO UPDATE SET n = customer_counts.n + excluded.n;
      RETURN NULL;
    END $$;

    -- A delete may land on a shard that never counted those rows: shards may go negative, the sum stays exact.
    CREATE OR REPLACE FUNCTION customer_counts_remove() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO customer_counts (tenant_id, shard, n)
      SELECT tenant_id, pg_backend_pid() % 16, -count(*) FROM old_rows GROUP BY tenant_id
      ON CONFLICT (tenant_id, shard) DO UPDATE SET n = customer_counts.n + excluded.n;
      RETURN NULL;
    END $$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DELETE FROM customer_counts;
    ALTER TABLE customer_counts DROP CONSTRAINT customer_counts_pkey;
    ALTER TABLE customer_counts DROP COLUMN shard;
    ALTER TABLE customer_counts ADD PRIMARY KEY (tenant_id);
    INSERT INTO customer_counts (tenant_id, n) SELECT tenant_id, count(*) FROM customers GROUP BY tenant_id;
  `.execute(db);
}
