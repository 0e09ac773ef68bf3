import { type Kysely, sql } from 'kysely';

/**
 * The copies of each webhook delivery, one row per copy (its correlation id), as ingest already has: a job
 * run again after a crash re-presents the same copies, and they must not be counted twice.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE webhook_duplicate_copies (
      tenant_id uuid NOT NULL,
      integration_id uuid NOT NULL,
      dedupe_key text NOT NULL,
      correlation_id text NOT NULL,
      PRIMARY KEY (integration_id, dedupe_key, correlation_id),
      FOREIGN KEY (integration_id, dedupe_key) REFERENCES webhook_deliveries ON DELETE CASCADE
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE webhook_duplicate_copies`.execute(db);
}
