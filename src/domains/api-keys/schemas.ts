import { z } from 'zod';
import { boolParam } from '../../lib/params';

const at = z.string().meta({ examples: ['2025-03-03T08:15:00.000Z'] });
const scopes = ['tickets:read', 'tickets:write', 'customers:read'];

export const keyIdParams = z.object({ key_id: z.uuid() });

export const createApiKeyBody = z.strictObject({
  name: z.string().trim().min(1).max(120).meta({ examples: ['Zapier ticket sync'] }),
  scopes: z.array(z.string().max(200)).max(100).default([]).meta({ examples: [scopes] }),
  agent_id: z.uuid().optional(),
  expires_in_days: z.number().int().min(1).max(3650).optional().meta({ examples: [90] }),
});

const apiKeyFields = {
  id: z.uuid().meta({ examples: ['1e779c8a-6786-4c89-b7c3-a6666f5fd6b5'] }),
  name: z.string().meta({ examples: ['Zapier ticket sync'] }),
  prefix: z.string().meta({ examples: ['sk_zr_7Gm2QxVb9K'] }),
  scopes: z.array(z.string()).meta({ examples: [scopes] }),
  expires_at: z.string().nullable().meta({ examples: ['2025-06-01T08:15:00.000Z'] }),
  created_at: at,
};

export const createdApiKey = z.object({
  ...apiKeyFields,
  secret: z
    .string()
    .meta({ description: 'Shown exactly once. Store it now; it cannot be recovered.', examples: ['sk_zr_7Gm2QxVb9Kp4Rz8LwT1nYc6HfJd3SaUe5XoMi0Bq2Nv'] }),
}).meta({ id: 'CreatedApiKey' });

export const listedApiKey = z.object({
  ...apiKeyFields,
  created_by_user_id: z.uuid(),
  last_used_at: z.string().nullable().meta({ examples: ['2025-03-14T09:26:53.412Z'] }),
  revoked_at: z.string().nullable().meta({ examples: [null] }),
}).meta({ id: 'ApiKey' });

export const listApiKeysQuery = z.strictObject({
  include_revoked: boolParam.default(false),
});

export const apiKeyList = z.object({ api_keys: z.array(listedApiKey) });

export const revokeResult = z.object({ id: z.uuid().meta({ examples: ['1e779c8a-6786-4c89-b7c3-a6666f5fd6b5'] }), revoked: z.boolean().meta({ examples: [true] }) });

export type CreateApiKeyInput = z.output<typeof createApiKeyBody>;
