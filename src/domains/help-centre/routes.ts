import { defineOperation } from '../../define-operation';
import type { ApiServices } from '../../services/api';
import type { Principal } from '../identity/principal';
import {
  articleSearchPage,
  articleTranslation,
  brandBody,
  brandQuery,
  brandResult,
  centreList,
  conflictComparison,
  createCentreBody,
  editBody,
  EXAMPLE_ARTICLE,
  helpCentre,
  publicArticleSearchParams,
  publicArticleSearchQuery,
  resolveBody,
  staffArticleSearchQuery,
  syncBody,
  translationParams,
} from './schemas';

/**
 * An article's answer holds its whole body (up to megabytes) however small the edit: over
 * IDEMPOTENCY_MAX_STORED_BYTES an Idempotency-Key keeps the translation's id, and a replay reads it again.
 */
const replayArticle = {
  pointer: (answer: { translation_id: string }) => ({ translation_id: answer.translation_id }),
  read: async ({ principal, pointer }: { principal: Principal; pointer: { translation_id: string } }, s: ApiServices) => ({ body: await s.articles.read(principal, pointer.translation_id) }),
};

export const helpCentreOperations = [
  defineOperation({
    id: 'create_help_centre',
    method: 'post',
    path: '/v1/help-centre/centres',
    summary: 'Create a help centre with its primary host <subdomain_label>.<HELP_CENTRE_BASE_DOMAIN> (verified at creation)',
    access: { floor: 'admin', tag: 'help-centre-staff', action: 'write' },
    body: createCentreBody,
    response: { status: 201, description: 'The help centre', schema: helpCentre },
    errors: ['brand_key_unknown', 'brand_value_invalid', 'brand_key_duplicate', 'subdomain_taken', 'subdomain_reserved'],
    handler: async ({ principal, body }, s) => ({ status: 201, body: await s.helpCentre.create(principal, body) }),
  }),
  defineOperation({
    id: 'get_centres',
    method: 'get',
    path: '/v1/help-centre/centres',
    summary: 'The workspace\'s help centres with hosts, article_count (everything) and published_public_count (what a visitor can read)',
    access: { floor: 'viewer', tag: 'help-centre-staff', action: 'read' },
    response: { status: 200, description: 'Help centres', schema: centreList },
    handler: async ({ principal }, s) => ({ body: await s.helpCentre.list(principal) }),
  }),
  defineOperation({
    id: 'put_brand',
    method: 'put',
    path: '/v1/help-centre/brand',
    summary: 'Replace the centre\'s branding object (keys not sent are removed)',
    description:
      'Eighteen keys, five concepts (canonical name first): logo_url/logoUrl/logo, favicon_url/faviconUrl/favicon (https:// URL or site-relative path), brand_color/brandColor/brand_colour/color/colour/primary_color (#rgb or #rrggbb), title/site_title/siteTitle and tagline/tag_line/tagLine (1..120 characters, no control characters, < or >). Stored under canonical names. help_centre_id may be omitted when the workspace has one centre.',
    access: { floor: 'admin', tag: 'help-centre-staff', action: 'write' },
    query: brandQuery,
    body: brandBody,
    response: { status: 200, description: 'Brand result', schema: brandResult },
    errors: ['brand_key_unknown', 'brand_value_invalid', 'brand_key_duplicate', 'help_centre_required'],
    handler: async ({ principal, query, body }, s) => ({ body: await s.helpCentre.putBrand(principal, query.help_centre_id, body) }),
  }),
  defineOperation({
    id: 'sync_article',
    method: 'put',
    path: '/v1/help-centre/articles/sync',
    summary: 'Upsert one article translation from the source by (source_article_id, locale), or mark it missing ({missing: true})',
    description:
      'The incoming HTML is kept privately and served only through the sanitiser (body_html); body_markdown is its editable text. After a local edit, a sync does not overwrite: the incoming version waits and has_conflict becomes true. Marking missing deletes nothing.',
    access: { floor: 'admin', tag: 'help-centre-staff', action: 'write' },
    body: syncBody,
    response: { status: 200, description: 'Article translation', schema: articleTranslation },
    errors: ['help_centre_required', 'payload_too_complex'],
    // The body is a union (an article, or {missing: true}); a sample would show the smaller variant.
    example: {
      request: {
        source_article_id: '360001',
        locale: 'en',
        title: EXAMPLE_ARTICLE.title,
        body_html: '<p>Open <strong>Settings → Security</strong> and choose <em>Reset password</em>. The link in the email works for 30 minutes.</p>',
        visibility: 'public',
        source_status: 'published',
        labels: EXAMPLE_ARTICLE.labels,
        author_label: EXAMPLE_ARTICLE.author_label,
        container_path: ['Accounts', 'Sign-in'],
        position: 1,
        source_url: EXAMPLE_ARTICLE.source_url,
        source_created_at: '2024-11-04T08:30:00Z',
        source_updated_at: '2025-03-01T10:00:00Z',
      },
      response: { ...EXAMPLE_ARTICLE, locally_edited_at: null },
    },
    handler: async ({ principal, body }, s) => ({ body: await s.articles.sync(principal, body) }),
  }),
  // Before get_by_id: routes match in table order, and `search` is not a translation id.
  defineOperation({
    id: 'search_articles',
    method: 'get',
    path: '/v1/help-centre/articles/search',
    summary: 'Search the workspace\'s article translations, drafts and internal ones too',
    description: 'Title, excerpt and body, best match first; each hit has its editorial_state and visibility.',
    access: { floor: 'viewer', tag: 'help-centre-staff', action: 'read' },
    query: staffArticleSearchQuery,
    response: { status: 200, description: 'A page of hits', schema: articleSearchPage },
    errors: ['query_invalid', 'query_too_long', 'query_too_complex', 'query_too_expensive'],
    handler: async ({ principal, query }, s) => ({ body: await s.articleSearch.staff(principal, query) }),
  }),
  defineOperation({
    id: 'get_by_id',
    method: 'get',
    path: '/v1/help-centre/articles/{translation_id}',
    summary: 'One article translation with its URL, breadcrumbs, canonical URL and alternates',
    access: { floor: 'viewer', tag: 'help-centre-staff', action: 'read' },
    params: translationParams,
    response: { status: 200, description: 'Article translation', schema: articleTranslation },
    versioned: true,
    handler: async ({ principal, params }, s) => {
      const a = await s.articles.read(principal, params.translation_id);
      return { body: a, version: a.version };
    },
  }),
  defineOperation({
    id: 'edit_article',
    method: 'patch',
    path: '/v1/help-centre/articles/{translation_id}',
    summary: 'Edit locally (title, body_markdown, excerpt, labels, promoted, position); body_html is re-rendered through the sanitiser',
    access: { floor: 'editor', tag: 'help-centre-staff', action: 'write' },
    params: translationParams,
    body: editBody,
    response: { status: 200, description: 'Article translation', schema: articleTranslation },
    errors: ['payload_too_complex', 'precondition_failed'],
    versioned: true,
    replay: replayArticle,
    handler: async ({ principal, params, body, ifMatch }, s) => {
      const a = await s.articles.edit(principal, params.translation_id, body, ifMatch);
      return { body: a, version: a.version };
    },
  }),
  defineOperation({
    id: 'get_conflict',
    method: 'get',
    path: '/v1/help-centre/articles/{translation_id}/conflict',
    summary: 'The local edit and the incoming version side by side (409 no_conflict when there is none); reading applies nothing',
    access: { floor: 'viewer', tag: 'help-centre-staff', action: 'read' },
    params: translationParams,
    response: { status: 200, description: 'Article conflict comparison', schema: conflictComparison },
    errors: ['no_conflict'],
    handler: async ({ principal, params }, s) => ({ body: await s.articles.conflict(principal, params.translation_id) }),
  }),
  defineOperation({
    id: 'resolve_conflict',
    method: 'post',
    path: '/v1/help-centre/articles/{translation_id}/conflict/resolve',
    summary: 'End a conflict: keep the local edit, or take the incoming version',
    access: { floor: 'editor', tag: 'help-centre-staff', action: 'write' },
    params: translationParams,
    body: resolveBody,
    response: { status: 200, description: 'Article translation', schema: articleTranslation },
    errors: ['no_conflict'],
    replay: replayArticle,
    handler: async ({ principal, params, body }, s) => ({ body: await s.articles.resolve(principal, params.translation_id, body.keep) }),
  }),
  defineOperation({
    id: 'search_help_centre',
    method: 'get',
    path: '/v1/help-centres/{help_centre_id}/search',
    summary: 'A help centre\'s public search: published, public articles in one locale',
    description: 'No credential. An unknown or disabled centre is 404. Budgeted per client address (PUBLIC_SEARCH_RATE_POINTS).',
    access: 'public',
    params: publicArticleSearchParams,
    query: publicArticleSearchQuery,
    // Every request takes a point, refusals included (the budget is taken before the input is read).
    addressBudget: true,
    response: { status: 200, description: 'A page of hits', schema: articleSearchPage },
    errors: ['query_invalid', 'query_too_long', 'query_too_complex', 'query_too_expensive', 'throttled'],
    handler: async ({ params, query }, s) => ({ body: await s.articleSearch.visitor(params.help_centre_id, query) }),
  }),
];
