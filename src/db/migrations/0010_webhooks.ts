import { type Kysely, sql } from 'kysely';

/**
 * Webhook intake from other helpdesks: integrations (the workspace's connection to a provider; its id in
 * the URL selects the workspace), a ledger of deliveries (what makes a redelivery a no-op), and transcripts
 * (one per integration and external ticket) with their ordered events.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE integrations (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      provider text NOT NULL CHECK (provider IN ('zendesk', 'front', 'helpscout')),
      name text NOT NULL,
      signing_secret_sealed text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (tenant_id, id)
    );
    CREATE INDEX integrations_tenant ON integrations (tenant_id, created_at DESC);

    CREATE TABLE transcripts (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL,
      integration_id uuid NOT NULL,
      external_ticket_id text NOT NULL,
      event_count integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (integration_id, external_ticket_id),
      UNIQUE (tenant_id, id),
      FOREIGN KEY (tenant_id, integration_id) REFERENCES integrations (tenant_id, id) ON DELETE CASCADE
    );
    CREATE INDEX transcripts_page ON transcripts (tenant_id, integration_id, updated_at DESC, id DESC);

    CREATE TABLE transcript_events (
      id uuid PRIMARY KEY,
      seq bigserial NOT NULL,
      tenant_id uuid NOT NULL,
      transcript_id uuid NOT NULL,
      provider_event_id text,
      type text NOT NULL,
      occurred_at timestamptz,
      status text,
      subject text,
      priority text,
      requester text,
      raw jsonb NOT NULL,
      received_at timestamptz NOT NULL DEFAULT now(),
      FOREIGN KEY (tenant_id, transcript_id) REFERENCES transcripts (tenant_id, id) ON DELETE CASCADE
    );
    CREATE INDEX transcript_events_order ON transcript_events (tenant_id, transcript_id, seq);

    CREATE TABLE webhook_deliveries (
      tenant_id uuid NOT NULL,
      integration_id uuid NOT NULL,
      dedupe_key text NOT NULL,
      first_correlation_id text NOT NULL,
      transcript_id uuid,
      external_ticket_id text,
      duplicate_count integer NOT NULL DEFAULT 0,
      first_seen_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (integration_id, dedupe_key),
      FOREIGN KEY (tenant_id, integration_id) REFERENCES integrations (tenant_id, id) ON DELETE CASCADE
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE webhook_deliveries, transcript_events, transcripts, integrations`.execute(db);
}
