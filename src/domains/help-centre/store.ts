import { sql } from 'kysely';
import type { Executor } from '../../db';
import { addRoute } from '../routing/store';

export async function insertCentre(db: Executor, tenantId: string, c: { id: string; name: string; default_locale: string; locales: string[]; brand: Record<string, string> }) {
  await db.insertInto('help_centres').values({ ...c, tenant_id: tenantId, brand: JSON.stringify(c.brand) }).execute();
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
