import { type Kysely, sql } from 'kysely';

/**
 * One sender per webhook endpoint at a time (issue 19, delivery throughput): the sender that holds an
 * endpoint's lease sends its due deliveries in rounds of up to its concurrency, with one statement to claim
 * a round and one to settle it, instead of every worker slot woken for the endpoint queueing on its row lock
 * to lease one delivery at a time.
 *
 * - `sender_token`/`sender_until`: who sends for the endpoint, and until when (a killed worker's lease runs
 *   out and the sweep wakes another);
 * - `sender_wanted`: set by a wake-up that found the lease held (new deliveries arrived while the holder was
 *   sending); the holder reads it as it lets go and sends another round, so no wake-up is swallowed.
 * - `event_deliveries` churns like a queue (every row inserted pending, then updated once or a few times),
 *   so it is analysed and vacuumed at a fraction of the default thresholds: the claim's plan depends on
 *   fresh statistics of its partial indexes, and a burst of thousands of rows otherwise runs on none.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE webhook_endpoints
      ADD COLUMN sender_token uuid,
      ADD COLUMN sender_until timestamptz,
      ADD COLUMN sender_wanted boolean NOT NULL DEFAULT false;
    ALTER TABLE event_deliveries SET (autovacuum_analyze_scale_factor = 0.01, autovacuum_analyze_threshold = 500, autovacuum_vacuum_scale_factor = 0.02);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE event_deliveries RESET (autovacuum_analyze_scale_factor, autovacuum_analyze_threshold, autovacuum_vacuum_scale_factor);
    ALTER TABLE webhook_endpoints DROP COLUMN sender_token, DROP COLUMN sender_until, DROP COLUMN sender_wanted;
  `.execute(db);
}
