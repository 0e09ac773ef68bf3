import { type Kysely, sql } from 'kysely';

/**
 * The size of each event as the log serves it (issue 32): the JSON byte length written at insert, so a page
 * of the log or the live stream can be cut by bytes, and an event too large for a stream frame can be sent
 * as a reference, without PostgreSQL reading (or the API process holding) the event itself. Rows written
 * before this have none; a read measures them (`octet_length(data::text)`) until retention prunes them.
 * Adding a nullable column without a default rewrites nothing.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE events ADD COLUMN data_bytes integer`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE events DROP COLUMN data_bytes`.execute(db);
}
