import { type Kysely, sql } from 'kysely';

/*
 * Customers as people (issue 38): update, merge, export, erasure, retention. docs/decisions/customers.md has the
 * reasons; in short:
 *
 * - customers: `version` (bumped by the shared trigger: the strong ETag a PATCH's If-Match names), the new
 *   profile fields (phone, notes, locale, time_zone; empty when unset, like company), `erased_at` (the person was erased; the row keeps its id so tickets keep their customer). All nullable
 *   or with a constant default: adding them rewrites nothing.
 * - customer_merges: a merged-away customer is deleted (its handles, tickets and ledger rows moved to the
 *   survivor first), so the directory, its count and search never show it; this row remembers where it went, so a
 *   read of the old id answers `merged_into_id`, and a repeated merge is recognised. Chains are kept flat: a
 *   survivor later merged elsewhere takes its merged-away ids along.
 * - customer_jobs: one row per export or erasure request (who asked, why, when it finished, the export's file
 *   and when its link expires). The audit log says who did it; this row is what the job works from and what a
 *   client polls. An erasure's row never holds the person's data: the job reads it from the customer row, which
 *   is scrubbed last, so a retried job still knows what to look for.
 * - tenants.retention_days: solved and closed tickets older than this have their conversation erased by the
 *   retention sweep (off when null, the default). tickets.content_erased_at marks a ticket whose conversation
 *   was erased (by retention or by its customer's erasure), so the sweep visits each ticket once; the sweep's
 *   index holds only the tickets still waiting.
 * - ticket_events.redacted_at: the event's text was removed (single-message redaction, erasure or retention).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE customers
      ADD COLUMN version bigint NOT NULL DEFAULT 1,
      ADD COLUMN phone text NOT NULL DEFAULT '',
      ADD COLUMN notes text NOT NULL DEFAULT '',
      ADD COLUMN locale text NOT NULL DEFAULT '',
      ADD COLUMN time_zone text NOT NULL DEFAULT '',
      ADD COLUMN erased_at timestamptz;
    CREATE TRIGGER customers_version BEFORE UPDATE ON customers FOR EACH ROW EXECUTE FUNCTION bump_version();

    -- Duplicate suggestions: customers sharing an address (lower case, +tag dropped), a phone (by its digits) or
    -- a name within one mail domain; the customer's own fields and its handles alike.
    CREATE FUNCTION customer_email_key(text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
      AS $$ SELECT CASE WHEN position('@' IN $1) = 0 THEN lower($1)
                        ELSE lower(split_part(split_part($1, '@', 1), '+', 1) || '@' || substr($1, position('@' IN $1) + 1)) END $$;
    CREATE INDEX customers_email_norm ON customers (tenant_id, customer_email_key(email)) WHERE email <> '';
    CREATE INDEX customer_handles_email_norm ON customer_handles (tenant_id, customer_email_key(handle)) WHERE kind = 'email';
    CREATE INDEX customers_phone_digits ON customers (tenant_id, search_phone_digits(phone)) WHERE phone <> '';
    CREATE INDEX customer_handles_phone_digits ON customer_handles (tenant_id, search_phone_digits(handle)) WHERE kind IN ('phone', 'whatsapp_id');
    CREATE INDEX customers_name_domain ON customers (tenant_id, lower(display_name), lower(split_part(email, '@', 2))) WHERE email <> '';

    -- A person's rows elsewhere, found by a merge (which moves them) and an export (which reads them).
    CREATE INDEX ingest_deliveries_customer ON ingest_deliveries (tenant_id, customer_id, seq) WHERE customer_id IS NOT NULL;
    CREATE INDEX transcript_events_requester ON transcript_events (tenant_id, lower(requester)) WHERE requester IS NOT NULL;
    CREATE INDEX csat_responses_ticket ON csat_responses (tenant_id, ticket_id);
    -- A ticket's notifications, found by retention and erasure (which erase their text) without a pass over the workspace's.
    CREATE INDEX notifications_ticket ON notifications (tenant_id, ticket_id) WHERE ticket_id IS NOT NULL;

    CREATE TABLE customer_merges (
      tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
      id uuid NOT NULL,
      merged_into_id uuid NOT NULL,
      merged_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, id)
    );
    CREATE INDEX customer_merges_into ON customer_merges (tenant_id, merged_into_id);

    CREATE TABLE customer_jobs (
      tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
      id uuid NOT NULL,
      customer_id uuid NOT NULL,
      kind text NOT NULL CHECK (kind IN ('export', 'erase')),
      state text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'done', 'failed')),
      reason text NOT NULL DEFAULT '',
      requested_by_user_id uuid,
      requested_by_api_key_id uuid,
      file_key text,
      file_bytes bigint,
      expires_at timestamptz,
      error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      completed_at timestamptz,
      PRIMARY KEY (tenant_id, id)
    );
    CREATE INDEX customer_jobs_customer ON customer_jobs (tenant_id, customer_id, created_at DESC);
    -- The orphan sweep's probe of a stored object's key, and the expired export files the export sweep deletes.
    CREATE INDEX customer_jobs_file ON customer_jobs (tenant_id, file_key) WHERE file_key IS NOT NULL;
    CREATE INDEX customer_jobs_expiring ON customer_jobs (expires_at) INCLUDE (tenant_id) WHERE file_key IS NOT NULL;

    ALTER TABLE tenants ADD COLUMN retention_days integer CHECK (retention_days BETWEEN 1 AND 36500);
    ALTER TABLE tickets ADD COLUMN content_erased_at timestamptz;
    CREATE INDEX tickets_retention_due ON tickets (tenant_id, coalesce(solved_at, updated_at))
      WHERE status IN ('solved', 'closed') AND content_erased_at IS NULL;
    ALTER TABLE ticket_events ADD COLUMN redacted_at timestamptz;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE ticket_events DROP COLUMN redacted_at;
    DROP INDEX tickets_retention_due;
    ALTER TABLE tickets DROP COLUMN content_erased_at;
    ALTER TABLE tenants DROP COLUMN retention_days;
    DROP TABLE customer_jobs;
    DROP TABLE customer_merges;
    DROP INDEX notifications_ticket;
    DROP INDEX csat_responses_ticket;
    DROP INDEX transcript_events_requester;
    DROP INDEX ingest_deliveries_customer;
    DROP INDEX customers_name_domain;
    DROP INDEX customer_handles_phone_digits;
    DROP INDEX customers_phone_digits;
    DROP INDEX customer_handles_email_norm;
    DROP INDEX customers_email_norm;
    DROP FUNCTION customer_email_key(text);
    DROP TRIGGER customers_version ON customers;
    ALTER TABLE customers DROP COLUMN version, DROP COLUMN phone, DROP COLUMN notes, DROP COLUMN locale, DROP COLUMN time_zone,
      DROP COLUMN erased_at;
  `.execute(db);
}
