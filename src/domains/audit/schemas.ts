import { z } from 'zod';
import { intParam } from '../../lib/params';
import { afterParam, pageSchema } from '../../lib/paging';

export const auditEntry = z.object({
  id: z.uuid().meta({ examples: ['8f14e45f-ceea-4467-a9a3-9b7c2e5d1f06'] }),
  action: z.string().meta({ examples: ['api_key.created'] }),
  actor_user_id: z.uuid().nullable(),
  actor_api_key_id: z.uuid().nullable(),
  target_type: z.string().meta({ examples: ['api_key'] }),
  target_id: z.uuid().nullable().meta({ examples: ['1e779c8a-6786-4c89-b7c3-a6666f5fd6b5'] }),
  details: z
    .record(z.string(), z.unknown())
    .meta({ examples: [{ key_id: '1e779c8a-6786-4c89-b7c3-a6666f5fd6b5', name: 'Zapier ticket sync', prefix: 'sk_zr_7Gm2QxVb9K', scopes: ['tickets:read', 'tickets:write'] }] }),
  created_at: z.string().meta({ examples: ['2025-03-03T08:15:00.000Z'] }),
}).meta({ id: 'AuditEntry' });

/** The audit log reads in one order, newest entry first (its cursor names it). */
export const AUDIT_SORT = '-seq';

export const auditListQuery = z.strictObject({
  limit: intParam(1, 500).default(100),
  after: afterParam({ [AUDIT_SORT]: 'sequence' }).optional(),
});

export const auditList = pageSchema('audit_entries', auditEntry);
