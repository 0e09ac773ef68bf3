import { z } from 'zod';

export const auditEntry = z.object({
  id: z.uuid(),
  action: z.string(),
  actor_user_id: z.uuid().nullable(),
  actor_api_key_id: z.uuid().nullable(),
  target_type: z.string(),
  target_id: z.uuid().nullable(),
  details: z.record(z.string(), z.unknown()),
  created_at: z.string(),
});

export const auditListQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(500).default(100),
  offset: z.coerce.number().int().min(0).max(2147483647).default(0),
});

export const auditList = z.object({
  total: z.number().int(),
  limit: z.number().int(),
  offset: z.number().int(),
  audit_entries: z.array(auditEntry),
});
