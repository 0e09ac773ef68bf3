import { z } from 'zod';

const locale = z.string().regex(/^[a-z]{2,3}(?:-[A-Za-z0-9]{2,8})*$/, 'a locale such as en or pt-BR');

export const createCentreBody = z
  .strictObject({
    name: z.string().trim().min(1).max(120),
    default_locale: locale,
    locales: z.array(locale).min(1).max(50),
    subdomain_label: z.string().regex(/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/, 'a DNS label: lower-case letters, digits and inner hyphens, at most 63'),
    brand: z.record(z.string(), z.unknown()).optional(),
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
export const brandBody = z.record(z.string(), z.unknown());

const host = z.object({ subdomain_label: z.string(), full_host: z.string(), is_primary: z.boolean(), verified_at: z.string().nullable() });
export const helpCentre = z.object({
  id: z.string(),
  name: z.string(),
  default_locale: z.string(),
  enabled: z.boolean(),
  brand: z.record(z.string(), z.string()),
  locales: z.array(z.string()),
  hosts: z.array(host),
  article_count: z.number().int(),
  published_public_count: z.number().int(),
});
export const centreList = z.object({ help_centres: z.array(helpCentre) });
export const brandResult = z.object({ help_centre_id: z.string(), brand: z.record(z.string(), z.string()) });

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
    source_url: z.url().max(2000).optional(),
    source_created_at: isoDateTime.optional(),
    source_updated_at: isoDateTime.optional(),
  }),
]);

export const editBody = z
  .strictObject({
    title: z.string().trim().min(1).max(500).optional(),
    body_markdown: z.string().max(1_000_000).optional(),
    excerpt: z.string().max(1000).optional(),
    labels: z.array(z.string().trim().min(1).max(100)).max(100).optional(),
    promoted: z.boolean().optional(),
    position: z.number().int().min(0).max(1_000_000).optional(),
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
});

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
});
