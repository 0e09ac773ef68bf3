import { z } from 'zod';

export const keyIdParams = z.object({ key_id: z.uuid() });

export const createApiKeyBody = z.strictObject({
  name: z.string().trim().min(1).max(120),
  scopes: z.array(z.string().max(200)).max(100).default([]),
  agent_id: z.uuid().optional(),
  expires_in_days: z.number().int().min(1).max(3650).optional(),
});

const apiKeyFields = {
  id: z.uuid(),
  name: z.string(),
  prefix: z.string(),
  scopes: z.array(z.string()),
  expires_at: z.string().nullable(),
  created_at: z.string(),
};

export const createdApiKey = z.object({
  ...apiKeyFields,
  secret: z.string().meta({ description: 'Shown exactly once. Store it now; it cannot be recovered.' }),
});

export const listedApiKey = z.object({
  ...apiKeyFields,
  created_by_user_id: z.uuid(),
  last_used_at: z.string().nullable(),
  revoked_at: z.string().nullable(),
});

export const listApiKeysQuery = z.strictObject({
  include_revoked: z.enum(['true', 'false']).default('false').transform((v) => v === 'true'),
});

export const apiKeyList = z.object({ api_keys: z.array(listedApiKey) });

export const revokeResult = z.object({ id: z.uuid(), revoked: z.boolean() });

export type CreateApiKeyInput = z.output<typeof createApiKeyBody>;
