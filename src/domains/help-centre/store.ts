import { sql } from 'kysely';
import type { Executor } from '../../db';
import { addRoute } from '../routing/store';

export async function insertCentre(db: Executor, tenantId: string, c: { id: string; name: string; default_locale: string; locales: string[]; brand: Record<string, string> }) {
  await db.insertInto('help_centres').values({ ...c, tenant_id: tenantId, brand: JSON.stringify(c.brand) }).execute();
  // The public routes name a centre by its id alone; the route finds its workspace (a fresh random id is never taken).
  await addRoute(db, tenantId, 'help_centre', c.id);
}

/** False when the host is taken (by any workspace: a host serves one centre). */
export async function insertPrimaryHost(db: Executor, tenantId: string, h: { help_centre_id: string; subdomain_label: string; full_host: string }): Promise<boolean> {
  // The route is the claim on the host across workspaces.
  if (!(await addRoute(db, tenantId, 'help_centre_host', h.full_host))) return false;
  const r = await db
    .insertInto('help_centre_hosts')
    .values({ ...h, tenant_id: tenantId, is_primary: true, verified_at: sql<Date>`now()` as unknown as Date })
    .onConflict((oc) => oc.columns(['tenant_id', 'full_host']).doNothing())
    .executeTakeFirst();
  return Number(r.numInsertedOrUpdatedRows ?? 0) === 1;
}

export async function centreIds(db: Executor, tenantId: string, limit: number): Promise<string[]> {
  return (await db.selectFrom('help_centres').select('id').where('tenant_id', '=', tenantId).orderBy('created_at').limit(limit).execute()).map((r) => r.id);
}

export async function centreExists(db: Executor, tenantId: string, id: string): Promise<boolean> {
  return (await db.selectFrom('help_centres').select('id').where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst()) !== undefined;
}

/** Every centre with its hosts and counts: everything, and what a visitor can read (published and public). */
export async function listCentres(db: Executor, tenantId: string) {
  const { rows } = await sql<{
    id: string;
    name: string;
    default_locale: string;
    enabled: boolean;
    brand: Record<string, string>;
    locales: string[];
    hosts: { subdomain_label: string; full_host: string; is_primary: boolean; verified_at: string | null }[];
    article_count: number;
    published_public_count: number;
  }>`
    select c.id, c.name, c.default_locale, c.enabled, c.brand, c.locales,
           coalesce((select jsonb_agg(jsonb_build_object('subdomain_label', h.subdomain_label, 'full_host', h.full_host, 'is_primary', h.is_primary,
                                                         'verified_at', h.verified_at) order by h.is_primary desc, h.full_host)
                     from help_centre_hosts h where h.tenant_id = c.tenant_id and h.help_centre_id = c.id), '[]') as hosts,
           (select count(*) from help_article_translations t where t.tenant_id = c.tenant_id and t.help_centre_id = c.id)::int as article_count,
           (select count(*) from help_article_translations t
             where t.tenant_id = c.tenant_id and t.help_centre_id = c.id and t.editorial_state = 'published' and t.visibility = 'public')::int as published_public_count
    from help_centres c where c.tenant_id = ${tenantId}
    order by c.created_at, c.id`.execute(db);
  return rows;
}

export async function setBrand(db: Executor, tenantId: string, id: string, brand: Record<string, string>) {
  await db.updateTable('help_centres').set({ brand: JSON.stringify(brand), updated_at: sql`now()` }).where('tenant_id', '=', tenantId).where('id', '=', id).execute();
}

export async function primaryHost(db: Executor, tenantId: string, centreId: string): Promise<string> {
  const row = await db.selectFrom('help_centre_hosts').select('full_host').where('tenant_id', '=', tenantId).where('help_centre_id', '=', centreId).where('is_primary', '=', true).executeTakeFirst();
  return row?.full_host ?? '';
}

export async function centreLocales(db: Executor, tenantId: string, centreId: string) {
  return db.selectFrom('help_centres').select(['default_locale', 'locales']).where('tenant_id', '=', tenantId).where('id', '=', centreId).executeTakeFirstOrThrow();
}

/** The article of a source article in a centre, created on first sight (a concurrent sync waits and reads it). */
export async function articleFor(db: Executor, tenantId: string, centreId: string, sourceArticleId: string, newId: string): Promise<string> {
  await db
    .insertInto('help_articles')
    .values({ id: newId, tenant_id: tenantId, help_centre_id: centreId, source_article_id: sourceArticleId })
    .onConflict((oc) => oc.columns(['tenant_id', 'help_centre_id', 'source_article_id']).doNothing())
    .execute();
  const row = await db
    .selectFrom('help_articles')
    .select('id')
    .where('tenant_id', '=', tenantId)
    .where('help_centre_id', '=', centreId)
    .where('source_article_id', '=', sourceArticleId)
    .executeTakeFirstOrThrow();
  return row.id;
}

export async function lockTranslation(db: Executor, tenantId: string, articleId: string, locale: string) {
  return db.selectFrom('help_article_translations').selectAll().where('tenant_id', '=', tenantId).where('article_id', '=', articleId).where('locale', '=', locale).forUpdate().executeTakeFirst();
}

export async function lockTranslationById(db: Executor, tenantId: string, id: string) {
  return db.selectFrom('help_article_translations').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).forUpdate().executeTakeFirst();
}

export async function getTranslation(db: Executor, tenantId: string, id: string) {
  return db.selectFrom('help_article_translations').selectAll().where('tenant_id', '=', tenantId).where('id', '=', id).executeTakeFirst();
}

export async function insertTranslation(db: Executor, tenantId: string, t: Record<string, unknown>) {
  await db.insertInto('help_article_translations').values({ ...t, tenant_id: tenantId } as never).execute();
}

