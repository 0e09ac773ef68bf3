import { type Kysely, sql } from 'kysely';

/**
 * Primary keys and unique constraints that a database distributed by workspace can enforce (issue 20). Citus
 * shards every tenant table by `tenant_id` and enforces a primary key or unique constraint only when it
 * contains the distribution column. Every foreign key between tenant tables already did (0001–0025); these
 * did not:
 * - 21 primary keys on `(id)` become `(tenant_id, id)`; the `(tenant_id, id)` unique constraints the foreign
 *   keys reference stay as they are. Ids are random UUIDs, unique in practice; what is enforced is per workspace.
 *   Lookups by id alone (webhook intake by integration id, agents) keep a plain index on `id`.
 * - 4 composite primary keys and 5 unique constraints gain `tenant_id` in front (their `ON CONFLICT` targets
 *   change with them), and the duplicate-copies foreign key to `webhook_deliveries` carries it too.
 * Left for the routing tables (global by nature: what a request carries before its workspace is known):
 * `api_keys (prefix)`, `channel_connections (inbound_token_hash)`, `help_centre_hosts (full_host)` and
 * `oauth_states (state_hash)`. See docs/decisions/data-and-scale.md, "A schema Citus can distribute".
 */
const BY_ID = [
  'agents', 'api_keys', 'audit_log', 'csat_responses', 'customers', 'help_article_translations', 'help_articles', 'help_centres',
  'integrations', 'macros', 'notifications', 'rollup_journal', 'saved_views', 'sla_policies', 'teams', 'ticket_events', 'tickets',
  'time_entries', 'todos', 'transcript_events', 'transcripts',
];
/** Looked up by id alone on a hot path today (until routing tables take that over). */
const ID_LOOKUPS = ['integrations', 'agents'];

export async function up(db: Kysely<unknown>): Promise<void> {
  for (const t of BY_ID) {
    await sql`ALTER TABLE ${sql.table(t)} DROP CONSTRAINT ${sql.raw(`${t}_pkey`)}, ADD CONSTRAINT ${sql.raw(`${t}_pkey`)} PRIMARY KEY (tenant_id, id)`.execute(db);
  }
  for (const t of ID_LOOKUPS) await sql`CREATE INDEX ${sql.raw(`${t}_id`)} ON ${sql.table(t)} (id)`.execute(db);
  await sql`
    ALTER TABLE macro_runs DROP CONSTRAINT macro_runs_pkey, ADD CONSTRAINT macro_runs_pkey PRIMARY KEY (tenant_id, macro_id, event_id);
    ALTER TABLE team_members DROP CONSTRAINT team_members_pkey, ADD CONSTRAINT team_members_pkey PRIMARY KEY (tenant_id, team_id, user_id);
    ALTER TABLE team_members DROP CONSTRAINT team_members_team_id_position_key,
      ADD CONSTRAINT team_members_team_id_position_key UNIQUE (tenant_id, team_id, position);

    ALTER TABLE webhook_duplicate_copies DROP CONSTRAINT webhook_duplicate_copies_integration_id_dedupe_key_fkey;
    ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_pkey, ADD CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (tenant_id, integration_id, dedupe_key);
    ALTER TABLE webhook_duplicate_copies DROP CONSTRAINT webhook_duplicate_copies_pkey,
      ADD CONSTRAINT webhook_duplicate_copies_pkey PRIMARY KEY (tenant_id, integration_id, dedupe_key, correlation_id),
      ADD CONSTRAINT webhook_duplicate_copies_delivery_fkey FOREIGN KEY (tenant_id, integration_id, dedupe_key)
        REFERENCES webhook_deliveries (tenant_id, integration_id, dedupe_key) ON DELETE CASCADE;

    ALTER TABLE help_article_translations DROP CONSTRAINT help_article_translations_article_id_locale_key,
      ADD CONSTRAINT help_article_translations_article_id_locale_key UNIQUE (tenant_id, article_id, locale);
    ALTER TABLE help_articles DROP CONSTRAINT help_articles_help_centre_id_source_article_id_key,
      ADD CONSTRAINT help_articles_help_centre_id_source_article_id_key UNIQUE (tenant_id, help_centre_id, source_article_id);
    ALTER TABLE transcripts DROP CONSTRAINT transcripts_integration_id_external_ticket_id_key,
      ADD CONSTRAINT transcripts_integration_id_external_ticket_id_key UNIQUE (tenant_id, integration_id, external_ticket_id);
    DROP INDEX help_centre_hosts_primary;
    CREATE UNIQUE INDEX help_centre_hosts_primary ON help_centre_hosts (tenant_id, help_centre_id) WHERE is_primary;
  `.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('0028_tenant_keys is not reversible: restore from a backup taken before it');
}
