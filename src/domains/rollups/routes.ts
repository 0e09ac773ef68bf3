import { defineOperation } from '../../define-operation';
import { csatAggregate, csatQuery, timeSummary, timeSummaryQuery } from './schemas';

export const rollupOperations = [
  defineOperation({
    id: 'time_tracking_summary',
    method: 'get',
    path: '/v1/time-tracking/summary',
    summary: 'Time and todo rollups over the last since_days days (precomputed, exact on every read)',
    description: 'Sends an ETag; If-None-Match with it answers 304 while nothing changed. by_ticket_limit (default 50) caps todos.by_ticket only.',
    access: { floor: 'viewer', tag: 'helpdesk-ingress', action: 'read' },
    query: timeSummaryQuery,
    etag: true,
    response: { status: 200, description: 'Time-tracking summary', schema: timeSummary },
    handler: async ({ principal, query }, s) => ({ body: await s.rollups.timeSummary(principal, query) }),
  }),
  defineOperation({
    id: 'csat_aggregate',
    method: 'get',
    path: '/v1/csat/aggregate',
    summary: 'Satisfaction over the last since_days days: overall mean and distribution, per agent',
    description: 'Sends an ETag; If-None-Match with it answers 304 while nothing changed.',
    access: { floor: 'viewer', tag: 'helpdesk-ingress', action: 'read' },
    query: csatQuery,
    etag: true,
    response: { status: 200, description: 'Satisfaction aggregate', schema: csatAggregate },
    handler: async ({ principal, query }, s) => ({ body: await s.rollups.csatAggregate(principal, query) }),
  }),
];
