import { z } from 'zod';
import { intParam } from '../../lib/params';
import { afterParam, pageSchema } from '../../lib/paging';

/** Work on a ticket: time entries, todos and satisfaction responses (their writes; rollups read them). */

const isoDate = z.iso.date();
const isoDateTime = z.iso.datetime({ offset: true });

const TICKET_ID = '595be628-f6f2-4262-9c10-6389c6c4a5b8';
const USER_ID = 'a169451c-8525-4352-b8ca-070dd449a1a5';
const TEAM_ID = '810007d0-bec5-486c-b5d1-28fcd8a079ba';
/** Example values for the OpenAPI document, shared with the rollups that read this work. */
export const ex = <T extends z.ZodType>(schema: T, example: unknown) => schema.meta({ examples: [example] });
export const ticketId = ex(z.string(), TICKET_ID);
export const userId = ex(z.string(), USER_ID);
export const teamId = ex(z.string(), TEAM_ID);
export const int = (example: number) => ex(z.number().int(), example);
const at = ex(z.string(), '2025-03-14T09:58:02.000Z');
const TASK_TITLE = 'Confirm the refund reached the card';
const DUE = '2025-03-17T17:00:00Z';

export const ticketParams = z.object({ ticket_id: z.uuid() });
export const timeEntryParams = z.object({ entry_id: z.uuid() });
export const todoParams = z.object({ todo_id: z.uuid() });

export const createTimeEntryBody = z.strictObject({
  minutes: z.number().int().min(1).max(1440).meta({ examples: [25] }),
  billable: z.boolean().default(true),
  user_id: z.uuid().optional(),
  worked_on: isoDate.optional().meta({ examples: ['2025-03-14'] }),
});
export const patchTimeEntryBody = z
  .strictObject({
    minutes: z.number().int().min(1).max(1440).optional().meta({ examples: [40] }),
    billable: z.boolean().optional().meta({ examples: [false] }),
    user_id: z.uuid().nullable().optional(),
    worked_on: isoDate.nullable().optional().meta({ examples: ['2025-03-13'] }),
  })
  .refine((b) => Object.keys(b).length > 0, { message: 'send at least one field' });

export const createTodoBody = z.strictObject({
  title: z.string().trim().min(1).max(500).meta({ examples: [TASK_TITLE] }),
  assignee_id: ex(z.uuid(), USER_ID).optional(),
  due_at: isoDateTime.optional().meta({ examples: [DUE] }),
});
export const patchTodoBody = z
  .strictObject({
    title: z.string().trim().min(1).max(500).optional().meta({ examples: [TASK_TITLE] }),
    done: z.boolean().optional().meta({ examples: [true] }),
    assignee_id: ex(z.uuid(), USER_ID).nullable().optional(),
    due_at: isoDateTime.nullable().optional().meta({ examples: [DUE] }),
  })
  .refine((b) => Object.keys(b).length > 0, { message: 'send at least one field' });

const CSAT_COMMENT = 'Quick refund, thank you!';
export const createCsatBody = z.strictObject({
  score: z.number().int().min(1).max(5).meta({ examples: [5] }),
  comment: z.string().max(10_000).optional().meta({ examples: [CSAT_COMMENT] }),
});

export const timeEntry = z.object({
  id: ex(z.string(), '31513983-613b-4481-b270-ae929f358bae'),
  ticket_id: ticketId,
  user_id: userId.optional(),
  team_id: teamId.optional(),
  minutes: int(25),
  billable: z.boolean(),
  worked_on: ex(z.string().nullable(), '2025-03-14'),
  created_at: at,
}).meta({ id: 'TimeEntry' });
/** A ticket's time entries read in one order, oldest first (its cursor names it). */
export const TIME_ENTRY_SORT = 'created_at';
export const listTimeEntriesQuery = z.strictObject({ limit: intParam(1, 500).default(100), after: afterParam({ [TIME_ENTRY_SORT]: 'timestamp' }).optional() });
export const timeEntryList = pageSchema('time_entries', timeEntry);
export const todo = z.object({
  id: ex(z.string(), '2f3cfd7c-8b25-47ab-a824-6c04d3249a38'),
  ticket_id: ticketId,
  title: ex(z.string(), TASK_TITLE),
  assignee_id: userId.optional(),
  due_at: ex(z.string().nullable(), '2025-03-17T17:00:00.000Z'),
  done: ex(z.boolean(), false),
  done_at: ex(z.string().nullable(), null),
  created_at: at,
}).meta({ id: 'Todo' });
export const csatResponse = z.object({
  id: ex(z.string(), '7d2a9f4c-3e1b-4c8d-a6f5-0b9e2d7c4a13'),
  ticket_id: ticketId,
  assignee_id: userId.optional(),
  score: int(5),
  comment: ex(z.string(), CSAT_COMMENT),
  created_at: at,
}).meta({ id: 'CsatResponse' });