export async function updateTranslation(db: Executor, tenantId: string, id: string, patch: Record<string, unknown>) {
  await db
    .updateTable('help_article_translations')
    .set({ ...patch, updated_at: sql`now()` } as never)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .execute();
}

/** Every translation of an article (for alternates and outdated locales). */
export async function siblings(db: Executor, tenantId: string, articleId: string) {
  return db
    .selectFrom('help_article_translations')
    .select(['id', 'locale', 'slug', 'source_updated_at', 'version'])
    .where('tenant_id', '=', tenantId)
    .where('article_id', '=', articleId)
    .orderBy('locale')
    .execute();
}

/** Source article id → this centre's translation (same locale), for rewriting links between articles. */
export async function translationsBySource(db: Executor, tenantId: string, centreId: string, locale: string) {
  return db
    .selectFrom('help_articles as a')
    .innerJoin('help_article_translations as t', (j) => j.onRef('t.tenant_id', '=', 'a.tenant_id').onRef('t.article_id', '=', 'a.id'))
    .select(['a.source_article_id', 'a.id as article_id', 't.slug'])
    .where('a.tenant_id', '=', tenantId)
    .where('a.help_centre_id', '=', centreId)
    .where('t.locale', '=', locale)
    .execute();
}

/** A centre as its public routes see it: whether it is enabled, and its locales. */
export async function publicCentre(db: Executor, tenantId: string, centreId: string) {
  return db
    .selectFrom('help_centres')
    .select(['enabled', 'default_locale', 'locales'])
    .where('tenant_id', '=', tenantId)
    .where('id', '=', centreId)
    .executeTakeFirst();
}

/** One article search hit: the translation's summary, its rank (an integer) and a snippet of its body. */
export interface ArticleHit {
  id: string;
  article_id: string;
  help_centre_id: string;
  locale: string;
  title: string;
  slug: string;
  excerpt: string;
  editorial_state: string;
  visibility: string;
  updated_at: Date;
  host: string;
  page_key: string;
  snippet: string;
}

/** The body's first characters a snippet is cut from: ts_headline parses all it is given, for every hit shown. */
const SNIPPET_SOURCE_CHARS = 30_000;

/**
 * Article translations whose document (help_article_search, migration 0039) matches `q` in websearch syntax under
 * the locale's language configuration and hd_simple (either may match: the document holds both), ranked by
 * ts_rank_cd (cover density, normalised by the document's length) as an integer, ties by id; the page starts
 * past `after`. `published` keeps published, public translations only. The snippet (ts_headline) is made for
 * the page's rows alone, from the body HTML-escaped first, so the only markup in it is ts_headline's <mark>.
 * websearch_to_tsquery reads any text (an unclosed quote, a lone "-", "OR OR") without an error. Underscores are
 * read as spaces in the query and the snippet's text as in the documents: the parser's time is quadratic in a
 * long run of word_word_… (the snippet shows them as spaces).
 */
export async function searchArticles(
  db: Executor,
  tenantId: string,
  s: { q: string; centreId?: string; locale?: string; published: boolean; limit: number; after?: { key: string; id: string } },
): Promise<ArticleHit[]> {
  const language = s.locale === undefined ? sql`'hd_english'::regconfig` : sql`search_article_config(${s.locale})`;
  // Underscores read as spaces, as the documents read them (migration 0039, search_article_doc).
  const words = sql`translate(${s.q}, '_', ' ')`;
  const query = sql`(websearch_to_tsquery(${language}, ${words}) || websearch_to_tsquery('hd_simple', ${words}))`;
  const where = [
    sql`s.tenant_id = ${tenantId}`,
    sql`s.doc @@ ${query}`,
    ...(s.centreId === undefined ? [] : [sql`t.help_centre_id = ${s.centreId}`]),
    ...(s.locale === undefined ? [] : [sql`t.locale = ${s.locale}`]),
    ...(s.published ? [sql`t.editorial_state = 'published'`, sql`t.visibility = 'public'`] : []),
  ];
  const past = s.after ? sql`WHERE (score, id) < (${s.after.key}::bigint, ${s.after.id}::uuid)` : sql``;
  const { rows } = await sql<ArticleHit>`
    WITH page AS (
      SELECT * FROM (
        SELECT t.id, t.article_id, t.help_centre_id, t.locale, t.title, t.slug, t.excerpt, t.editorial_state, t.visibility, t.updated_at,
               (ts_rank_cd(s.doc, ${query}, 1) * 1000000)::bigint AS score
        FROM help_article_search s
        JOIN help_article_translations t ON t.tenant_id = s.tenant_id AND t.id = s.translation_id
        WHERE ${sql.join(where, sql` AND `)}
      ) hits
      ${past}
      ORDER BY score DESC, id DESC
      LIMIT ${s.limit + 1}
    )
    SELECT p.*, p.score::text AS page_key, coalesce(h.full_host, '') AS host,
           ts_headline(search_article_config(p.locale),
                       replace(replace(replace(search_safe(left(t.body_markdown, ${SNIPPET_SOURCE_CHARS})), '&', '&amp;'), '<', '&lt;'), '>', '&gt;'),
                       ${query},
                       'MaxFragments=2, MaxWords=30, MinWords=12, StartSel=<mark>, StopSel=</mark>, FragmentDelimiter=" … "') AS snippet
    FROM page p
    JOIN help_article_translations t ON t.tenant_id = ${tenantId} AND t.id = p.id
    LEFT JOIN help_centre_hosts h ON h.tenant_id = ${tenantId} AND h.help_centre_id = p.help_centre_id AND h.is_primary
    ORDER BY p.score DESC, p.id DESC`.execute(db);
  return rows;
}
