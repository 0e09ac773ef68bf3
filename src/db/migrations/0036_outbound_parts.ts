import { type Kysely, sql } from 'kysely';

/**
 * Replies carry their attachments (issue 34): a reply that goes out in several provider messages (WhatsApp and
 * Telegram send one message per file) records each part the provider acknowledged, as it is acknowledged, so a
 * retry of the reply sends only the parts not yet sent. `parts` is `[{index, provider_message_id}]`, written by
 * the worker holding the claim, one committed update per acknowledged part.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE outbound_messages ADD COLUMN parts jsonb NOT NULL DEFAULT '[]'::jsonb`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE outbound_messages DROP COLUMN parts`.execute(db);
}
