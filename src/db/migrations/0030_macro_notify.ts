import { type Kysely, sql } from 'kysely';

/**
 * Every change to a workspace's macros NOTIFYs `macros` with the workspace id (issue 21, part 2). Processes
 * keep "does any enabled macro listen for this event here?" in memory instead of asking PostgreSQL on every
 * ticket write, and drop a workspace's answers when this arrives. A trigger, so no write path can forget it;
 * NOTIFY is delivered at commit only, so a rolled-back change invalidates nothing.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION notify_macros_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('macros', COALESCE(NEW.tenant_id, OLD.tenant_id)::text);
      RETURN NULL;
    END $$;
    CREATE TRIGGER macros_changed AFTER INSERT OR UPDATE OR DELETE ON macros FOR EACH ROW EXECUTE FUNCTION notify_macros_changed();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TRIGGER macros_changed ON macros; DROP FUNCTION notify_macros_changed();`.execute(db);
}
