import { type Kysely, sql } from 'kysely';

/**
 * Articles arriving from the source (one per source article and centre) and the rest of a translation:
 * the source's fields, the private incoming HTML (never served), the sanitised render and its reports,
 * the editable markdown, local-edit and conflict state, and the pending incoming version of a conflict.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE help_articles (
      id uuid PRIMARY KEY,
      tenant_id uuid NOT NULL,
      help_centre_id uuid NOT NULL,
      source_article_id text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (help_centre_id, source_article_id),
      FOREIGN KEY (tenant_id, help_centre_id) REFERENCES help_centres (tenant_id, id) ON DELETE CASCADE
    );
    ALTER TABLE help_article_translations
      ADD COLUMN title text NOT NULL DEFAULT '',
      ADD COLUMN slug text NOT NULL DEFAULT '',
      ADD COLUMN excerpt text NOT NULL DEFAULT '',
      ADD COLUMN container_path text[] NOT NULL DEFAULT '{}',
      ADD COLUMN position integer NOT NULL DEFAULT 0,
      ADD COLUMN promoted boolean NOT NULL DEFAULT false,
      ADD COLUMN source_status_raw text NOT NULL DEFAULT '',
      ADD COLUMN source_visibility_raw jsonb NOT NULL DEFAULT '{}',
      ADD COLUMN permission_group_id text NOT NULL DEFAULT '',
      ADD COLUMN user_segment_ids text[] NOT NULL DEFAULT '{}',
      ADD COLUMN labels text[] NOT NULL DEFAULT '{}',
      ADD COLUMN author_label text NOT NULL DEFAULT '',
      ADD COLUMN source_url text NOT NULL DEFAULT '',
      ADD COLUMN source_created_at timestamptz,
      ADD COLUMN source_updated_at timestamptz,
      ADD COLUMN published_at timestamptz,
      ADD COLUMN vote_count integer NOT NULL DEFAULT 0,
      ADD COLUMN vote_sum integer NOT NULL DEFAULT 0,
      ADD COLUMN noindex boolean NOT NULL DEFAULT false,
      ADD COLUMN body_source_html text NOT NULL DEFAULT '',
      ADD COLUMN body_html text NOT NULL DEFAULT '',
      ADD COLUMN body_markdown text NOT NULL DEFAULT '',
      ADD COLUMN body_format text NOT NULL DEFAULT 'markdown',
      ADD COLUMN sanitizer_version text NOT NULL DEFAULT '',
      ADD COLUMN sanitize_report jsonb NOT NULL DEFAULT '{}',
      ADD COLUMN link_report jsonb NOT NULL DEFAULT '{}',
      ADD COLUMN asset_report jsonb NOT NULL DEFAULT '{}',
      ADD COLUMN missing_at_source_at timestamptz,
      ADD COLUMN locally_edited_at timestamptz,
      ADD COLUMN has_conflict boolean NOT NULL DEFAULT false,
      ADD COLUMN conflict_seen_at timestamptz,
      ADD COLUMN pending jsonb;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE help_article_translations
      DROP COLUMN title, DROP COLUMN slug, DROP COLUMN excerpt, DROP COLUMN container_path, DROP COLUMN position, DROP COLUMN promoted,
      DROP COLUMN source_status_raw, DROP COLUMN source_visibility_raw, DROP COLUMN permission_group_id, DROP COLUMN user_segment_ids,
      DROP COLUMN labels, DROP COLUMN author_label, DROP COLUMN source_url, DROP COLUMN source_created_at, DROP COLUMN source_updated_at,
      DROP COLUMN published_at, DROP COLUMN vote_count, DROP COLUMN vote_sum, DROP COLUMN noindex, DROP COLUMN body_source_html,
      DROP COLUMN body_html, DROP COLUMN body_markdown, DROP COLUMN body_format, DROP COLUMN sanitizer_version, DROP COLUMN sanitize_report,
      DROP COLUMN link_report, DROP COLUMN asset_report, DROP COLUMN missing_at_source_at, DROP COLUMN locally_edited_at,
      DROP COLUMN has_conflict, DROP COLUMN conflict_seen_at, DROP COLUMN pending;
    DROP TABLE help_articles;
  `.execute(db);
}
