import { z } from 'zod';
import { ex, int, teamId, userId } from '../work/schemas';
import type { ReportName } from './present';

/** A report's range covers at most this many days (both ends included). */
export const MAX_RANGE_DAYS = 400;

const DAY_MS = 86_400_000;
const date = z.iso.date();
const span = (q: { from: string; to: string }) => (Date.parse(`${q.to}T00:00:00Z`) - Date.parse(`${q.from}T00:00:00Z`)) / DAY_MS + 1;

export const reportQuery = z
  .strictObject({
    from: date.meta({ examples: ['2025-03-01'], description: 'First day, included (local).' }),
    to: date.meta({ examples: ['2025-03-31'], description: `Last day, included; ${MAX_RANGE_DAYS} days at most.` }),
    team_id: z.uuid().optional(),
    agent_id: z.uuid().optional().meta({ description: 'Assignee; in agent_activity, who acted.' }),
    channel: z.string().min(1).max(64).optional().meta({ examples: ['email'], description: "The ticket's source." }),
    priority: z.enum(['low', 'normal', 'high', 'urgent']).optional(),
  })
  .refine((q) => q.to >= q.from, { path: ['to'], message: 'must not be before from' })
  .refine((q) => span(q) <= MAX_RANGE_DAYS, { path: ['to'], message: `a report covers at most ${MAX_RANGE_DAYS} days` });

export type ReportQueryInput = z.output<typeof reportQuery>;

const day = ex(z.string(), '2025-03-14');
const minutes = (example: number) => ex(z.number().int().nullable(), example);
const mean = (example: number) => ex(z.number().nullable(), example);
const share = (example: number) => ex(z.number().nullable(), example);

const filters = z
  .object({ team_id: teamId.optional(), agent_id: userId.optional(), channel: ex(z.string(), 'email').optional(), priority: z.enum(['low', 'normal', 'high', 'urgent']).optional() })
  .meta({ id: 'ReportFilters' });
const head = (name: ReportName) => ({
  report: z.literal(name),
  from: ex(z.string(), '2025-03-01'),
  to: ex(z.string(), '2025-03-31'),
  time_zone: ex(z.string(), 'Europe/Berlin'),
  filters,
});

const times = {
  tickets: int(42),
  median_minutes: minutes(38),
  p90_minutes: minutes(212),
  mean_minutes: mean(71.4),
  median_business_minutes: minutes(31),
  p90_business_minutes: minutes(176),
  mean_business_minutes: mean(58.2),
};
const timesTotal = z.object(times).meta({ id: 'ReportTimes' });
const report = <T extends z.ZodRawShape>(name: ReportName, id: string, shape: T, total: z.ZodType, extra: z.ZodRawShape = {}) =>
  z.object({ ...head(name), days: z.array(z.object({ date: day, ...shape })), total, ...extra }).meta({ id });

const slaPart = z.object({ measured: int(120), met: int(111), share: share(0.925) }).meta({ id: 'ReportSlaTarget' });
const activity = { replies: int(57), notes: int(12), solved: int(19), time_entries: int(23), minutes_logged: int(640) };

/** Each report's answer: the days of the range (every day, zero-filled), the range's total, and for agent activity each agent's totals. */
export const REPORT_SCHEMAS: Record<ReportName, z.ZodType> = {
  first_response_time: report('first_response_time', 'ReportFirstResponseTime', times, timesTotal),
  resolution_time: report('resolution_time', 'ReportResolutionTime', times, timesTotal),
  replies_per_ticket: (() => {
    const s = { solved_tickets: int(30), replies: int(66), replies_per_ticket: mean(2.2) };
    return report('replies_per_ticket', 'ReportRepliesPerTicket', s, z.object(s));
  })(),
  reopens: (() => {
    const s = { solved_tickets: int(30), reopened_tickets: int(3), reopens: int(4), reopened_share: share(0.1) };
    return report('reopens', 'ReportReopens', s, z.object(s));
  })(),
  backlog: report('backlog', 'ReportBacklog', { backlog: int(87) }, z.object({ opening: int(80), closing: int(87) })),
  sla: (() => {
    const s = { first_reply: slaPart, resolution: slaPart };
    return report('sla', 'ReportSla', s, z.object(s));
  })(),
  volume: (() => {
    const s = { created: int(35), solved: int(31), reopened: int(2) };
    return report('volume', 'ReportVolume', s, z.object(s));
  })(),
  agent_activity: report('agent_activity', 'ReportAgentActivity', activity, z.object(activity), {
    agents: z.array(z.object({ agent_id: ex(z.string().nullable(), 'a169451c-8525-4352-b8ca-070dd449a1a5'), agent_name: ex(z.string(), 'Jonas Berg').optional(), ...activity })),
  }),
};
