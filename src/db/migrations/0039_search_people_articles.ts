import { type Kysely, sql } from 'kysely';

/**
 * Customer and help-centre article search (issue 36; docs/decisions/search.md, "Customers and articles"). Runs
 * after 0038, which creates the extensions and the text search configurations hd_english and hd_simple; the
 * extensions are named again here only so this migration states what it needs.
 *
 * Customers, by fragment (trigram indexes, `LIKE '%…%'`):
 * - `search_customer_fold(text)`: lower-cased and unaccented. unaccent() is STABLE (it reads its dictionary by
 *   name through the search_path), so an index cannot call it directly; this IMMUTABLE wrapper names the
 *   dictionary with its schema, resolved once here, so the index and every query fold text the same way
 *   whatever the session's search_path. Its promise of immutability holds while the unaccent rules file is
 *   unchanged: after changing that file, REINDEX the three indexes below.
 * - `search_phone_digits(text)`: the digits of a phone handle, so `+1 (415) 555-0100`, `415-555-0100` and
 *   `4155550100` meet `+14155550100` (the query's digits are taken in the service, never by a regex in SQL).
 * - Expression indexes, each leading with tenant_id (btree_gin): no column is added to customers (no table
 *   rewrite, no trigger on the intake path), and the LIKE's recheck folds the candidate row again, which costs
 *   microseconds per row.
 *
 * Articles, full text: `help_article_search` holds one tsvector per translation, beside the translation so a
 * vote, a state change or a conflict note never rewrites its GIN entries (nor travels with every `SELECT *` of a
 * translation). A trigger keeps it in the transaction of the write, from the title (weight A), the excerpt (B)
 * and the stored markdown body (the sanitiser's text, no HTML), each under the locale's language configuration
 * and hd_simple. The body is indexed up to its first 65,536 characters (search_safe, migration 0038): a tsvector holds at most 1 MB and
 * positions stop at 16,383, and no help article needs more to be found.
 *
 * Centres get a route (kind `help_centre`, keyed by the centre's id) so the public search finds the centre's
 * workspace without a scan of every workspace's centres (routes are the cross-workspace lookups, 0029).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE EXTENSION IF NOT EXISTS unaccent;
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE EXTENSION IF NOT EXISTS btree_gin;

    -- The unaccent dictionary's schema is read from the catalog (wherever the extension lives), and frozen into
    -- the function's body.
    DO $do$
    DECLARE s text := (SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'unaccent');
    BEGIN
      EXECUTE format('CREATE FUNCTION search_customer_fold(text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS %L',
                     format('SELECT lower(%s.unaccent(%L::regdictionary, $1))', s, s || '.unaccent'));
    END
    $do$;

    CREATE FUNCTION search_phone_digits(text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
      AS $$ SELECT regexp_replace($1, '[^0-9]', '', 'g') $$;

    CREATE INDEX customers_search_text ON customers
      USING gin (tenant_id, search_customer_fold(display_name || ' ' || email || ' ' || company) gin_trgm_ops);
    CREATE INDEX customer_handles_search_text ON customer_handles USING gin (tenant_id, search_customer_fold(handle) gin_trgm_ops);
    -- Digits only where a handle is a phone number: a visitor id's or chat id's digits are not a number to dial.
    CREATE INDEX customer_handles_search_digits ON customer_handles USING gin (tenant_id, search_phone_digits(handle) gin_trgm_ops)
      WHERE kind IN ('phone', 'whatsapp_id');

    -- The language configuration of a locale: English stems; every other locale is matched word for word.
    CREATE FUNCTION search_article_config(locale text) RETURNS regconfig LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
      AS $$ SELECT CASE WHEN $1 = 'en' OR $1 LIKE 'en-%' THEN 'hd_english'::regconfig ELSE 'hd_simple'::regconfig END $$;

    -- The texts go through search_safe (migration 0038): the parser's time is quadratic in a run without spaces
    -- (80,000 characters of "_a" took it half a minute), so runs are cut at 100 characters, underscores read as spaces.
    CREATE FUNCTION search_article_doc(locale text, title text, excerpt text, body text) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
      SELECT CASE WHEN x.cfg = 'hd_simple'::regconfig THEN ''::tsvector
                  ELSE setweight(to_tsvector(x.cfg, x.t), 'A') || setweight(to_tsvector(x.cfg, x.e), 'B') || to_tsvector(x.cfg, x.b) END
             || setweight(to_tsvector('hd_simple', x.t), 'A') || setweight(to_tsvector('hd_simple', x.e), 'B') || to_tsvector('hd_simple', x.b)
      FROM (SELECT search_article_config($1) AS cfg,
                   search_safe($2) AS t,
                   search_safe($3) AS e,
                   search_safe($4) AS b) x
    $$;

    CREATE TABLE help_article_search (
      tenant_id uuid NOT NULL,
      translation_id uuid NOT NULL,
      doc tsvector NOT NULL,
      PRIMARY KEY (tenant_id, translation_id),
      FOREIGN KEY (tenant_id, translation_id) REFERENCES help_article_translations (tenant_id, id) ON DELETE CASCADE
    );
    CREATE INDEX help_article_search_doc ON help_article_search USING gin (tenant_id, doc);

    CREATE FUNCTION search_help_article() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      -- Only a change of the indexed text rebuilds the document (a sync sets every column, changed or not).
      IF TG_OP = 'UPDATE' AND NEW.title IS NOT DISTINCT FROM OLD.title AND NEW.excerpt IS NOT DISTINCT FROM OLD.excerpt
         AND NEW.body_markdown IS NOT DISTINCT FROM OLD.body_markdown AND NEW.locale IS NOT DISTINCT FROM OLD.locale THEN
        RETURN NULL;
      END IF;
      INSERT INTO help_article_search (tenant_id, translation_id, doc)
      VALUES (NEW.tenant_id, NEW.id, search_article_doc(NEW.locale, NEW.title, NEW.excerpt, NEW.body_markdown))
      ON CONFLICT (tenant_id, translation_id) DO UPDATE SET doc = EXCLUDED.doc;
      RETURN NULL;
    END
    $$;
    CREATE TRIGGER search_help_article AFTER INSERT OR UPDATE OF title, excerpt, body_markdown, locale ON help_article_translations
      FOR EACH ROW EXECUTE FUNCTION search_help_article();

    INSERT INTO help_article_search (tenant_id, translation_id, doc)
      SELECT tenant_id, id, search_article_doc(locale, title, excerpt, body_markdown) FROM help_article_translations;

    INSERT INTO routes (kind, key, tenant_id) SELECT 'help_centre', id::text, tenant_id FROM help_centres ON CONFLICT DO NOTHING;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DELETE FROM routes WHERE kind = 'help_centre';
    DROP TRIGGER search_help_article ON help_article_translations;
    DROP FUNCTION search_help_article();
    DROP TABLE help_article_search;
    DROP FUNCTION search_article_doc(text, text, text, text);
    DROP FUNCTION search_article_config(text);
    DROP INDEX customer_handles_search_digits;
    DROP INDEX customer_handles_search_text;
    DROP INDEX customers_search_text;
    DROP FUNCTION search_phone_digits(text);
    DROP FUNCTION search_customer_fold(text);
  `.execute(db);
}
