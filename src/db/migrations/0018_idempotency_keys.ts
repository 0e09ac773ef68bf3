import { type Kysely, sql } from 'kysely';

/**
 * Idempotency-Key (IETF httpapi draft): one row per (workspace, caller, key), holding the request's
 * fingerprint and, once it has answered, the answer to replay. `running` rows are what a concurrent repeat
 * sees as "in use"; rows expire after IDEMPOTENCY_TTL_SECONDS and are pruned hourly.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE idempotency_keys (
      tenant_id uuid NOT NULL,
      scope text NOT NULL,
      key text NOT NULL,
      fingerprint text NOT NULL,
      state text NOT NULL CHECK (state IN ('running', 'done')),
      response_status integer,
      response_body text,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      PRIMARY KEY (tenant_id, scope, key)
    );
    CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE idempotency_keys`.execute(db);
}
