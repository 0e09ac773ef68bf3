import { type Kysely, sql } from 'kysely';

/** Versions (strong ETags, If-Match on PATCH) for macros. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE macros ADD COLUMN version bigint NOT NULL DEFAULT 1;
    CREATE TRIGGER macros_version BEFORE UPDATE ON macros FOR EACH ROW EXECUTE FUNCTION bump_version();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER macros_version ON macros;
    ALTER TABLE macros DROP COLUMN version;
  `.execute(db);
}
