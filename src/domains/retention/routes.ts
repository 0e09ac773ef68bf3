import { defineOperation } from '../../define-operation';
import { retentionPreview, retentionPreviewQuery } from './schemas';

export const retentionOperations = [
  defineOperation({
    id: 'get_my_tenant_retention',
    method: 'get',
    path: '/v1/tenants/me/retention',
    summary: 'What retention would erase now: the dry run, for the setting or a proposed retention_days',
    description:
      'Counts the solved and closed tickets resolved before the cutoff whose conversation is not yet erased, their messages and their files, as a retention run would take them now. `?retention_days=N` counts for a proposed setting without writing it (set it with PATCH /v1/tenants/me). Each count stops at 100,000 rows (`capped`).',
    access: { floor: 'admin', tag: 'tenants', action: 'read' },
    query: retentionPreviewQuery,
    response: { status: 200, description: 'The counts and the cutoff', schema: retentionPreview },
    handler: async ({ principal, query }, s) => ({ body: await s.retention.preview(principal, query.retention_days) }),
  }),
];
