import { type Kysely, sql } from 'kysely';

/**
 * Help centres and their hosts. Article translations get their table now with the columns the centre
 * list counts by (visibility, editorial state); the source-sync columns arrive with the sync.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE help_centres (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
      name text NOT NULL CHECK (length(name) BETWEEN 1 AND 120),
      default_locale text NOT NULL,
      locales text[] NOT NULL,
      enabled boolean NOT NULL DEFAULT true,
      brand jsonb NOT NULL DEFAULT '{}',
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (tenant_id, id),
      CHECK (default_locale = ANY (locales))
    );
    CREATE INDEX help_centres_tenant ON help_centres (tenant_id, created_at);

    CREATE TABLE help_centre_hosts (
      tenant_id uuid NOT NULL,
      help_centre_id uuid NOT NULL,
      subdomain_label text NOT NULL,
      full_host text NOT NULL UNIQUE,
      is_primary boolean NOT NULL,
      verified_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      FOREIGN KEY (tenant_id, help_centre_id) REFERENCES help_centres (tenant_id, id) ON DELETE CASCADE
    );
    CREATE UNIQUE INDEX help_centre_hosts_primary ON help_centre_hosts (help_centre_id) WHERE is_primary;

    CREATE TABLE help_article_translations (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL,
      help_centre_id uuid NOT NULL,
      article_id uuid NOT NULL,
      locale text NOT NULL,
      visibility text NOT NULL DEFAULT 'public',
      editorial_state text NOT NULL DEFAULT 'draft',
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (article_id, locale),
      FOREIGN KEY (tenant_id, help_centre_id) REFERENCES help_centres (tenant_id, id) ON DELETE CASCADE
    );
    CREATE INDEX help_article_translations_centre ON help_article_translations (tenant_id, help_centre_id, editorial_state, visibility);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE help_article_translations, help_centre_hosts, help_centres`.execute(db);
}
