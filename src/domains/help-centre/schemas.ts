import { z } from 'zod';
import { afterParam, pageSchema } from '../../lib/paging';
import { intParam } from '../../lib/params';

const locale = z.string().regex(/^[a-z]{2,3}(?:-[A-Za-z0-9]{2,8})*$/, 'a locale such as en or pt-BR').meta({ examples: ['en'] });

const CENTRE_ID = 'fa2f55bd-e89d-4679-8ff9-d3e53cf0919f';
const HOST = 'northwind.help.example.com';
const BRAND = {
  logo_url: 'https://cdn.northwind.example/brand/logo.svg',
  brand_color: '#0b6efd',
  title: 'Northwind Help Centre',
  tagline: 'Answers about orders, billing and delivery',
};
const ex = <T extends z.ZodType>(schema: T, example: unknown) => schema.meta({ examples: [example] });

export const createCentreBody = z
  .strictObject({
    name: ex(z.string().trim().min(1).max(120), 'Northwind Help'),
    default_locale: locale,
    locales: ex(z.array(locale).min(1).max(50), ['en', 'de']),
    subdomain_label: ex(z.string().regex(/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/, 'a DNS label: lower-case letters, digits and inner hyphens, at most 63'), 'northwind'),
    brand: ex(z.record(z.string(), z.unknown()).optional(), BRAND),
  })
  .refine((b) => b.locales.includes(b.default_locale), { message: 'default_locale must be one of locales', path: ['default_locale'] });

export const centreQuery = z.strictObject({ help_centre_id: z.uuid().nullable().optional() });
/** Null-able in the query string too: "help_centre_id=" or "null" mean "not given". */
export const brandQuery = z.strictObject({
  help_centre_id: z
    .union([z.uuid(), z.literal(''), z.literal('null')])
    .optional()
    .transform((v) => (v === '' || v === 'null' ? undefined : v)),
});
export const brandBody = ex(z.record(z.string(), z.unknown()), { logoUrl: BRAND.logo_url, color: BRAND.brand_color, title: BRAND.title, tagline: BRAND.tagline });

const host = z.object({
  subdomain_label: ex(z.string(), 'northwind'),
  full_host: ex(z.string(), HOST),
  is_primary: ex(z.boolean(), true),
  verified_at: ex(z.string().nullable(), '2025-02-21T11:00:00.000Z'),
});
export const helpCentre = z.object({
  id: ex(z.string(), CENTRE_ID),
  name: ex(z.string(), 'Northwind Help'),
  default_locale: ex(z.string(), 'en'),
  enabled: ex(z.boolean(), true),
  brand: ex(z.record(z.string(), z.string()), BRAND),
  locales: ex(z.array(z.string()), ['en', 'de']),
  hosts: z.array(host),
  article_count: ex(z.number().int(), 48),
  published_public_count: ex(z.number().int(), 41),
}).meta({ id: 'HelpCentre' });
export const centreList = z.object({ help_centres: z.array(helpCentre) });
export const brandResult = z.object({ help_centre_id: ex(z.string(), CENTRE_ID), brand: ex(z.record(z.string(), z.string()), BRAND) });

const isoDateTime = z.iso.datetime({ offset: true });
export const translationParams = z.object({ translation_id: z.uuid() });
export const centreScopedQuery = brandQuery;

export const syncBody = z.union([
  z.strictObject({
    help_centre_id: z.uuid().optional(),
    source_article_id: z.string().trim().min(1).max(200),
    locale,
    missing: z.literal(true),
  }),
  z.strictObject({
    help_centre_id: z.uuid().optional(),
    source_article_id: z.string().trim().min(1).max(200),
    locale,
    title: z.string().trim().min(1).max(500),
    body_html: z.string().max(2_000_000),
    visibility: z.enum(['public', 'signed_in', 'internal']).default('public'),
    source_status: z.string().trim().min(1).max(50),
    permission_group_id: z.string().max(200).optional(),
    user_segment_ids: z.array(z.string().max(200)).max(100).optional(),
    labels: z.array(z.string().trim().min(1).max(100)).max(100).optional(),
    author_label: z.string().max(200).optional(),
    container_path: z.array(z.string().trim().min(1).max(200)).max(10).optional(),
    position: z.number().int().min(0).max(1_000_000).optional(),
    promoted: z.boolean().optional(),
    // Shown to readers as a link: only web schemes (javascript:, data:, vbscript:, file: would run or read on click).
    source_url: z.url({ protocol: /^https?$/, error: 'an http or https URL' }).max(2000).optional(),
    source_created_at: isoDateTime.optional(),
    source_updated_at: isoDateTime.optional(),
  }),
]);

