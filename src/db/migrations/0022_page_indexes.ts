import { type Kysely, sql } from 'kysely';

/**
 * Keyset paging (src/lib/paging.ts): every list that can grow reads one index range per page, so each sort
 * order has an index that starts with the tenant and ends with its (key, tie) pair. Ingest deliveries had no
 * unique order at all (first_seen_at ties; the key is channel + provider id): they get an identity column.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX tickets_updated_page ON tickets (tenant_id, updated_at DESC, id DESC);
    ALTER TABLE ingest_deliveries ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
    CREATE INDEX ingest_deliveries_page ON ingest_deliveries (tenant_id, seq DESC);
    DROP INDEX ingest_deliveries_recent;
    CREATE INDEX ingest_deliveries_channel_page ON ingest_deliveries (tenant_id, channel, seq DESC);
    CREATE INDEX time_entries_ticket_page ON time_entries (tenant_id, ticket_id, created_at, id);
    DROP INDEX time_entries_ticket;
    CREATE INDEX memberships_page ON memberships (tenant_id, created_at, user_id);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX memberships_page;
    CREATE INDEX time_entries_ticket ON time_entries (tenant_id, ticket_id);
    DROP INDEX time_entries_ticket_page;
    DROP INDEX ingest_deliveries_channel_page;
    CREATE INDEX ingest_deliveries_recent ON ingest_deliveries (tenant_id, first_seen_at DESC);
    DROP INDEX ingest_deliveries_page;
    ALTER TABLE ingest_deliveries DROP COLUMN seq;
    DROP INDEX tickets_updated_page;
  `.execute(db);
}
