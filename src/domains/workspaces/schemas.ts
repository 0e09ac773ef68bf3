import { z } from 'zod';

export const PROVIDER_KEY_NAMES = ['openai', 'anthropic', 'google', 'azure_openai', 'mistral', 'cohere'] as const;

/** A non-negative amount with at most two decimal places, sent as a JSON number or a decimal string. */
const usd = z
  .union([z.number(), z.string().regex(/^\d+(\.\d{1,2})?$/, 'a decimal with at most 2 places')])
  .transform((v, ctx) => {
    const text = typeof v === 'number' ? String(v) : v;
    if (!/^\d+(\.\d{1,2})?$/.test(text) || Number(text) > 999_999_999_999.99) {
      ctx.addIssue({ code: 'custom', message: 'must be a non-negative amount with at most 2 decimal places' });
      return z.NEVER;
    }
    return text;
  });

export const patchTenantBody = z
  .strictObject({
    name: z.string().trim().min(1).max(120).optional(),
    region: z.enum(['us', 'eu', 'ap']).optional(),
    default_model: z.string().trim().min(1).max(200).optional(),
    default_embedding_model: z.string().trim().min(1).max(200).optional(),
    daily_usd_cap: usd.nullable().optional(),
    monthly_usd_cap: usd.nullable().optional(),
    deployment_mode: z.enum(['shared', 'dedicated', 'self_hosted']).optional(),
    onboarding: z
      .record(z.string().min(1).max(100), z.unknown())
      .refine((o) => JSON.stringify(o).length <= 16_384, { message: 'onboarding must serialise to at most 16 KiB' })
      .optional(),
    provider_keys: z
      .strictObject(Object.fromEntries(PROVIDER_KEY_NAMES.map((p) => [p, z.string().max(4096).optional()])) as Record<(typeof PROVIDER_KEY_NAMES)[number], z.ZodOptional<z.ZodString>>)
      .optional(),
  })
  .refine((b) => Object.keys(b).length > 0, { message: 'send at least one setting' });

export type PatchTenantInput = z.output<typeof patchTenantBody>;

export const tenantView = z.object({
  id: z.string(),
  name: z.string(),
  region: z.enum(['us', 'eu', 'ap']),
  default_model: z.string().nullable(),
  default_embedding_model: z.string().nullable(),
  daily_usd_cap: z.number().nullable(),
  monthly_usd_cap: z.number().nullable(),
  deployment_mode: z.enum(['shared', 'dedicated', 'self_hosted']),
  onboarding: z.record(z.string(), z.unknown()),
  provider_keys_set: z.object(Object.fromEntries(PROVIDER_KEY_NAMES.map((p) => [p, z.boolean()])) as Record<(typeof PROVIDER_KEY_NAMES)[number], z.ZodBoolean>),
  created_at: z.string(),
  updated_at: z.string(),
});
