import { type Kysely, sql } from 'kysely';

/**
 * Outbound webhooks fair across workspaces (issue 32, finding 3): a workspace that pointed 40 endpoints at a
 * receiver that never answers held every delivery slot for 10 s per round, and everyone else's deliveries
 * waited behind them.
 *
 * - A circuit breaker per endpoint: `circuit_failures` failed attempts in a row open it until
 *   `circuit_open_until`, during which nothing is sent; then one event probes it, and `circuit_opens` (how often
 *   it opened since its last delivery) doubles the next wait.
 * - At most WEBHOOK_WORKSPACE_CONCURRENCY endpoints of one workspace hold a sender lease at once; an endpoint
 *   that found its workspace's senders all busy says since when it waits (`slot_wanted_at`), and the next one
 *   to let go wakes the one waiting longest.
 * The partial index finds a workspace's waiting endpoints without reading its others.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE webhook_endpoints
      ADD COLUMN circuit_failures integer NOT NULL DEFAULT 0,
      ADD COLUMN circuit_opens integer NOT NULL DEFAULT 0,
      ADD COLUMN circuit_open_until timestamptz,
      ADD COLUMN slot_wanted_at timestamptz;
    CREATE INDEX webhook_endpoints_waiting ON webhook_endpoints (tenant_id, slot_wanted_at) WHERE slot_wanted_at IS NOT NULL;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX webhook_endpoints_waiting;
    ALTER TABLE webhook_endpoints DROP COLUMN circuit_failures, DROP COLUMN circuit_opens, DROP COLUMN circuit_open_until, DROP COLUMN slot_wanted_at;
  `.execute(db);
}
