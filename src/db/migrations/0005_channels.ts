import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE channel_connections (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      channel text NOT NULL,
      display_name text NOT NULL,
      enabled boolean NOT NULL DEFAULT true,
      config jsonb NOT NULL DEFAULT '{}',
      -- Providers may post with ?token= instead of a tenant id; only its HMAC is stored.
      inbound_token_hash bytea NOT NULL UNIQUE,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, channel)
    );

    -- The ingest ledger: one row per provider message per workspace and channel. Its primary key is what makes
    -- a redelivery, a retried job or a burst of twenty copies write the ticket once.
    CREATE TABLE ingest_deliveries (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      channel text NOT NULL,
      provider_message_id text NOT NULL,
      first_correlation_id text NOT NULL,
      ticket_id uuid,
      customer_id uuid,
      was_created boolean NOT NULL DEFAULT false,
      duplicate_count integer NOT NULL DEFAULT 0,
      first_seen_at timestamptz NOT NULL DEFAULT now(),
      last_seen_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, channel, provider_message_id)
    );
    CREATE INDEX ingest_deliveries_recent ON ingest_deliveries (tenant_id, first_seen_at DESC);

    -- How each channel identifies a customer (phone, chat id, visitor id, email).
    CREATE TABLE customer_handles (
      tenant_id uuid NOT NULL,
      kind text NOT NULL,
      handle text NOT NULL,
      customer_id uuid NOT NULL,
      PRIMARY KEY (tenant_id, kind, handle),
      FOREIGN KEY (tenant_id, customer_id) REFERENCES customers (tenant_id, id) ON DELETE CASCADE
    );

    -- Message-IDs we have seen or sent, so In-Reply-To / References find their ticket.
    CREATE TABLE email_message_ids (
      tenant_id uuid NOT NULL,
      message_id text NOT NULL,
      ticket_id uuid NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, message_id),
      FOREIGN KEY (tenant_id, ticket_id) REFERENCES tickets (tenant_id, id) ON DELETE CASCADE
    );

    -- Chat channels thread by conversation (e.g. WhatsApp number + sender); email threads by headers.
    ALTER TABLE tickets ADD COLUMN conversation_key text;
    CREATE INDEX tickets_conversation ON tickets (tenant_id, source, conversation_key, updated_at DESC)
      WHERE conversation_key IS NOT NULL;

    -- Customers met on a phone or chat channel have no address yet: "" is allowed and not unique.
    DROP INDEX customers_email_key;
    CREATE UNIQUE INDEX customers_email_key ON customers (tenant_id, lower(email)) WHERE email <> '';
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX customers_email_key;
    CREATE UNIQUE INDEX customers_email_key ON customers (tenant_id, lower(email));
    ALTER TABLE tickets DROP COLUMN conversation_key;
    DROP TABLE email_message_ids, customer_handles, ingest_deliveries, channel_connections;
  `.execute(db);
}
