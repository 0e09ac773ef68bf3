import { type Kysely, sql } from 'kysely';

/**
 * Outbound webhook delivery (issue 19): endpoints, one delivery row per (endpoint, event), one attempt row
 * per HTTP try, and a per-workspace fan-out cursor over the events log (0023).
 *
 * - `event_deliveries` is unique on (tenant, endpoint, event): a fan-out repeated after a crash or by two
 *   workers at once inserts nothing twice, so each endpoint gets each event id once in effect.
 * - `ordering_key` is `ticket:<id>` for ticket events (one ticket's events go out in `position` order, one
 *   at a time) and `event:<id>` otherwise (nothing to wait for).
 * - `lease_until` marks a delivery in flight; a worker killed mid-send leaves a lease that expires, and the
 *   sweep hands the delivery to another worker (same event id, same webhook-id).
 * - The outbox trigger now also NOTIFYs `events` with the workspace id. NOTIFY is delivered only when the
 *   transaction commits (and never for one that rolls back), so the delivery workers wake exactly when a
 *   change is visible. 0023's function is replaced, not edited: the migration history stays as it ran.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE webhook_endpoints (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      id uuid NOT NULL,
      url text NOT NULL,
      description text NOT NULL DEFAULT '',
      event_types text[] NOT NULL,
      enabled boolean NOT NULL DEFAULT true,
      secret_sealed text NOT NULL,
      previous_secret_sealed text,
      previous_secret_expires_at timestamptz,
      -- Only events committed after the endpoint was created are fanned out to it (replay reaches back).
      starts_after bigint NOT NULL DEFAULT 0,
      consecutive_failures integer NOT NULL DEFAULT 0,
      disabled_reason text CHECK (disabled_reason IN ('admin', 'failures')),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, id)
    );

    CREATE TABLE event_fanout_cursors (
      tenant_id uuid PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
      position bigint NOT NULL
    );

    CREATE TABLE event_deliveries (
      tenant_id uuid NOT NULL,
      id uuid NOT NULL,
      endpoint_id uuid NOT NULL,
      event_id uuid NOT NULL,
      event_type text NOT NULL,
      position bigint NOT NULL,
      ordering_key text NOT NULL,
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
      attempts integer NOT NULL DEFAULT 0,
      window_started_at timestamptz NOT NULL DEFAULT now(),
      next_attempt_at timestamptz NOT NULL DEFAULT now(),
      lease_until timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, id),
      UNIQUE (tenant_id, endpoint_id, event_id),
      FOREIGN KEY (tenant_id, endpoint_id) REFERENCES webhook_endpoints (tenant_id, id) ON DELETE CASCADE
    );
    -- A key's head (its oldest pending delivery) and the endpoint's claimable heads.
    CREATE INDEX event_deliveries_pending ON event_deliveries (tenant_id, endpoint_id, ordering_key, position) WHERE status = 'pending';
    CREATE INDEX event_deliveries_claim ON event_deliveries (tenant_id, endpoint_id, position) WHERE status = 'pending';
    -- The sweep: pending deliveries that are due.
    CREATE INDEX event_deliveries_due ON event_deliveries (next_attempt_at) WHERE status = 'pending';

    CREATE TABLE event_delivery_attempts (
      tenant_id uuid NOT NULL,
      seq bigint GENERATED ALWAYS AS IDENTITY,
      id uuid NOT NULL,
      endpoint_id uuid NOT NULL,
      delivery_id uuid NOT NULL,
      event_id uuid NOT NULL,
      event_type text NOT NULL,
      attempt integer NOT NULL,
      outcome text NOT NULL CHECK (outcome IN ('delivered', 'retrying', 'failed')),
      status_code integer,
      duration_ms integer NOT NULL,
      error text,
      next_retry_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, id),
      FOREIGN KEY (tenant_id, endpoint_id) REFERENCES webhook_endpoints (tenant_id, id) ON DELETE CASCADE
    );
    CREATE INDEX event_delivery_attempts_page ON event_delivery_attempts (tenant_id, endpoint_id, seq DESC);

    CREATE OR REPLACE FUNCTION events_position() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtextextended('events|' || NEW.tenant_id::text, 0));
      UPDATE events SET position = nextval('event_positions') WHERE tenant_id = NEW.tenant_id AND id = NEW.id;
      -- Delivered at commit, once per transaction and workspace (identical payloads are folded).
      PERFORM pg_notify('events', NEW.tenant_id::text);
      RETURN NULL;
    END $$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION events_position() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtextextended('events|' || NEW.tenant_id::text, 0));
      UPDATE events SET position = nextval('event_positions') WHERE tenant_id = NEW.tenant_id AND id = NEW.id;
      RETURN NULL;
    END $$;
    DROP TABLE event_delivery_attempts, event_deliveries, event_fanout_cursors, webhook_endpoints;
  `.execute(db);
}
