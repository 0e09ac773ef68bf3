import { type Kysely, sql } from 'kysely';

/*
 * Time-based rules (issue 37, item 2). docs/decisions/time-rules.md has the reasons; in short:
 *
 * - Three ticket timestamps a rule counts from, kept by the ticket commands in the transaction of the write that
 *   moves them: `status_entered_at` (every status change, reopen and merge), `last_customer_message_at` (an
 *   inbound message, including the one that opens a ticket) and `last_agent_reply_at` (a reply). Reports and the
 *   business-time SLA read them too.
 * - The backfill is set-based and reads the timeline where it can: the latest status event (status_changed,
 *   reopen, merged; not the copies a merge made on the winner, which are the loser's history), the latest inbound
 *   message (copies included: the winner's conversation holds them) and the latest reply. A ticket with no status
 *   event that is still open has been open since it was created; any other falls back to updated_at, which is
 *   never earlier than the real entry, so a rule counts late rather than early on old rows. The version trigger
 *   is off meanwhile: nothing a reader sees of the ticket changes, so its ETag must not.
 * - `time_rule_firings`: one row per (rule, ticket, stretch), the stretch being the anchor's value when the rule
 *   fired. The primary key makes a second firing for the same stretch a no-op (a second worker, a retried job), in
 *   the transaction that applies the rule's actions. A moved anchor is a new stretch. No foreign key to macros
 *   (never deleted, only disabled) or tickets (never deleted): either would take a KEY SHARE lock per row in the
 *   sweep's batch, and the macro's would make a PATCH of the rule wait for a batch to commit. The workspace's
 *   cascade removes the rows.
 * - One partial index per anchor, led by the workspace, ordered by the anchor then id (the sweep's keyset): a
 *   sweep reads only the tickets past a rule's threshold, never the workspace's history: only open, pending and
 *   on-hold tickets are in them (rules touch no other; solved is where most tickets end, for good, since the status
 *   machine has no way on from it but a reopen), so they stay the size of the backlog. The due indexes hold only
 *   tickets that still owe the target (and, for resolution, whose clock runs: 0040's pause).
 * - `macros_time_rules` lists the enabled time rules of every workspace for the minute's sweep.
 */

/** Frozen here as literals: a migration never follows live code (test/layering.test.ts). */
const LIVE_STATUSES = "('open', 'pending', 'on_hold')";

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE tickets
      ADD COLUMN status_entered_at timestamptz,
      ADD COLUMN last_customer_message_at timestamptz,
      ADD COLUMN last_agent_reply_at timestamptz;

    ALTER TABLE tickets DISABLE TRIGGER tickets_version;

    WITH e AS (
      SELECT tenant_id, ticket_id,
        max(created_at) FILTER (WHERE kind IN ('status_changed', 'reopen', 'merged') AND NOT meta ? 'via_merge') AS status_at,
        max(created_at) FILTER (WHERE left(kind, 8) = 'inbound_') AS customer_at,
        max(created_at) FILTER (WHERE kind = 'reply') AS agent_at
      FROM ticket_events
      WHERE kind IN ('status_changed', 'reopen', 'merged', 'reply') OR left(kind, 8) = 'inbound_'
      GROUP BY tenant_id, ticket_id
    )
    UPDATE tickets t SET
      status_entered_at = coalesce(e.status_at, CASE WHEN t.status = 'open' THEN t.created_at ELSE t.updated_at END),
      last_customer_message_at = e.customer_at,
      last_agent_reply_at = e.agent_at
    FROM e
    WHERE t.tenant_id = e.tenant_id AND t.id = e.ticket_id;

    UPDATE tickets SET status_entered_at = CASE WHEN status = 'open' THEN created_at ELSE updated_at END
    WHERE status_entered_at IS NULL;

    ALTER TABLE tickets ENABLE TRIGGER tickets_version;
    ALTER TABLE tickets ALTER COLUMN status_entered_at SET DEFAULT now(), ALTER COLUMN status_entered_at SET NOT NULL;

    CREATE TABLE time_rule_firings (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      macro_id uuid NOT NULL,
      ticket_id uuid NOT NULL,
      stretch timestamptz NOT NULL,
      fired_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, macro_id, ticket_id, stretch)
    );

    CREATE INDEX macros_time_rules ON macros (tenant_id, id) WHERE enabled AND trigger->>'event' = 'time';
  `.execute(db);

  const live = sql.raw(LIVE_STATUSES);
  for (const [name, column] of [
    ['tickets_rule_created', 'created_at'],
    ['tickets_rule_updated', 'updated_at'],
    ['tickets_rule_status_entered', 'status_entered_at'],
    ['tickets_rule_customer_message', 'last_customer_message_at'],
    ['tickets_rule_agent_reply', 'last_agent_reply_at'],
  ] as const) {
    await sql`CREATE INDEX ${sql.raw(name)} ON tickets (tenant_id, ${sql.raw(column)}, id) WHERE status IN ${live}`.execute(db);
  }
  await sql`CREATE INDEX tickets_rule_first_response_due ON tickets (tenant_id, first_response_due, id) WHERE status IN ${live} AND first_responded_at IS NULL`.execute(db);
  await sql`CREATE INDEX tickets_rule_next_reply_due ON tickets (tenant_id, next_reply_due, id) WHERE status IN ${live} AND next_reply_due IS NOT NULL`.execute(db);
  // A paused resolution clock (pending, on hold: 0040) is approaching no due time; its ticket leaves the index.
  await sql`CREATE INDEX tickets_rule_resolution_due ON tickets (tenant_id, resolution_due, id) WHERE status IN ${live} AND solved_at IS NULL AND resolution_paused_at IS NULL`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX tickets_rule_created, tickets_rule_updated, tickets_rule_status_entered, tickets_rule_customer_message,
      tickets_rule_agent_reply, tickets_rule_first_response_due, tickets_rule_next_reply_due, tickets_rule_resolution_due;
    DROP INDEX macros_time_rules;
    DROP TABLE time_rule_firings;
    ALTER TABLE tickets DROP COLUMN status_entered_at, DROP COLUMN last_customer_message_at, DROP COLUMN last_agent_reply_at;
  `.execute(db);
}
