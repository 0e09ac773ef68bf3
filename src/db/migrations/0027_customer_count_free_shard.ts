import { type Kysely, sql } from 'kysely';

/**
 * The customer counter's sixteen rows per workspace (0006) were picked by `pg_backend_pid() % 16`. With
 * several worker processes a workspace's burst runs on dozens of backends, and two backends with the same
 * remainder queue on one row until the first commits, while other rows sit free (issue 20, "confirm under 4
 * workers": 16 open transactions on 16 backends nearly always had some waiting). Now a writer takes a row
 * no other transaction holds (`FOR UPDATE SKIP LOCKED`), so up to sixteen writers of one workspace never
 * wait on the counter; the seventeenth waits for the first to commit, as before. Every workspace gets its
 * sixteen rows when it is created (and existing ones now), so a free row exists from the first burst on.
 * Rows this transaction already holds are not skipped: a transaction that creates customers twice adds to
 * its own row again.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    INSERT INTO customer_counts (tenant_id, shard, n)
      SELECT t.id, g, 0 FROM tenants t CROSS JOIN generate_series(0, 15) g
      ON CONFLICT (tenant_id, shard) DO NOTHING;

    CREATE FUNCTION customer_counts_create_shards() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO customer_counts (tenant_id, shard, n) SELECT NEW.id, g, 0 FROM generate_series(0, 15) g
        ON CONFLICT (tenant_id, shard) DO NOTHING;
      RETURN NULL;
    END $$;
    CREATE TRIGGER tenants_customer_count_shards AFTER INSERT ON tenants
      FOR EACH ROW EXECUTE FUNCTION customer_counts_create_shards();

    -- One helper for both directions: adds delta to a free shard row of the workspace.
    CREATE FUNCTION customer_counts_apply(p_tenant uuid, p_delta bigint) RETURNS void LANGUAGE plpgsql AS $$
    DECLARE s smallint;
    BEGIN
      SELECT shard INTO s FROM customer_counts WHERE tenant_id = p_tenant ORDER BY shard LIMIT 1 FOR UPDATE SKIP LOCKED;
      IF s IS NULL THEN
        -- Every row is held (or the workspace predates its rows): wait on one, as 0006 did.
        s := pg_backend_pid() % 16;
      END IF;
      INSERT INTO customer_counts (tenant_id, shard, n) VALUES (p_tenant, s, p_delta)
        ON CONFLICT (tenant_id, shard) DO UPDATE SET n = customer_counts.n + excluded.n;
    END $$;

    CREATE OR REPLACE FUNCTION customer_counts_add() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      -- In workspace order, so two transactions creating customers in the same workspaces lock alike.
      PERFORM customer_counts_apply(tenant_id, n) FROM (SELECT tenant_id, count(*) AS n FROM new_rows GROUP BY tenant_id ORDER BY tenant_id) d;
      RETURN NULL;
    END $$;

    CREATE OR REPLACE FUNCTION customer_counts_remove() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM customer_counts_apply(tenant_id, -n) FROM (SELECT tenant_id, count(*) AS n FROM old_rows GROUP BY tenant_id ORDER BY tenant_id) d;
      RETURN NULL;
    END $$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION customer_counts_add() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO customer_counts (tenant_id, shard, n)
      SELECT tenant_id, pg_backend_pid() % 16, count(*) FROM new_rows GROUP BY tenant_id
      ON CONFLICT (tenant_id, shard) DO UPDATE SET n = customer_counts.n + excluded.n;
      RETURN NULL;
    END $$;
    CREATE OR REPLACE FUNCTION customer_counts_remove() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO customer_counts (tenant_id, shard, n)
      SELECT tenant_id, pg_backend_pid() % 16, -count(*) FROM old_rows GROUP BY tenant_id
      ON CONFLICT (tenant_id, shard) DO UPDATE SET n = customer_counts.n + excluded.n;
      RETURN NULL;
    END $$;
    DROP FUNCTION customer_counts_apply(uuid, bigint);
    DROP TRIGGER tenants_customer_count_shards ON tenants;
    DROP FUNCTION customer_counts_create_shards();
  `.execute(db);
}
