import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE ingest_duplicate_copies (
      tenant_id uuid NOT NULL,
      channel text NOT NULL,
      provider_message_id text NOT NULL,
      correlation_id text NOT NULL,
      PRIMARY KEY (tenant_id, channel, provider_message_id, correlation_id),
      FOREIGN KEY (tenant_id, channel, provider_message_id) REFERENCES ingest_deliveries ON DELETE CASCADE
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE ingest_duplicate_copies`.execute(db);
}
