import { z } from 'zod';
import { afterParam, pageSchema, type KeyKind } from '../../lib/paging';
import { intParam, metadata } from '../../lib/params';
import { isValidTimeZone } from '../schedules/business-time';

const at = z.string().meta({ examples: ['2025-03-02T16:40:11.000Z'] });
const example = {
  display_name: 'Maya Fischer',
  email: 'maya.fischer@fischer-logistik.example',
  company: 'Fischer Logistik GmbH',
  country: 'DE',
  metadata: { plan: 'business', crm_id: 'hs-20931' },
};

export const customerIdParams = z.object({ customer_id: z.uuid() });

/** The kinds of handle a customer can hold: an address, or a channel's own id for the person. */
export const HANDLE_KINDS = ['email', 'phone', 'whatsapp_id', 'telegram_user', 'visitor_id', 'page_scoped_id', 'line_user', 'viber_user'] as const;
/** The most handles one customer holds (a person on every channel, several addresses and numbers). */
export const MAX_HANDLES = 50;

/**
 * A phone number in E.164 (`+` and 8 to 15 digits), as SMS and WhatsApp providers name the person. Checked by
 * a loop, not a pattern over caller text.
 */
const isE164 = (v: string) => v.length >= 9 && v.length <= 16 && v[0] === '+' && v[1] !== '0' && [...v.slice(1)].every((c) => c >= '0' && c <= '9');
const phone = z.string().max(16).refine(isE164, { message: 'an E.164 number such as +14155550100' });

