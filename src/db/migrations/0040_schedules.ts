import { type Kysely, sql } from 'kysely';

/*
 * Business hours (issue 37): schedules, the SLA policies that name one, and the ticket columns the business-time
 * SLA clock keeps. docs/decisions/business-time.md has the reasons; in short:
 *
 * - `schedules`: an IANA zone, weekly hours (jsonb: seven arrays, Monday first, of [start, end) local minutes),
 *   holidays typed in (`holidays`) and holidays imported from an iCal feed (`ical_holidays`, with when the feed was
 *   last read and what went wrong), kept apart so a refresh never touches what an admin typed. Versioned like
 *   macros (strong ETag, If-Match on PATCH).
 * - `sla_policies.schedule_id`: a policy counts business minutes on the schedule it names, calendar minutes
 *   without one (as before). A schedule named by a policy cannot be deleted (the foreign key, and a 409 first).
 * - Tickets: `next_reply_due` (and `next_reply_from`, when its clock started; `next_reply_breached_at`, marked
 *   once like the other targets); the resolution clock's pause (`resolution_paused_at`,
 *   `resolution_remaining_minutes`) and where it restarted from after the last pause (`resolution_resumed_at`,
 *   `resolution_elapsed_minutes` counted before it), so a schedule change can recompute every open ticket's due
 *   times from the ticket's row alone. All nullable or with a constant default: adding them rewrites nothing.
 * - The resolution due index (0026) leaves paused tickets out: a clock that is not running is never overdue, and
 *   the sweep does not visit a workspace for its tickets waiting on customers.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE schedules (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      id uuid NOT NULL,
      name text NOT NULL,
      time_zone text NOT NULL,
      weekly jsonb NOT NULL,
      holidays date[] NOT NULL DEFAULT '{}',
      ical_url text,
      ical_holidays date[] NOT NULL DEFAULT '{}',
      ical_fetched_at timestamptz,
      ical_error text,
      version bigint NOT NULL DEFAULT 1,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant_id, id)
    );
    CREATE TRIGGER schedules_version BEFORE UPDATE ON schedules FOR EACH ROW EXECUTE FUNCTION bump_version();
    -- The daily iCal sweep reads the feeds least recently read first.
    CREATE INDEX schedules_ical_due ON schedules (ical_fetched_at NULLS FIRST) INCLUDE (tenant_id) WHERE ical_url IS NOT NULL;

    ALTER TABLE sla_policies ADD COLUMN schedule_id uuid,
      ADD CONSTRAINT sla_policies_schedule_fkey FOREIGN KEY (tenant_id, schedule_id) REFERENCES schedules (tenant_id, id);
    CREATE INDEX sla_policies_schedule ON sla_policies (tenant_id, schedule_id) WHERE schedule_id IS NOT NULL;

    ALTER TABLE tickets
      ADD COLUMN next_reply_due timestamptz,
      ADD COLUMN next_reply_from timestamptz,
      ADD COLUMN next_reply_breached_at timestamptz,
      ADD COLUMN resolution_paused_at timestamptz,
      ADD COLUMN resolution_remaining_minutes integer,
      ADD COLUMN resolution_resumed_at timestamptz,
      ADD COLUMN resolution_elapsed_minutes integer NOT NULL DEFAULT 0;

    -- The recompute after a schedule change reads a policy's open tickets by keyset.
    CREATE INDEX tickets_sla_policy_open ON tickets (tenant_id, sla_policy_id, id) WHERE status IN ('open', 'pending', 'on_hold');
    CREATE INDEX tickets_next_reply_due ON tickets (next_reply_due) INCLUDE (tenant_id)
      WHERE status IN ('open', 'pending', 'on_hold') AND next_reply_due IS NOT NULL AND next_reply_breached_at IS NULL;
    DROP INDEX tickets_resolution_due;
    CREATE INDEX tickets_resolution_due ON tickets (resolution_due) INCLUDE (tenant_id)
      WHERE status IN ('open', 'pending', 'on_hold') AND solved_at IS NULL AND resolution_breached_at IS NULL AND resolution_paused_at IS NULL;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX tickets_resolution_due;
    CREATE INDEX tickets_resolution_due ON tickets (resolution_due) INCLUDE (tenant_id)
      WHERE status IN ('open', 'pending', 'on_hold') AND solved_at IS NULL AND resolution_breached_at IS NULL;
    DROP INDEX tickets_next_reply_due;
    DROP INDEX tickets_sla_policy_open;
    ALTER TABLE tickets
      DROP COLUMN next_reply_due,
      DROP COLUMN next_reply_from,
      DROP COLUMN next_reply_breached_at,
      DROP COLUMN resolution_paused_at,
      DROP COLUMN resolution_remaining_minutes,
      DROP COLUMN resolution_resumed_at,
      DROP COLUMN resolution_elapsed_minutes;
    DROP INDEX sla_policies_schedule;
    ALTER TABLE sla_policies DROP COLUMN schedule_id;
    DROP TABLE schedules;
  `.execute(db);
}
