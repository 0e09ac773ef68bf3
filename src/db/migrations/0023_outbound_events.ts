import { type Kysely, sql } from 'kysely';

/**
 * The outbound event log (issue 19): a transactional outbox. An event row is inserted in the transaction of
 * the change that causes it, so a change that rolls back leaves no event and a committed one always has its
 * events.
 *
 * `position` is the workspace's commit order, the log's cursor. It cannot be the insert-time sequence: two
 * writers take 10 and 11, 11 commits first, a reader pages past 11, and 10 appears behind its cursor. So a
 * deferred constraint trigger assigns `position` at COMMIT, under a per-workspace advisory lock held until the
 * commit completes: the next writer of that workspace assigns only after this one is visible, so positions
 * grow in commit order and a reader never sees a gap close behind it. The lock is taken at commit, after the
 * transaction's other locks, so it cannot enter a lock cycle with them, and is held only for the commit.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE SEQUENCE event_positions;
    CREATE TABLE events (
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      id uuid NOT NULL,
      position bigint,
      type text NOT NULL,
      occurred_at timestamptz NOT NULL DEFAULT now(),
      -- The ticket an event is about: deliveries keep one ticket's events in order, and no other's.
      ticket_id uuid,
      data jsonb NOT NULL,
      PRIMARY KEY (tenant_id, id)
    );
    CREATE UNIQUE INDEX events_log ON events (tenant_id, position) WHERE position IS NOT NULL;
    CREATE INDEX events_occurred ON events (tenant_id, occurred_at);

    CREATE FUNCTION events_position() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_advisory_xact_lock(hashtextextended('events|' || NEW.tenant_id::text, 0));
      UPDATE events SET position = nextval('event_positions') WHERE tenant_id = NEW.tenant_id AND id = NEW.id;
      RETURN NULL;
    END $$;
    CREATE CONSTRAINT TRIGGER events_position AFTER INSERT ON events
      DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION events_position();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE events;
    DROP FUNCTION events_position();
    DROP SEQUENCE event_positions;
  `.execute(db);
}
