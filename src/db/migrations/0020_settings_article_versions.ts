import { type Kysely, sql } from 'kysely';

/** Versions (strong ETags, If-Match) for the workspace's settings and for help-centre article translations. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE tenants ADD COLUMN version bigint NOT NULL DEFAULT 1;
    CREATE TRIGGER tenants_version BEFORE UPDATE ON tenants FOR EACH ROW EXECUTE FUNCTION bump_version();
    ALTER TABLE help_article_translations ADD COLUMN version bigint NOT NULL DEFAULT 1;
    CREATE TRIGGER help_article_translations_version BEFORE UPDATE ON help_article_translations FOR EACH ROW EXECUTE FUNCTION bump_version();
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER help_article_translations_version ON help_article_translations;
    ALTER TABLE help_article_translations DROP COLUMN version;
    DROP TRIGGER tenants_version ON tenants;
    ALTER TABLE tenants DROP COLUMN version;
  `.execute(db);
}