const TITLE = 'Reset your password';
const LOCAL_HTML = '<p>Open <strong>Settings → Security</strong> and choose <em>Reset password</em>. The link in the email works for 30 minutes.</p>';
const INCOMING_HTML = '<p>Open <strong>Settings → Security</strong> and choose <em>Reset password</em>. The link in the email works for 1 hour.</p>';
const url = (locale: string) => `https://${HOST}/${locale}/articles/e4aad634-3311-4e79-b165-3911549b3b29-reset-your-password`;

/** One article translation as the examples of the OpenAPI document show it. */
export const EXAMPLE_ARTICLE = {
  article_id: 'e4aad634-3311-4e79-b165-3911549b3b29',
  translation_id: '1c481a44-1155-4265-9320-03a658d80a80',
  locale: 'en',
  title: TITLE,
  slug: 'reset-your-password',
  excerpt: 'Open Settings → Security and choose Reset password. The link in the email works for 30 minutes.',
  container_path: 'Accounts / Sign-in',
  url: url('en'),
  position: 1,
  promoted: false,
  breadcrumbs: [
    { name: 'Accounts', path: '/en/accounts', url: `https://${HOST}/en/accounts` },
    { name: 'Sign-in', path: '/en/accounts/sign-in', url: `https://${HOST}/en/accounts/sign-in` },
  ],
  updated_at: '2025-03-12T16:45:00.000Z',
  published_at: '2025-03-01T10:00:00.000Z',
  vote_count: 12,
  vote_sum: 10,
  visibility: 'public',
  editorial_state: 'published',
  source_visibility_raw: { visibility: 'public', permission_group_id: '', user_segment_ids: [] },
  permission_group_id: '',
  user_segment_ids: [],
  outdated: false,
  outdated_locales: [],
  missing_at_source_at: null,
  locally_edited_at: '2025-03-12T16:45:00.000Z',
  has_conflict: false,
  conflict_seen_at: null,
  body_html: LOCAL_HTML,
  body_markdown: 'Open **Settings → Security** and choose *Reset password*. The link in the email works for 30 minutes.',
  body_format: 'markdown',
  sanitizer_version: 'hc-sanitizer-2026.11.1',
  sanitize_report: { removed_tags: {}, removed_attributes: {}, total_removed: 0 },
  link_report: { rewritten: [], external: [] },
  asset_report: { assets: [] },
  source_status_raw: 'published',
  canonical_url: url('en'),
  alternates: [{ locale: 'de', url: url('de').replace('reset-your-password', 'passwort-zurucksetzen') }],
  author_label: 'Northwind Support',
  labels: ['password', 'account'],
  source_url: 'https://northwind.zendesk.com/hc/en-us/articles/360001',
  source_created_at: '2024-11-04T08:30:00.000Z',
  source_updated_at: '2025-03-01T10:00:00.000Z',
  noindex: false,
};

export const editBody = z
  .strictObject({
    title: ex(z.string().trim().min(1).max(500).optional(), TITLE),
    body_markdown: ex(z.string().max(1_000_000).optional(), EXAMPLE_ARTICLE.body_markdown),
    excerpt: ex(z.string().max(1000).optional(), EXAMPLE_ARTICLE.excerpt),
    labels: ex(z.array(z.string().trim().min(1).max(100)).max(100).optional(), EXAMPLE_ARTICLE.labels),
    promoted: ex(z.boolean().optional(), true),
    position: ex(z.number().int().min(0).max(1_000_000).optional(), 1),
  })
  .refine((b) => Object.keys(b).length > 0, { message: 'send at least one field' });

export const resolveBody = z.strictObject({ keep: z.enum(['local', 'incoming']) });

