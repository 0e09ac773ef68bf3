import { z } from 'zod';
import { intParam } from '../../lib/params';
import { ex, int, teamId, ticketId, userId } from '../work/schemas';

const userName = ex(z.string(), 'Jonas Berg');
const teamName = ex(z.string(), 'Billing');

export const timeSummaryQuery = z.strictObject({
  since_days: intParam(1, 180).default(14),
  user_id: z.uuid().optional(),
  team_id: z.uuid().optional(),
  by_ticket_limit: intParam(1, 500).default(50),
});
export const csatQuery = z.strictObject({ since_days: intParam(1, 365).default(30) });

const split = { minutes: int(95), billable_minutes: int(60), non_billable_minutes: int(35) };
const todoCounts = { total: int(3), open: int(1), done: int(2), overdue: int(0) };

export const timeSummary = z.object({
  since_days: int(14),
  total: z.object({ entries: int(4), ...split }),
  by_agent: z.array(z.object({ user_id: userId.optional(), user_name: userName.optional(), entries: int(4), ...split })),
  by_day: z.array(z.object({ day: ex(z.string().nullable(), '2025-03-14'), ...split })),
  by_team: z.array(z.object({ team_id: teamId.optional(), team_name: teamName.optional(), ...split })),
  todos: z.object({
    total: z.object(todoCounts),
    by_assignee: z.array(z.object({ assignee_id: userId.optional(), assignee_name: userName.optional(), ...todoCounts })),
    by_ticket: z.array(z.object({ ticket_id: ticketId, ticket_subject: ex(z.string(), 'Invoice #10482 was charged twice'), ...todoCounts })),
    by_ticket_limit: int(50),
  }),
}).meta({ id: 'TimeSummary' });
const avgScore = ex(z.number().nullable(), 4.6);
export const csatAggregate = z.object({
  since_days: int(30),
  overall: z.object({ responses: int(42), avg_score: avgScore, distribution: ex(z.record(z.string(), z.number().int()), { 1: 1, 2: 0, 3: 2, 4: 8, 5: 31 }) }),
  per_agent: z.array(z.object({ assignee_id: userId.optional(), assignee_name: userName.optional(), responses: int(42), avg_score: avgScore })),
}).meta({ id: 'CsatSummary' });
