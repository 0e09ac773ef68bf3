import { type Kysely, sql } from 'kysely';

/**
 * A ticket's version: 1 at creation, one more on every change to the row (a trigger, so no update path can
 * forget it). The strong ETag of a ticket is its version; `If-Match` on PATCH compares against it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE tickets ADD COLUMN version bigint NOT NULL DEFAULT 1;
    CREATE FUNCTION bump_version() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      NEW.version := OLD.version + 1;
      RETURN NEW;
    END $$;
    CREATE TRIGGER tickets_version BEFORE UPDATE ON tickets FOR EACH ROW EXECUTE FUNCTION bump_version();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER tickets_version ON tickets;
    DROP FUNCTION bump_version();
    ALTER TABLE tickets DROP COLUMN version;
  `.execute(db);
}
