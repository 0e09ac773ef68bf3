import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import type { ReadRouting } from '../../db/reads';
import { withSearchTimeout } from '../../db/search-timeout';
import { notFound, refuse } from '../../lib/errors';
import { pageOf } from '../../lib/paging';
import { iso } from '../../lib/time';
import type { Principal } from '../identity/principal';
import { boundedText, type SearchLimits } from '../search/limits';
import { crossTenantRoute } from '../routing/store';
import { articleUrl } from './articles';
import type { PublicArticleSearchQuery, StaffArticleSearchQuery } from './schemas';
import * as store from './store';

/** The most visible characters of a hit's snippet (its <mark> tags aside). */
export const SNIPPET_MAX_CHARS = 300;

/**
 * An article search's `q`, checked in one pass before PostgreSQL reads it: over SEARCH_QUERY_MAX_CHARS characters
 * or SEARCH_QUERY_MAX_TERMS words is refused (search/limits.ts); no letter or digit at all (nothing a document could
 * hold) is 400 query_invalid. Anything else goes to websearch_to_tsquery as written, which reads every input (an
 * unclosed quote, a lone "-", "OR OR") without an error.
 */
export function articleQuery(q: string, limits: SearchLimits): string {
  if (boundedText(q, limits).words === 0) {
    throw refuse('query_invalid', 'The search query holds no letter or digit: there is nothing to search for.', [{ path: 'q', message: 'no word to search for' }]);
  }
  return q.trim();
}

/**
 * A ts_headline snippet cut to `max` visible characters, white space runs (the markdown's line breaks) as one
 * space. The text it comes from was HTML-escaped before ts_headline ran, so its only tags are <mark> and </mark>:
 * a tag is copied whole and counts nothing, an entity (`&amp;`) is copied whole and counts one, and a cut inside a
 * match closes its <mark> before the ellipsis.
 */
export function boundSnippet(html: string, max: number): string {
  let out = '';
  let visible = 0;
  let open = false;
  let space = false;
  let i = 0;
  while (i < html.length) {
    const ch = html[i]!;
    if (ch === '<') {
      const end = html.indexOf('>', i);
      const tag = end === -1 ? '' : html.slice(i, end + 1);
      // A space before a match goes before its <mark>, not inside it.
      if (tag === '<mark>' && space && visible < max) {
        out += ' ';
        visible += 1;
        space = false;
      }
      out += tag;
      open = tag === '<mark>';
      i = end === -1 ? html.length : end + 1;
      continue;
    }
    if (ch.trim() === '') {
      space = out !== '';
      i += 1;
      continue;
    }
    if (visible + (space ? 1 : 0) >= max) {
      out += `${open ? '</mark>' : ''}…`;
      return out;
    }
    if (space) {
      out += ' ';
      visible += 1;
      space = false;
    }
    const end = ch === '&' ? html.indexOf(';', i) : -1;
    const unit = end !== -1 && end - i <= 8 ? html.slice(i, end + 1) : ch;
    out += unit;
    visible += 1;
    i += unit.length;
  }
  return out;
}

/**
 * Help-centre article search (issue 36): for staff, every translation of the workspace (drafts, archived and
 * internal ones, each with its state); for anyone, per centre, only what a visitor can read (published, public
 * visibility, in one locale, of an enabled centre). Both read through the read routing, in a transaction bounded
 * by SEARCH_TIMEOUT_MS.
 */
export function createArticleSearchService(deps: { db: Db; reads: Pick<ReadRouting, 'forReading'>; search: ConfigSection<'search'> }) {
  const { db, reads, search } = deps;
  const limits = { maxChars: search.SEARCH_QUERY_MAX_CHARS, maxTerms: search.SEARCH_QUERY_MAX_TERMS };
  const bound = { timeoutMs: search.SEARCH_TIMEOUT_MS, advice: 'use a longer or more distinctive fragment.' };
  const parse = (q: string) => articleQuery(q, limits);
  const afterOf = (after?: { key: string; id: string }) => (after ? { after: { key: after.key, id: after.id } } : {});
  const hit = (h: store.ArticleHit) => ({
    translation_id: h.id,
    article_id: h.article_id,
    help_centre_id: h.help_centre_id,
    locale: h.locale,
    title: h.title,
    excerpt: h.excerpt,
    url: articleUrl(h.host, h.locale, h.article_id, h.slug),
    editorial_state: h.editorial_state,
    visibility: h.visibility,
    updated_at: iso(h.updated_at),
    snippet_html: boundSnippet(h.snippet, SNIPPET_MAX_CHARS),
  });

  return {
    async staff(actor: Principal, query: StaffArticleSearchQuery) {
      const q = parse(query.q);
      const centreId = query.help_centre_id?.toLowerCase();
      const from = await reads.forReading(actor);
      const rows = await withSearchTimeout(from, bound, async (tx) => {
        if (centreId !== undefined && !(await store.centreExists(tx, actor.tenantId, centreId))) throw notFound('help centre');
        return store.searchArticles(tx, actor.tenantId, {
          q,
          ...(centreId === undefined ? {} : { centreId }),
          ...(query.locale === undefined ? {} : { locale: query.locale }),
          published: false,
          limit: query.limit,
          ...afterOf(query.after),
        });
      });
      return pageOf('articles', rows, query.limit, 'relevance', hit);
    },

    /**
     * Anyone's search of one centre: 404 for a centre that is unknown or disabled (the same answer, so a disabled
     * centre cannot be told from none). The centre's workspace comes from its route. A visitor writes nothing, so
     * the read routing sends it to the replica whenever the replica is within DATABASE_READ_MAX_LAG_MS.
     */
    async visitor(centreIdSent: string, query: PublicArticleSearchQuery) {
      const q = parse(query.q);
      const centreId = centreIdSent.toLowerCase();
      const tenantId = await crossTenantRoute(db, 'help_centre', centreId);
      if (!tenantId) throw notFound('help centre');
      const from = await reads.forReading({ tenantId, apiKeyId: null, userId: '' });
      const rows = await withSearchTimeout(from, bound, async (tx) => {
        const centre = await store.publicCentre(tx, tenantId, centreId);
        if (!centre?.enabled) throw notFound('help centre');
        return store.searchArticles(tx, tenantId, { q, centreId, locale: query.locale ?? centre.default_locale, published: true, limit: query.limit, ...afterOf(query.after) });
      });
      return pageOf('articles', rows, query.limit, 'relevance', hit);
    },
  };
}

export type ArticleSearchService = ReturnType<typeof createArticleSearchService>;
