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