const ts = z.string().nullable();
export const articleTranslation = z.object({
  article_id: z.string(),
  translation_id: z.string(),
  locale: z.string(),
  title: z.string(),
  slug: z.string(),
  excerpt: z.string(),
  container_path: z.string(),
  url: z.string(),
  position: z.number().int(),
  promoted: z.boolean(),
  breadcrumbs: z.array(z.object({ name: z.string(), path: z.string(), url: z.string() })),
  updated_at: z.string(),
  published_at: ts,
  vote_count: z.number().int(),
  vote_sum: z.number().int(),
  visibility: z.string(),
  editorial_state: z.string(),
  source_visibility_raw: z.record(z.string(), z.unknown()),
  permission_group_id: z.string(),
  user_segment_ids: z.array(z.string()),
  outdated: z.boolean(),
  outdated_locales: z.array(z.string()),
  missing_at_source_at: ts,
  locally_edited_at: ts,
  has_conflict: z.boolean(),
  conflict_seen_at: ts,
  body_html: z.string(),
  body_markdown: z.string(),
  body_format: z.string(),
  sanitizer_version: z.string(),
  sanitize_report: z.record(z.string(), z.unknown()),
  link_report: z.record(z.string(), z.unknown()),
  asset_report: z.record(z.string(), z.unknown()),
  source_status_raw: z.string(),
  canonical_url: z.string(),
  alternates: z.array(z.object({ locale: z.string(), url: z.string() })),
  author_label: z.string(),
  labels: z.array(z.string()),
  source_url: z.string(),
  source_created_at: ts,
  source_updated_at: ts,
  noindex: z.boolean(),
}).meta({ id: 'ArticleTranslation', examples: [EXAMPLE_ARTICLE] });

export const conflictComparison = z.object({
  translation_id: z.string(),
  locale: z.string(),
  title: z.string(),
  incoming_title: z.string(),
  body_format: z.string(),
  conflict_seen_at: ts,
  locally_edited_at: ts,
  local_body_html: z.string(),
  incoming_body_html: z.string(),
  incoming_sanitize_report: z.record(z.string(), z.unknown()),
}).meta({
  id: 'ArticleConflict',
  examples: [
    {
      translation_id: EXAMPLE_ARTICLE.translation_id,
      locale: 'en',
      title: TITLE,
      incoming_title: 'Reset your password or passkey',
      body_format: 'markdown',
      conflict_seen_at: '2025-03-13T07:10:00.000Z',
      locally_edited_at: EXAMPLE_ARTICLE.locally_edited_at,
      local_body_html: LOCAL_HTML,
      incoming_body_html: INCOMING_HTML,
      incoming_sanitize_report: { removed_tags: { script: 1 }, removed_attributes: {}, total_removed: 1 },
    },
  ],
});

/** Article search (issue 36): ranked by relevance; the cursor carries the rank (an integer) and the translation id. */
export const ARTICLE_SEARCH_SORTS = { relevance: 'sequence' } as const;

const articleSearchQ = z.string().meta({ description: 'Web search syntax: words, "a phrase", -excluded, OR.', examples: ['reset password'] });

export const staffArticleSearchQuery = z.strictObject({
  q: articleSearchQ,
  help_centre_id: z.uuid().optional(),
  locale: locale.optional(),
  limit: intParam(1, 50).default(10),
  after: afterParam(ARTICLE_SEARCH_SORTS).optional(),
});

export const publicArticleSearchParams = z.object({ help_centre_id: z.uuid().meta({ examples: [CENTRE_ID] }) });
export const publicArticleSearchQuery = z.strictObject({
  q: articleSearchQ,
  locale: locale.optional(),
  limit: intParam(1, 50).default(10),
  after: afterParam(ARTICLE_SEARCH_SORTS).optional(),
});

const SNIPPET = 'Choose Reset <mark>password</mark>. The link in the email works for 30 minutes.';
/** One hit, for staff and visitors alike (a visitor's are all published and public). */
export const articleHit = z
  .object({
    translation_id: ex(z.string(), EXAMPLE_ARTICLE.translation_id),
    article_id: ex(z.string(), EXAMPLE_ARTICLE.article_id),
    help_centre_id: ex(z.string(), CENTRE_ID),
    locale: ex(z.string(), 'en'),
    title: ex(z.string(), TITLE),
    excerpt: ex(z.string(), 'Open Settings → Security and choose Reset password.'),
    url: ex(z.string(), EXAMPLE_ARTICLE.url),
    editorial_state: ex(z.string(), 'published'),
    visibility: ex(z.string(), 'public'),
    updated_at: ex(z.string(), EXAMPLE_ARTICLE.updated_at),
    snippet_html: z.string().meta({ description: 'Escaped HTML of the body around the matches (≤ 300 characters), each in <mark>.', examples: [SNIPPET] }),
  })
  .meta({ id: 'ArticleSearchHit' });
export const articleSearchPage = pageSchema('articles', articleHit).meta({ id: 'ArticleSearchPage' });

export type StaffArticleSearchQuery = z.output<typeof staffArticleSearchQuery>;
export type PublicArticleSearchQuery = z.output<typeof publicArticleSearchQuery>;
