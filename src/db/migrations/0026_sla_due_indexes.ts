import { type Kysely, sql } from 'kysely';

/**
 * The SLA sweep, set-based (issue 20). It walked every workspace each minute and ran two breach checks in
 * each; the first-response check had no index (19 ms at 62,500 open tickets, per workspace). Each target now
 * has a partial index of exactly the tickets that can still breach it, ordered by due time and carrying the
 * workspace: the sweep reads which workspaces have something due in one range scan per target and checks
 * only those, and each workspace's check finds its due tickets in the same index. Tickets that met or
 * breached a target leave its index, so the index stays the size of what is still owed.
 * `tickets_sla_open` (0002) served only the resolution check, per workspace; the new resolution index covers it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX tickets_first_response_due ON tickets (first_response_due) INCLUDE (tenant_id)
      WHERE status IN ('open', 'pending', 'on_hold') AND first_responded_at IS NULL AND first_response_breached_at IS NULL;
    CREATE INDEX tickets_resolution_due ON tickets (resolution_due) INCLUDE (tenant_id)
      WHERE status IN ('open', 'pending', 'on_hold') AND solved_at IS NULL AND resolution_breached_at IS NULL;
    DROP INDEX tickets_sla_open;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX tickets_sla_open ON tickets (tenant_id, resolution_due)
      WHERE status IN ('open', 'pending', 'on_hold') AND resolution_breached_at IS NULL;
    DROP INDEX tickets_first_response_due;
    DROP INDEX tickets_resolution_due;
  `.execute(db);
}
