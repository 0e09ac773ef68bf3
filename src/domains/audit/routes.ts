import { defineOperation } from '../../define-operation';
import { auditList, auditListQuery } from './schemas';

export const auditOperations = [
  defineOperation({
    id: 'list_audit_log',
    method: 'get',
    path: '/v1/audit-log',
    summary: 'List audit log entries, newest first',
    access: { floor: 'admin', tag: 'admin-resources', action: 'read' },
    query: auditListQuery,
    response: { status: 200, description: 'A page of audit entries', schema: auditList },
    handler: async ({ principal, query }, s) => ({ body: await s.audit.list(principal, query) }),
  }),
];
