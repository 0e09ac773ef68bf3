import { z } from 'zod';
import { intParam } from '../../http/params';

const isoDate = z.iso.date();
const isoDateTime = z.iso.datetime({ offset: true });

export const ticketParams = z.object({ ticket_id: z.uuid() });
export const timeEntryParams = z.object({ entry_id: z.uuid() });
export const todoParams = z.object({ todo_id: z.uuid() });

export const createTimeEntryBody = z.strictObject({
  minutes: z.number().int().min(1).max(1440),
  billable: z.boolean().default(true),
  user_id: z.uuid().optional(),
  worked_on: isoDate.optional(),
});
export const patchTimeEntryBody = z
  .strictObject({
    minutes: z.number().int().min(1).max(1440).optional(),
    billable: z.boolean().optional(),
    user_id: z.uuid().nullable().optional(),
    worked_on: isoDate.nullable().optional(),
  })
  .refine((b) => Object.keys(b).length > 0, { message: 'send at least one field' });

export const createTodoBody = z.strictObject({
  title: z.string().trim().min(1).max(500),
  assignee_id: z.uuid().optional(),
  due_at: isoDateTime.optional(),
});
export const patchTodoBody = z
  .strictObject({
    title: z.string().trim().min(1).max(500).optional(),
    done: z.boolean().optional(),
    assignee_id: z.uuid().nullable().optional(),
    due_at: isoDateTime.nullable().optional(),
  })
  .refine((b) => Object.keys(b).length > 0, { message: 'send at least one field' });

export const createCsatBody = z.strictObject({ score: z.number().int().min(1).max(5), comment: z.string().max(10_000).optional() });

export const timeSummaryQuery = z.strictObject({
  since_days: intParam(1, 180).default(14),
  user_id: z.uuid().optional(),
  team_id: z.uuid().optional(),
  by_ticket_limit: intParam(1, 500).default(50),
});
export const csatQuery = z.strictObject({ since_days: intParam(1, 365).default(30) });

const split = { minutes: z.number().int(), billable_minutes: z.number().int(), non_billable_minutes: z.number().int() };
const todoCounts = { total: z.number().int(), open: z.number().int(), done: z.number().int(), overdue: z.number().int() };

export const timeEntry = z.object({
  id: z.string(),
  ticket_id: z.string(),
  user_id: z.string().optional(),
  team_id: z.string().optional(),
  minutes: z.number().int(),
  billable: z.boolean(),
  worked_on: z.string().nullable(),
  created_at: z.string(),
});
export const timeEntryList = z.object({ time_entries: z.array(timeEntry) });
export const todo = z.object({
  id: z.string(),
  ticket_id: z.string(),
  title: z.string(),
  assignee_id: z.string().optional(),
  due_at: z.string().nullable(),
  done: z.boolean(),
  done_at: z.string().nullable(),
  created_at: z.string(),
});
export const csatResponse = z.object({
  id: z.string(),
  ticket_id: z.string(),
  assignee_id: z.string().optional(),
  score: z.number().int(),
  comment: z.string(),
  created_at: z.string(),
});

export const timeSummary = z.object({
  since_days: z.number().int(),
  total: z.object({ entries: z.number().int(), ...split }),
  by_agent: z.array(z.object({ user_id: z.string().optional(), user_name: z.string().optional(), entries: z.number().int(), ...split })),
  by_day: z.array(z.object({ day: z.string().nullable(), ...split })),
  by_team: z.array(z.object({ team_id: z.string().optional(), team_name: z.string().optional(), ...split })),
  todos: z.object({
    total: z.object(todoCounts),
    by_assignee: z.array(z.object({ assignee_id: z.string().optional(), assignee_name: z.string().optional(), ...todoCounts })),
    by_ticket: z.array(z.object({ ticket_id: z.string(), ticket_subject: z.string(), ...todoCounts })),
    by_ticket_limit: z.number().int(),
  }),
});
export const csatAggregate = z.object({
  since_days: z.number().int(),
  overall: z.object({ responses: z.number().int(), avg_score: z.number().nullable(), distribution: z.record(z.string(), z.number().int()) }),
  per_agent: z.array(z.object({ assignee_id: z.string().optional(), assignee_name: z.string().optional(), responses: z.number().int(), avg_score: z.number().nullable() })),
});