/** A BCP 47 language tag such as de or pt-BR: 2 or 3 letters, then subtags of 2 to 8 letters or digits. */
const isLocale = (v: string) => {
  const parts = v.split('-');
  const alnum = (p: string) => [...p].every((c) => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'));
  return parts[0]!.length >= 2 && parts[0]!.length <= 3 && [...parts[0]!].every((c) => (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) && parts.slice(1).every((p) => p.length >= 2 && p.length <= 8 && alnum(p));
};

export const handle = z
  .strictObject({
    kind: z.enum(HANDLE_KINDS).meta({ examples: ['whatsapp_id'] }),
    handle: z.string().trim().min(1).max(320).meta({ examples: ['4915112345678'] }),
  })
  .meta({ id: 'CustomerHandle' });

export const patchCustomerBody = z
  .strictObject({
    display_name: z.string().trim().min(1).max(200).optional().meta({ examples: [example.display_name] }),
    email: z.email().max(320).nullable().optional().meta({ description: 'null removes the address.', examples: [example.email] }),
    phone: phone.nullable().optional().meta({ description: 'E.164; also held as a phone handle, so SMS from it threads to this customer. null removes it.', examples: ['+4915112345678'] }),
    handles: z
      .array(handle)
      .max(MAX_HANDLES)
      .optional()
      .meta({ description: `Replaces the customer's handles (at most ${MAX_HANDLES}); a handle another customer holds is refused with 409 handle_taken (merge them instead).` }),
    notes: z.string().max(10_000).optional().meta({ examples: ['Prefers WhatsApp; key account since 2021.'] }),
    locale: z.string().max(35).refine(isLocale, { message: 'a BCP 47 language tag such as de or pt-BR' }).nullable().optional().meta({ examples: ['de-DE'] }),
    time_zone: z.string().max(64).refine(isValidTimeZone, { message: 'must be an IANA time zone name' }).nullable().optional().meta({ examples: ['Europe/Berlin'] }),
    company: z.string().trim().max(200).optional().meta({ examples: [example.company] }),
    country: z
      .string()
      .regex(/^[A-Za-z]{2}$/, 'an ISO 3166-1 alpha-2 code such as DE')
      .meta({ examples: ['DE'] })
      .transform((c) => c.toUpperCase())
      .nullable()
      .optional(),
    metadata: metadata.optional().meta({ description: 'A JSON merge patch: keys sent are set, keys sent as null are removed.', examples: [{ plan: 'enterprise', crm_id: null }] }),
  })
  .refine((b) => Object.keys(b).length > 0, { message: 'send at least one field' });

export const mergeCustomerBody = z.strictObject({
  into: z.uuid().meta({ description: 'The surviving customer.', examples: ['7d3f9a21-5b8c-4e6d-a1f0-2c9b8e7d6a54'] }),
});

export const createCustomerBody = z.strictObject({
  display_name: z.string().trim().min(1).max(200).meta({ examples: [example.display_name] }),
  email: z.email().max(320).meta({ examples: [example.email] }),
  company: z.string().trim().max(200).optional().meta({ examples: [example.company] }),
  country: z
    .string()
    .regex(/^[A-Za-z]{2}$/, 'an ISO 3166-1 alpha-2 code such as DE')
    .meta({ examples: [example.country] })
    .transform((c) => c.toUpperCase())
    .optional(),
  metadata: metadata.optional().meta({ examples: [example.metadata] }),
});

export const listCustomersQuery = z.strictObject({
  limit: intParam(1, 500).optional().meta({ examples: [100] }),
  offset: intParam(0, 2147483647).default(0),
});

export const customer = z.object({
  id: z.uuid().meta({ examples: ['160c0c4b-9966-4dc1-a916-8407eb10d74e'] }),
  display_name: z.string().meta({ examples: [example.display_name] }),
  email: z.string().meta({ examples: [example.email] }),
  company: z.string().meta({ examples: [example.company] }),
  country: z.string().meta({ examples: [example.country] }),
  metadata: z.record(z.string(), z.unknown()).meta({ examples: [example.metadata] }),
  phone: z.string().meta({ examples: ['+4915112345678'] }),
  notes: z.string().meta({ examples: ['Prefers WhatsApp; key account since 2021.'] }),
  locale: z.string().meta({ examples: ['de-DE'] }),
  time_zone: z.string().meta({ examples: ['Europe/Berlin'] }),
  handles: z.array(z.object({ kind: z.string(), handle: z.string() })).meta({ examples: [[{ kind: 'email', handle: example.email }, { kind: 'whatsapp_id', handle: '4915112345678' }]] }),
  version: z.number().int().meta({ examples: [4] }),
  erased_at: at.nullable().meta({ description: 'When the person was erased; every field but the id and timestamps is then empty.' }),
  created_at: at,
  updated_at: at,
}).meta({ id: 'Customer' });

/** What a merged-away customer's id answers: where the person went (a read of that id is 301-like). */
export const mergedCustomer = z
  .object({
    id: z.uuid(),
    merged_into_id: z.uuid().meta({ examples: ['7d3f9a21-5b8c-4e6d-a1f0-2c9b8e7d6a54'] }),
    merged_at: at,
  })
  .meta({ id: 'MergedCustomer' });

export const customerOrMerged = z.union([customer, mergedCustomer]);

export const duplicateList = z.object({
  customers: z.array(
    z.object({
      customer,
      reasons: z.array(z.enum(['email', 'phone', 'name_domain'])).meta({ examples: [['email', 'name_domain']] }),
    }),
  ),
});

export const customerList = z.object({
  total: z.number().int().meta({ examples: [1284] }),
  limit: z.number().int().nullable().meta({ examples: [100] }),
  offset: z.number().int(),
  customers: z.array(customer),
});

/**
 * How a customer search hit matched, best first: the email or a handle is the fragment itself; a word of the name,
 * email or company (or a handle) starts with it; it is somewhere inside; or, for a fragment too broad to rank
 * (customers' service, RANKED_HITS_MAX), any other match. Each is a sort of the cursor (the rank of the page's last
 * row), the rows within one newest first.
 */
export const CUSTOMER_MATCHES = { exact: 'timestamp', prefix: 'timestamp', contains: 'timestamp', broad: 'timestamp' } as const satisfies Record<string, KeyKind>;
export type CustomerMatch = keyof typeof CUSTOMER_MATCHES;
export const MATCH_ORDER = Object.keys(CUSTOMER_MATCHES) as CustomerMatch[];

export const searchCustomersQuery = z.strictObject({
  q: z.string().meta({ description: '3 or more letters or digits; accents and case ignored, phone numbers by their digits.', examples: ['415-555-0100'] }),
  limit: intParam(1, 100).default(20),
  after: afterParam(CUSTOMER_MATCHES).optional(),
});

export const customerSearchPage = pageSchema('customers', customer);

export type SearchCustomersQuery = z.output<typeof searchCustomersQuery>;
export type CreateCustomerInput = z.output<typeof createCustomerBody>;
export type PatchCustomerInput = z.output<typeof patchCustomerBody>;
export type HandleInput = z.output<typeof handle>;
