import type { ConfigSection } from '../../config';
import type { Db, Executor } from '../../db';
import type { HelpTranslationRow } from '../../db/types';
import { createHash } from 'node:crypto';
import { notFound, refuse, requireVersion, type VersionCondition } from '../../lib/errors';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import type { ArticleLinkTarget, Rendered } from './render';
import { checkBodySize, renderInPool } from './render-pool';
import type { HelpCentreService } from './service';
import * as store from './store';

export interface SyncInput {
  help_centre_id?: string;
  source_article_id: string;
  locale: string;
  missing?: boolean;
  title?: string;
  body_html?: string;
  visibility?: 'public' | 'signed_in' | 'internal';
  source_status?: string;
  permission_group_id?: string;
  user_segment_ids?: string[];
  labels?: string[];
  author_label?: string;
  container_path?: string[];
  position?: number;
  promoted?: boolean;
  source_url?: string;
  source_created_at?: string;
  source_updated_at?: string;
}

export interface EditInput {
  title?: string;
  body_markdown?: string;
  excerpt?: string;
  labels?: string[];
  promoted?: boolean;
  position?: number;
}

export const slugify = (s: string) =>
  s
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    // Runs were collapsed to one '-' just above, so at most one sits at each end.
    .replace(/^-|-$/g, '')
    .slice(0, 80) || 'article';

/** Where a translation is read on its centre's primary host (reads and search hits give the same URL). */
export const articleUrl = (host: string, locale: string, articleId: string, slug: string) => `https://${host}/${locale}/articles/${articleId}-${slug}`;

/** Source status words to our editorial states; anything unknown stays a draft (never published by accident). */
const editorialState = (status: string) => {
  const s = status.toLowerCase();
  if (['published', 'live', 'public'].includes(s)) return 'published';
  if (['archived', 'deleted', 'unpublished'].includes(s)) return 'archived';
  return 'draft';
};

const asJson = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v ?? {}));

/**
 * Article translations: arrival from the source (sync), local edits in markdown, conflicts between the
 * two, and the read. Every body served is the sanitiser's render; the incoming HTML is kept in
 * body_source_html and pending.body_source_html and never leaves the service.
 */
