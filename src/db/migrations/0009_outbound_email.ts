import { type Kysely, sql } from 'kysely';

/**
 * Replies sent through the connected mailbox: one row per reply event, written in the reply's own
 * transaction (an outbox: a queue that is down when the reply commits loses nothing, the mailbox sweep
 * re-queues what is still waiting), then advanced by the outbound worker. Today's sends are counted from it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE outbound_emails (
      tenant_id uuid NOT NULL,
      event_id uuid NOT NULL,
      ticket_id uuid NOT NULL,
      state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'sent', 'failed', 'blocked')),
      message_id text,
      provider_message_id text,
      attempts integer NOT NULL DEFAULT 0,
      last_error text,
      sent_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, event_id),
      FOREIGN KEY (tenant_id, ticket_id) REFERENCES tickets (tenant_id, id) ON DELETE CASCADE
    );
    CREATE INDEX outbound_emails_sent ON outbound_emails (tenant_id, sent_at) WHERE state = 'sent';
    CREATE INDEX outbound_emails_waiting ON outbound_emails (created_at) WHERE state = 'queued';
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE outbound_emails`.execute(db);
}
