import { type Kysely, sql } from 'kysely';

/**
 * Attachments (issue 34): the metadata of every file a customer sent or an agent uploaded. The bytes live in a
 * blob store (a directory on disk by default, any S3-compatible store in production) under `storage_key`
 * (`t/<tenant>/<32 random hex>`: unguessable, tenant-scoped), never in PostgreSQL.
 *
 * - An agent's upload is a row with `source = 'upload'`, the sha-256 of its one-hour upload token
 *   (`upload_token_hash`), `expires_at`, and no ticket or event until a reply or note names the token; then
 *   `ticket_id` and `event_id` are set in that write's transaction and the token is spent (hash cleared).
 * - A customer's file (`source = 'inbound'`) is written `pending` by the intake worker with its ticket and
 *   event, then `stored`, `skipped` (too large, the limit in `reason`), `failed` (the fetch's error) or
 *   `infected` (the scanner's signature).
 * - `internal`: a note's file, never shown to a customer (web chat).
 * - `event_id`'s foreign key is deferred: a reply binds its uploads to the event it is about to write, in the
 *   same transaction, so the event the timeline emits already lists its files.
 * - `file_usage` counts each workspace's bytes held (stored and quarantined files), kept by a row trigger so
 *   that every path that adds, changes or removes a row (a cascade from a deleted ticket included) keeps it
 *   exact; the quota is checked against it under its row lock. `quota_reached_at` marks that the
 *   `files.quota_reached` event went out, so it goes out once until usage falls back under the quota.
 * - Indexes: by ticket (the timeline's one range scan), by event (files of given events), by token (a reply
 *   naming its uploads), by storage key (the orphan sweep's merge with the store's listing, in key order), and
 *   the unbound uploads (the expiry sweep: a small partial index, only uploads not yet used).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE attachments (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      id uuid NOT NULL,
      ticket_id uuid,
      event_id uuid,
      upload_token_hash text,
      name text NOT NULL,
      content_type text NOT NULL,
      size bigint NOT NULL DEFAULT 0,
      sha256 text,
      storage_key text NOT NULL,
      state text NOT NULL CHECK (state IN ('pending', 'stored', 'skipped', 'failed', 'infected')),
      reason text,
      content_id text,
      source text NOT NULL CHECK (source IN ('upload', 'inbound')),
      internal boolean NOT NULL DEFAULT false,
      uploaded_by uuid,
      expires_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      stored_at timestamptz,
      CONSTRAINT attachments_pkey PRIMARY KEY (tenant_id, id),
      CONSTRAINT attachments_ticket_fkey FOREIGN KEY (tenant_id, ticket_id) REFERENCES tickets (tenant_id, id) ON DELETE CASCADE,
      CONSTRAINT attachments_event_fkey FOREIGN KEY (tenant_id, event_id) REFERENCES ticket_events (tenant_id, id) ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
      CONSTRAINT attachments_storage_key UNIQUE (tenant_id, storage_key)
    );
    CREATE UNIQUE INDEX attachments_upload_token ON attachments (tenant_id, upload_token_hash) WHERE upload_token_hash IS NOT NULL;
    CREATE INDEX attachments_ticket ON attachments (tenant_id, ticket_id, created_at) WHERE ticket_id IS NOT NULL;
    CREATE INDEX attachments_event ON attachments (tenant_id, event_id) WHERE event_id IS NOT NULL;
    CREATE INDEX attachments_unbound ON attachments (tenant_id, expires_at) WHERE event_id IS NULL;
    -- The sweep for inbound fetches a killed worker left pending finds them without reading every file row.
    CREATE INDEX attachments_pending ON attachments (created_at) WHERE state = 'pending';

    CREATE TABLE file_usage (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      bytes bigint NOT NULL DEFAULT 0,
      quota_reached_at timestamptz,
      CONSTRAINT file_usage_pkey PRIMARY KEY (tenant_id)
    );

    CREATE FUNCTION attachments_count_usage() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      delta bigint := 0;
      tenant uuid;
    BEGIN
      IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.state IN ('stored', 'infected') THEN
        delta := delta - OLD.size;
        tenant := OLD.tenant_id;
      END IF;
      IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.state IN ('stored', 'infected') THEN
        delta := delta + NEW.size;
        tenant := NEW.tenant_id;
      END IF;
      IF delta > 0 THEN
        INSERT INTO file_usage (tenant_id, bytes) VALUES (tenant, delta)
          ON CONFLICT (tenant_id) DO UPDATE SET bytes = file_usage.bytes + EXCLUDED.bytes;
      ELSIF delta < 0 THEN
        -- Never an insert: a workspace being deleted takes its rows (and this counter) with it.
        UPDATE file_usage SET bytes = greatest(bytes + delta, 0) WHERE tenant_id = tenant;
      END IF;
      RETURN NULL;
    END $$;
    CREATE TRIGGER attachments_count_usage AFTER INSERT OR UPDATE OF state, size OR DELETE ON attachments
      FOR EACH ROW EXECUTE FUNCTION attachments_count_usage();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE attachments;
    DROP FUNCTION attachments_count_usage();
    DROP TABLE file_usage;
  `.execute(db);
}
