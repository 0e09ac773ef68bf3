import { type Kysely, sql } from 'kysely';

/**
 * Every channel both ways (issue 33): the reply outbox of the connected mailbox becomes the outbox of every
 * channel. One row per reply event, written in the reply's own transaction, advanced by the outbound worker
 * and by the providers' status callbacks.
 *
 * - `state` gains `sending` (a worker claimed the row and may be talking to the provider: committed before the
 *   request leaves, so a second run of the job, or a worker killed mid-send, can never send it again),
 *   `unknown` (the request left and no answer came: the provider may have it, so it is not retried blindly),
 *   and `delivered` / `read` (moved by status callbacks).
 * - `claimed_at` says since when a row is `sending`: the sweep turns a claim older than the send timeout into
 *   `unknown`. `next_attempt_at` holds a retry's backoff (and the provider's Retry-After).
 * - `sender` says which sender took the reply (gmail, graph, postmark, twilio, whatsapp, telegram, web_chat),
 *   `recipient` the handle it was addressed to, `segments` Twilio's segment count, `error_code` the
 *   provider's own code of a failure, `template` a WhatsApp template reply.
 * - Status callbacks name the provider's message id: the partial index finds the row from it.
 * - A handle a provider says cannot be reached (Telegram: the bot was blocked) is marked on customer_handles.
 * - The inbound token is also kept sealed (encrypted), not only hashed: a Twilio StatusCallback must name the
 *   hook URL, and the URL holds the token. Connections made before keep working; theirs is sealed on rotation.
 * - Channel credentials (`server_token`, `auth_token`, `api_key`, `bot_token` …) are sealed in `secrets_sealed`,
 *   never in the `config` column.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE outbound_emails RENAME TO outbound_messages;
    ALTER TABLE outbound_messages RENAME CONSTRAINT outbound_emails_pkey TO outbound_messages_pkey;
    ALTER TABLE outbound_messages DROP CONSTRAINT outbound_emails_state_check;
    ALTER TABLE outbound_messages
      ADD CONSTRAINT outbound_messages_state_check CHECK (state IN ('queued', 'sending', 'sent', 'delivered', 'read', 'failed', 'blocked', 'unknown')),
      ADD COLUMN channel text NOT NULL DEFAULT 'email',
      ADD COLUMN sender text,
      ADD COLUMN recipient text,
      ADD COLUMN claimed_at timestamptz,
      ADD COLUMN next_attempt_at timestamptz,
      ADD COLUMN segments integer,
      ADD COLUMN error_code text,
      ADD COLUMN template jsonb,
      ADD COLUMN delivered_at timestamptz,
      ADD COLUMN read_at timestamptz;
    ALTER INDEX outbound_emails_sent RENAME TO outbound_messages_sent;
    DROP INDEX outbound_emails_waiting;
    CREATE INDEX outbound_messages_waiting ON outbound_messages (created_at) WHERE state IN ('queued', 'sending');
    CREATE INDEX outbound_messages_provider_id ON outbound_messages (tenant_id, channel, provider_message_id) WHERE provider_message_id IS NOT NULL;
    ALTER TABLE customer_handles ADD COLUMN unreachable_at timestamptz, ADD COLUMN unreachable_reason text;
    ALTER TABLE channel_connections ADD COLUMN inbound_token_sealed text, ADD COLUMN secrets_sealed text;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE channel_connections DROP COLUMN inbound_token_sealed, DROP COLUMN secrets_sealed;
    ALTER TABLE customer_handles DROP COLUMN unreachable_at, DROP COLUMN unreachable_reason;
    DROP INDEX outbound_messages_provider_id;
    DROP INDEX outbound_messages_waiting;
    DELETE FROM outbound_messages WHERE channel <> 'email' OR state NOT IN ('queued', 'sent', 'failed', 'blocked');
    ALTER TABLE outbound_messages
      DROP CONSTRAINT outbound_messages_state_check,
      DROP COLUMN channel, DROP COLUMN sender, DROP COLUMN recipient, DROP COLUMN claimed_at, DROP COLUMN next_attempt_at,
      DROP COLUMN segments, DROP COLUMN error_code, DROP COLUMN template, DROP COLUMN delivered_at, DROP COLUMN read_at;
    ALTER TABLE outbound_messages ADD CONSTRAINT outbound_emails_state_check CHECK (state IN ('queued', 'sent', 'failed', 'blocked'));
    ALTER INDEX outbound_messages_sent RENAME TO outbound_emails_sent;
    CREATE INDEX outbound_emails_waiting ON outbound_messages (created_at) WHERE state = 'queued';
    ALTER TABLE outbound_messages RENAME CONSTRAINT outbound_messages_pkey TO outbound_emails_pkey;
    ALTER TABLE outbound_messages RENAME TO outbound_emails;
  `.execute(db);
}
