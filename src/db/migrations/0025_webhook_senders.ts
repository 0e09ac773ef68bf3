import { type Kysely, sql } from 'kysely';

/**
 * Webhook sends from a cursor per endpoint (issue 19, delivery cost). 0024 wrote a delivery row per
 * (endpoint, event) at fan-out and updated it twice more: nine rows and some fifty index entries per inbound
 * message with three endpoints, which cost intake most of its throughput. Now each endpoint reads the log
 * from its own cursor, and a delivery row exists only for an event that must wait: one that failed and is
 * retried, one queued behind it on the same ticket, a replay, or the backlog parked when the endpoint is
 * disabled. A healthy endpoint's event costs its attempt row and a share of one cursor update.
 *
 * - `sent_through`: every event of the endpoint's types at or below it has been sent or parked. It starts
 *   where 0024's bookkeeping stood (the workspace's fan-out cursor, or the endpoint's `starts_after`, the
 *   later of the two): what was fanned out already is in delivery rows, what was not is past the cursor.
 * - One sender per endpoint at a time: `sender_token`/`sender_until` say who sends and until when (a killed
 *   worker's lease runs out and the sweep wakes another); `sender_wanted` is set by a wake-up that found the
 *   lease held, and the holder reads it as it lets go and sends another round, so no wake-up is swallowed.
 * - `event_deliveries` churns like a queue, so it is analysed and vacuumed at a fraction of the default
 *   thresholds: the claim's plan depends on fresh statistics of its partial indexes.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE webhook_endpoints
      ADD COLUMN sent_through bigint NOT NULL DEFAULT 0,
      ADD COLUMN sender_token uuid,
      ADD COLUMN sender_until timestamptz,
      ADD COLUMN sender_wanted boolean NOT NULL DEFAULT false;
    UPDATE webhook_endpoints w
      SET sent_through = greatest(w.starts_after, coalesce((SELECT c.position FROM event_fanout_cursors c WHERE c.tenant_id = w.tenant_id), 0));
    ALTER TABLE webhook_endpoints DROP COLUMN starts_after;
    DROP TABLE event_fanout_cursors;
    ALTER TABLE event_deliveries SET (autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 500, autovacuum_vacuum_scale_factor = 0.02);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE event_deliveries RESET (autovacuum_analyze_scale_factor, autovacuum_analyze_threshold, autovacuum_vacuum_scale_factor);
    CREATE TABLE event_fanout_cursors (
      tenant_id uuid PRIMARY KEY REFERENCES tenants(id) ON DELETE CASCADE,
      position bigint NOT NULL
    );
    INSERT INTO event_fanout_cursors (tenant_id, position)
      SELECT tenant_id, max(sent_through) FROM webhook_endpoints GROUP BY tenant_id;
    ALTER TABLE webhook_endpoints ADD COLUMN starts_after bigint NOT NULL DEFAULT 0;
    UPDATE webhook_endpoints SET starts_after = sent_through;
    ALTER TABLE webhook_endpoints DROP COLUMN sent_through, DROP COLUMN sender_token, DROP COLUMN sender_until, DROP COLUMN sender_wanted;
  `.execute(db);
}
