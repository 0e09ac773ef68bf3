import { z } from 'zod';
import { isValidTimeZone } from '../schedules/business-time';

export const PROVIDER_KEY_NAMES = ['openai', 'anthropic', 'google', 'azure_openai', 'mistral', 'cohere'] as const;

const ONBOARDING = { completed_steps: ['connect_email', 'invite_team'], goal: 'first response under 4 hours' };
const at = z.string().meta({ examples: ['2025-02-20T09:00:00.000Z'] });

/**
 * A non-negative amount with at most two decimal places, sent as a JSON number or a decimal string. The
 * example sits inside the transform: zod drops input-side examples that sit outside one.
 */
const usd = (example: string) =>
  z
    .union([z.number(), z.string().regex(/^\d+(\.\d{1,2})?$/, 'a decimal with at most 2 places')])
    .meta({ examples: [example] })
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
    name: z.string().trim().min(1).max(120).optional().meta({ examples: ['Northwind Support'] }),
    region: z.enum(['us', 'eu', 'ap']).optional().meta({ examples: ['eu'] }),
    default_model: z.string().trim().min(1).max(200).optional().meta({ examples: ['claude-sonnet-4-5'] }),
    default_embedding_model: z.string().trim().min(1).max(200).optional().meta({ examples: ['text-embedding-3-small'] }),
    daily_usd_cap: usd('50.00').nullable().optional(),
    monthly_usd_cap: usd('1000.00').nullable().optional(),
    deployment_mode: z.enum(['shared', 'dedicated', 'self_hosted']).optional(),
    time_zone: z
      .string()
      .max(64)
      .refine(isValidTimeZone, { message: 'must be an IANA time zone name' })
      .optional()
      .meta({ examples: ['Europe/Berlin'], description: 'The IANA zone report days are cut in (UTC unless set). A change re-buckets every report in the workers; until it is done, reports stay in the previous zone and say so.' }),
    retention_days: z
      .number()
      .int()
      .min(1)
      .max(36_500)
      .nullable()
      .optional()
      .meta({ examples: [365], description: 'Solved and closed tickets resolved longer ago than this many days have their conversation erased (text, messages, files; the ticket, its timings and the reports stay). null turns retention off (the default). Count first with GET /v1/tenants/me/retention?retention_days=N.' }),
    onboarding: z
      .record(z.string().min(1).max(100), z.unknown())
      .refine((o) => JSON.stringify(o).length <= 16_384, { message: 'onboarding must serialise to at most 16 KiB' })
      .optional()
      .meta({ examples: [ONBOARDING] }),
    provider_keys: z
      .strictObject(Object.fromEntries(PROVIDER_KEY_NAMES.map((p) => [p, z.string().max(4096).optional()])) as Record<(typeof PROVIDER_KEY_NAMES)[number], z.ZodOptional<z.ZodString>>)
      .optional()
      .meta({ examples: [{ anthropic: 'sk-ant-api03-EXAMPLE-ONLY', openai: '' }] }),
  })
  .refine((b) => Object.keys(b).length > 0, { message: 'send at least one setting' });

export type PatchTenantInput = z.output<typeof patchTenantBody>;

export const tenantView = z.object({
  id: z.string().meta({ examples: ['34f5c98e-f430-457b-a812-92637d0c6fd0'] }),
  name: z.string().meta({ examples: ['Northwind Support'] }),
  region: z.enum(['us', 'eu', 'ap']).meta({ examples: ['eu'] }),
  default_model: z.string().nullable().meta({ examples: ['claude-sonnet-4-5'] }),
  default_embedding_model: z.string().nullable().meta({ examples: ['text-embedding-3-small'] }),
  daily_usd_cap: z.number().nullable().meta({ examples: [50] }),
  monthly_usd_cap: z.number().nullable().meta({ examples: [1000] }),
  deployment_mode: z.enum(['shared', 'dedicated', 'self_hosted']),
  time_zone: z.string().meta({ examples: ['Europe/Berlin'] }),
  retention_days: z.number().int().nullable().meta({ examples: [365], description: 'Days after which solved and closed tickets\' conversations are erased; null when retention is off.' }),
  onboarding: z.record(z.string(), z.unknown()).meta({ examples: [ONBOARDING] }),
  provider_keys_set: z
    .object(Object.fromEntries(PROVIDER_KEY_NAMES.map((p) => [p, z.boolean()])) as Record<(typeof PROVIDER_KEY_NAMES)[number], z.ZodBoolean>)
    .meta({ examples: [Object.fromEntries(PROVIDER_KEY_NAMES.map((p) => [p, p === 'anthropic']))] }),
  created_at: at,
  updated_at: at,
}).meta({ id: 'WorkspaceSettings' });
