import { z } from 'zod';
import { intParam, metadata } from '../../http/params';

export const customerIdParams = z.object({ customer_id: z.uuid() });

export const createCustomerBody = z.strictObject({
  display_name: z.string().trim().min(1).max(200),
  email: z.email().max(320),
  company: z.string().trim().max(200).optional(),
  country: z
    .string()
    .regex(/^[A-Za-z]{2}$/, 'an ISO 3166-1 alpha-2 code such as DE')
    .transform((c) => c.toUpperCase())
    .optional(),
  metadata: metadata.optional(),
});

export const listCustomersQuery = z.strictObject({
  limit: intParam(1, 500).optional(),
  offset: intParam(0, 2147483647).default(0),
});

export const customer = z.object({
  id: z.uuid(),
  display_name: z.string(),
  email: z.string(),
  company: z.string(),
  country: z.string(),
  metadata: z.record(z.string(), z.unknown()),
  created_at: z.string(),
  updated_at: z.string(),
});

export const customerList = z.object({
  total: z.number().int(),
  limit: z.number().int().nullable(),
  offset: z.number().int(),
  customers: z.array(customer),
});

export type CreateCustomerInput = z.output<typeof createCustomerBody>;
