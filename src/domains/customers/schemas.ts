import { z } from 'zod';
import { afterParam, pageSchema, type KeyKind } from '../../lib/paging';
import { intParam, metadata } from '../../lib/params';

const at = z.string().meta({ examples: ['2025-03-02T16:40:11.000Z'] });
const example = {
  display_name: 'Maya Fischer',
  email: 'maya.fischer@fischer-logistik.example',
  company: 'Fischer Logistik GmbH',
  country: 'DE',
  metadata: { plan: 'business', crm_id: 'hs-20931' },
};

export const customerIdParams = z.object({ customer_id: z.uuid() });

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
  created_at: at,
  updated_at: at,
}).meta({ id: 'Customer' });

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