export function createArticleService(deps: { db: Db; config: ConfigSection<'helpCentre'>; centres: HelpCentreService }) {
  const { db, config, centres } = deps;

  /**
   * Renders an incoming HTML body or an edited markdown body for one centre and locale: links to other
   * source articles become ours. The database is read here; the work runs in the render pool.
   */
  async function render(exec: Executor, tenantId: string, centreId: string, locale: string, source: { kind: 'html'; html: string } | { kind: 'markdown'; markdown: string }, sourceUrl: string): Promise<Rendered> {
    const host = await store.primaryHost(exec, tenantId, centreId);
    const bySource: Record<string, ArticleLinkTarget> = Object.create(null);
    for (const r of await store.translationsBySource(exec, tenantId, centreId, locale)) bySource[r.source_article_id] = { article_id: r.article_id, slug: r.slug };
    return renderInPool(config, { source, host, locale, sourceUrl, bySource });
  }

  const stored = (r: Rendered) => ({
    body_html: r.html,
    body_markdown: r.markdown,
    sanitizer_version: r.sanitizer_version,
    sanitize_report: JSON.stringify(r.sanitize_report),
    link_report: JSON.stringify(r.link_report),
    asset_report: JSON.stringify(r.asset_report),
  });

  /**
   * What a translation's read shows beyond its own row: the centre's host and default locale, and its sibling
   * translations (alternates, outdated locales). Its strong ETag covers all of it: the row's version, then a
   * digest of the host, the default locale and every sibling's id and version (each bumped by a trigger on
   * any change), so a sibling's new slug or source version is a new tag and a 304 is never stale.
   */
  async function surroundings(exec: Executor, tenantId: string, t: HelpTranslationRow) {
    const host = await store.primaryHost(exec, tenantId, t.help_centre_id);
    const { default_locale } = await store.centreLocales(exec, tenantId, t.help_centre_id);
    const sibs = await store.siblings(exec, tenantId, t.article_id);
    const digest = createHash('sha256')
      .update(JSON.stringify([host, default_locale, sibs.map((s) => [s.id, String(s.version)])]))
      .digest('base64url')
      .slice(0, 16);
    return { host, default_locale, sibs, tag: `${t.version}.${digest}` };
  }

  async function view(exec: Executor, tenantId: string, t: HelpTranslationRow) {
    const { host, default_locale, sibs, tag } = await surroundings(exec, tenantId, t);
    const urlOf = (locale: string, slug: string) => articleUrl(host, locale, t.article_id, slug);
    const base = sibs.find((s) => s.locale === default_locale);
    // A translation is outdated when its article's default-locale version changed at the source after it.
    const isOutdated = (s: { locale: string; source_updated_at: Date | null }) =>
      s.locale !== default_locale && base?.source_updated_at != null && (s.source_updated_at === null || s.source_updated_at < base.source_updated_at);
    let path = '';
    const breadcrumbs = t.container_path.map((name) => {
      path += `/${slugify(name)}`;
      return { name, path: `/${t.locale}${path}`, url: `https://${host}/${t.locale}${path}` };
    });
    return {
      article_id: t.article_id,
      translation_id: t.id,
      locale: t.locale,
      title: t.title,
      slug: t.slug,
      excerpt: t.excerpt,
      container_path: t.container_path.join(' / '),
      url: urlOf(t.locale, t.slug),
      position: t.position,
      promoted: t.promoted,
      breadcrumbs,
      updated_at: iso(t.updated_at),
      published_at: t.published_at ? iso(t.published_at) : null,
      vote_count: t.vote_count,
      vote_sum: t.vote_sum,
      visibility: t.visibility,
      editorial_state: t.editorial_state,
      source_visibility_raw: t.source_visibility_raw,
      permission_group_id: t.permission_group_id,
      user_segment_ids: t.user_segment_ids,
      outdated: isOutdated(t),
      outdated_locales: sibs.filter(isOutdated).map((s) => s.locale),
      missing_at_source_at: t.missing_at_source_at ? iso(t.missing_at_source_at) : null,
      locally_edited_at: t.locally_edited_at ? iso(t.locally_edited_at) : null,
      has_conflict: t.has_conflict,
      conflict_seen_at: t.conflict_seen_at ? iso(t.conflict_seen_at) : null,
      body_html: t.body_html,
      body_markdown: t.body_markdown,
      body_format: t.body_format,
      sanitizer_version: t.sanitizer_version,
      sanitize_report: t.sanitize_report,
      link_report: t.link_report,
      asset_report: t.asset_report,
      source_status_raw: t.source_status_raw,
      canonical_url: urlOf(t.locale, t.slug),
      alternates: sibs.filter((s) => s.id !== t.id).map((s) => ({ locale: s.locale, url: urlOf(s.locale, s.slug) })),
      author_label: t.author_label,
      labels: t.labels,
      source_url: t.source_url,
      source_created_at: t.source_created_at ? iso(t.source_created_at) : null,
      source_updated_at: t.source_updated_at ? iso(t.source_updated_at) : null,
      noindex: t.noindex || t.visibility !== 'public',
      /** Not in the body (the response schema drops it): the strong ETag of this read. */
      version: tag,
    };
  }

  const renderIncoming = (exec: Executor, tenantId: string, centreId: string, input: SyncInput) =>
    render(exec, tenantId, centreId, input.locale, { kind: 'html', html: input.body_html ?? '' }, input.source_url ?? '');

  /** The source's fields of a sync, rendered: what a translation takes on, or what waits as pending. */
  async function incoming(exec: Executor, tenantId: string, centreId: string, input: SyncInput, early?: { centreId: string; r: Rendered }) {
    const r = early && early.centreId === centreId ? early.r : await renderIncoming(exec, tenantId, centreId, input);
    const status = input.source_status ?? 'draft';
    const state = editorialState(status);
    const fields = {
      title: input.title ?? '',
      slug: slugify(input.title ?? ''),
      visibility: input.visibility ?? 'public',
      source_status_raw: status,
      source_visibility_raw: JSON.stringify({ visibility: input.visibility ?? 'public', permission_group_id: input.permission_group_id ?? '', user_segment_ids: input.user_segment_ids ?? [] }),
      editorial_state: state,
      permission_group_id: input.permission_group_id ?? '',
      user_segment_ids: input.user_segment_ids ?? [],
      labels: input.labels ?? [],
      author_label: input.author_label ?? '',
      container_path: input.container_path ?? [],
      position: input.position ?? 0,
      promoted: input.promoted ?? false,
      source_url: input.source_url ?? '',
      source_created_at: input.source_created_at ? new Date(input.source_created_at) : null,
      source_updated_at: input.source_updated_at ? new Date(input.source_updated_at) : null,
      body_source_html: input.body_html ?? '',
      ...stored(r),
    };
    return { fields: { ...fields, excerpt: r.excerpt }, report: r.sanitize_report, published: state === 'published' };
  }

  async function locked(tx: Executor, actor: Principal, id: string) {
    const t = await store.lockTranslationById(tx, actor.tenantId, id);
    if (!t) throw notFound('article translation');
    return t;
  }

  return {
    /**
     * Upserts one translation from the source. Before any local edit it takes the source's version; after
     * one, the incoming version waits as pending and the translation is in conflict. `missing` marks it
     * missing at the source and deletes nothing.
     */
    async sync(actor: Principal, input: SyncInput) {
      if (input.body_html !== undefined) checkBodySize('body_html', input.body_html);
      // Rendered before the transaction, so no connection or row lock is held while a render thread works
      // (or waits for a thread); rendered again inside only if the centre resolved differently meanwhile.
      let early: { centreId: string; r: Rendered } | undefined;
      if (!input.missing) {
        const centreId = await centres.resolveCentre(db, actor.tenantId, input.help_centre_id);
        early = { centreId, r: await renderIncoming(db, actor.tenantId, centreId, input) };
      }
      return db.transaction().execute(async (tx) => {
        const centreId = await centres.resolveCentre(tx, actor.tenantId, input.help_centre_id);
        const articleId = await store.articleFor(tx, actor.tenantId, centreId, input.source_article_id, newId());
        const current = await store.lockTranslation(tx, actor.tenantId, articleId, input.locale);
        if (input.missing) {
          if (!current) throw notFound('article translation');
          await store.updateTranslation(tx, actor.tenantId, current.id, { missing_at_source_at: current.missing_at_source_at ?? new Date() });
          return view(tx, actor.tenantId, (await store.getTranslation(tx, actor.tenantId, current.id))!);
        }
        const next = await incoming(tx, actor.tenantId, centreId, input, early);
        let id: string;
        if (!current) {
          id = newId();
          await store.insertTranslation(tx, actor.tenantId, { id, help_centre_id: centreId, article_id: articleId, locale: input.locale, ...next.fields, published_at: next.published ? new Date() : null });
        } else if (current.locally_edited_at === null) {
          id = current.id;
          await store.updateTranslation(tx, actor.tenantId, id, {
            ...next.fields,
            missing_at_source_at: null,
            published_at: next.published ? (current.published_at ?? new Date()) : current.published_at,
          });
        } else {
          // A local edit wins until someone decides: the source's version waits beside it.
          id = current.id;
          await store.updateTranslation(tx, actor.tenantId, id, {
            pending: JSON.stringify({ ...next.fields, incoming_sanitize_report: next.report }),
            has_conflict: true,
            conflict_seen_at: new Date(),
            missing_at_source_at: null,
          });
        }
        return view(tx, actor.tenantId, (await store.getTranslation(tx, actor.tenantId, id))!);
      });
    },

    async read(actor: Principal, id: string) {
      const t = await store.getTranslation(db, actor.tenantId, id);
      if (!t) throw notFound('article translation');
      return view(db, actor.tenantId, t);
    },

    /** A local edit: markdown rendered through the same sanitiser; the translation is now locally edited. */
    async edit(actor: Principal, id: string, input: EditInput, ifMatch?: VersionCondition) {
      let r: Rendered | undefined;
      if (input.body_markdown !== undefined) {
        checkBodySize('body_markdown', input.body_markdown);
        // Rendered before the transaction (see sync): the centre and locale of a translation never change.
        const before = await store.getTranslation(db, actor.tenantId, id);
        if (!before) throw notFound('article translation');
        r = await render(db, actor.tenantId, before.help_centre_id, before.locale, { kind: 'markdown', markdown: input.body_markdown }, before.source_url);
      }
      return db.transaction().execute(async (tx) => {
        const current = await locked(tx, actor, id);
        // Checked on the locked row, before anything is written: a stale read is 412 and changes nothing.
        if (ifMatch !== undefined) requireVersion(ifMatch, 'article translation', (await surroundings(tx, actor.tenantId, current)).tag);
        const patch: Record<string, unknown> = { locally_edited_at: new Date() };
        if (input.title !== undefined) Object.assign(patch, { title: input.title, slug: slugify(input.title) });
        if (input.excerpt !== undefined) patch.excerpt = input.excerpt;
        if (input.labels !== undefined) patch.labels = input.labels;
        if (input.promoted !== undefined) patch.promoted = input.promoted;
        if (input.position !== undefined) patch.position = input.position;
        if (r) Object.assign(patch, stored(r));
        await store.updateTranslation(tx, actor.tenantId, id, patch);
        return view(tx, actor.tenantId, (await store.getTranslation(tx, actor.tenantId, id))!);
      });
    },

    /** Both versions side by side; reading applies nothing and loses nothing. */
    async conflict(actor: Principal, id: string) {
      const t = await store.getTranslation(db, actor.tenantId, id);
      if (!t) throw notFound('article translation');
      if (!t.has_conflict || !t.pending) throw refuse('no_conflict', 'This translation has no conflict: no source update arrived after a local edit.');
      const p = t.pending as { title?: string; body_html?: string; incoming_sanitize_report?: unknown };
      return {
        translation_id: t.id,
        locale: t.locale,
        title: t.title,
        incoming_title: p.title ?? '',
        body_format: t.body_format,
        conflict_seen_at: t.conflict_seen_at ? iso(t.conflict_seen_at) : null,
        locally_edited_at: t.locally_edited_at ? iso(t.locally_edited_at) : null,
        local_body_html: t.body_html,
        incoming_body_html: p.body_html ?? '',
        incoming_sanitize_report: p.incoming_sanitize_report ?? {},
      };
    },

    /** Ends a conflict: keep the local edit (the incoming version is discarded) or take the incoming one. */
    async resolve(actor: Principal, id: string, keep: 'local' | 'incoming') {
      return db.transaction().execute(async (tx) => {
        const t = await locked(tx, actor, id);
        if (!t.has_conflict || !t.pending) throw refuse('no_conflict', 'This translation has no conflict to resolve.');
        const { incoming_sanitize_report: _report, ...pending } = t.pending as Record<string, unknown>;
        void _report;
        const patch: Record<string, unknown> =
          keep === 'local'
            ? { pending: null, has_conflict: false }
            : {
                ...pending,
                source_created_at: pending.source_created_at ? new Date(String(pending.source_created_at)) : null,
                source_updated_at: pending.source_updated_at ? new Date(String(pending.source_updated_at)) : null,
                // The pending copy holds the jsonb columns as the JSON text they are written as.
                source_visibility_raw: asJson(pending.source_visibility_raw),
                sanitize_report: asJson(pending.sanitize_report),
                link_report: asJson(pending.link_report),
                asset_report: asJson(pending.asset_report),
                pending: null,
                has_conflict: false,
                locally_edited_at: null,
              };
        await store.updateTranslation(tx, actor.tenantId, id, patch);
        return view(tx, actor.tenantId, (await store.getTranslation(tx, actor.tenantId, id))!);
      });
    },
  };
}

export type ArticleService = ReturnType<typeof createArticleService>;
