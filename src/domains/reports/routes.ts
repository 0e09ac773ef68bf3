import { defineOperation } from '../../define-operation';
import { reportCsv, wantsCsv } from './csv';
import { REPORT_NAMES, type ReportName } from './present';
import { REPORT_SCHEMAS, reportQuery } from './schemas';

const SUMMARIES: Record<ReportName, string> = {
  first_response_time: 'First response time per day: median, p90 and mean, in calendar and business minutes',
  resolution_time: 'Full resolution time per day (created to solved): median, p90 and mean, calendar and business',
  replies_per_ticket: 'Replies per ticket solved, per day of its resolution',
  reopens: 'Reopens of the tickets solved each day: how many were ever reopened, and how often',
  backlog: 'The backlog (open, pending, on hold) at the end of each day',
  sla: 'Share of tickets within SLA per day, for first reply and for resolution',
  volume: 'Tickets created, solved and reopened per day',
  agent_activity: 'Agent activity per day and per agent: replies, internal notes, tickets solved, time logged',
};

const DESCRIPTION = 'Per local day of the workspace zone, exact on every read; filters follow the ticket as it is now. `Accept: text/csv` answers the days as CSV. See the API guide, Reports.';

/** One row per report: each answers its own documented schema, and CSV on request. */
export const reportOperations = REPORT_NAMES.map((name) =>
  defineOperation({
    id: `report_${name}`,
    method: 'get',
    path: `/v1/reports/${name}`,
    summary: SUMMARIES[name],
    description: DESCRIPTION,
    access: { floor: 'viewer', tag: 'reports', action: 'read' },
    query: reportQuery,
    readsHeaders: ['accept'],
    response: { status: 200, description: `The ${name.replace(/_/g, ' ')} report`, schema: REPORT_SCHEMAS[name], text: ['text/csv'] },
    handler: async ({ principal, query, headers }, s) => {
      const body = await s.reports.report(principal, name, query);
      if (wantsCsv(headers?.accept)) return { text: { contentType: 'text/csv; charset=utf-8', body: reportCsv(body.days) } };
      return { body };
    },
  }),
);
