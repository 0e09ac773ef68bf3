import { type Kysely, sql } from 'kysely';

/**
 * Web chat files (issue 34): a web chat visitor uploads through the same rows as an agent. A visitor is not a
 * user (their id is the service's `wv_…` string, not a uuid), so the uploader is one of two columns: `uploaded_by`
 * (a member) or `uploaded_by_visitor` (a visitor id), never both. Everything else about an upload (its token's
 * hash, its hour, binding clears the hash) is unchanged.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE attachments ADD COLUMN uploaded_by_visitor text;
    ALTER TABLE attachments ADD CONSTRAINT attachments_one_uploader CHECK (uploaded_by IS NULL OR uploaded_by_visitor IS NULL);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE attachments DROP CONSTRAINT attachments_one_uploader;
    ALTER TABLE attachments DROP COLUMN uploaded_by_visitor;
  `.execute(db);
}
