import { z } from 'zod';
import { TICKET_SOURCES } from '../channels/registry';
import { intParam, metadata } from '../../http/params';
import { PRIORITIES } from '../sla/targets';
import { STATUSES } from './status';

export const LIMITS = { subject: 500, description: 65_536, body: 65_536, tags: 50, tag: 64 } as const;

const tags = z.array(z.string().trim().min(1).max(LIMITS.tag)).max(LIMITS.tags);
const priority = z.enum(PRIORITIES);
const source = z.enum(TICKET_SOURCES);
const status = z.enum(STATUSES as [string, ...string[]]);

export const ticketIdParams = z.object({ ticket_id: z.uuid() });

export const createTicketBody = z
  .strictObject({
    subject: z.string().trim().min(1).max(LIMITS.subject),
    description: z.string().max(LIMITS.description),
    priority: priority.default('normal'),
    source: source.default('api'),
    customer_id: z.uuid().optional(),
    customer_email: z.email().max(320).optional(),
    assignee_id: z.uuid().optional(),
    team_id: z.uuid().optional(),
    tags: tags.default([]),
    metadata: metadata.default({}),
  })
  .refine((b) => (b.customer_id === undefined) !== (b.customer_email === undefined), {
    message: 'send exactly one of customer_id and customer_email',
    path: ['customer_id'],
  });

export const patchTicketBody = z
  .strictObject({
    status: status.optional(),
    priority: priority.optional(),
    assignee_id: z.uuid().nullable().optional(),
    team_id: z.uuid().nullable().optional(),
    tags: tags.optional(),
    metadata: metadata.optional(),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), { message: 'send at least one field to change' });

export const messageBody = z.strictObject({ body: z.string().trim().min(1).max(LIMITS.body) });

export const mergeBody = z.strictObject({ target_ticket_id: z.uuid() });

const boolParam = z.enum(['true', 'false']).transform((v) => v === 'true');

/**
 * The filters GET /v1/tickets understands. Exported on its own so saved views validate their `filters`
 * with exactly this schema: an unknown key, or a known key with a bad value, is refused in both places.
 */
export const ticketFilters = z.strictObject({
  status: status.optional(),
  priority: priority.optional(),
  assignee_id: z.uuid().optional(),
  team_id: z.uuid().optional(),
  customer_id: z.uuid().optional(),
  tag: z.string().min(1).max(LIMITS.tag).optional(),
  source: source.optional(),
  sla_breached: boolParam.optional(),
  created_after: z.iso.datetime({ offset: true }).optional(),
  created_before: z.iso.datetime({ offset: true }).optional(),
});

export const listTicketsQuery = ticketFilters.extend({
  limit: intParam(1, 500).default(50),
  offset: intParam(0, 2147483647).default(0),
});

export type TicketFilters = z.output<typeof ticketFilters>;
export type CreateTicketInput = z.output<typeof createTicketBody>;
export type PatchTicketInput = z.output<typeof patchTicketBody>;

export const ticketEvent = z.object({
  id: z.uuid(),
  kind: z.string(),
  body: z.string(),
  meta: z.record(z.string(), z.unknown()),
  actor_type: z.string(),
  actor_user_id: z.uuid().optional(),
  actor_name: z.string().optional(),
  created_at: z.string(),
});

const ticketCore = {
  id: z.uuid(),
  subject: z.string(),
  status: z.string(),
  priority: z.string(),
  source: z.string(),
  assignee_id: z.uuid().optional(),
  customer_id: z.uuid(),
  team_id: z.uuid().optional(),
  tags: z.array(z.string()),
  first_response_due: z.string(),
  resolution_due: z.string(),
  sla_breached: z.boolean(),
  merged_into_id: z.uuid().optional(),
  created_at: z.string(),
  updated_at: z.string(),
};

export const ticketSummary = z.object(ticketCore);

export const ticketDetail = z.object({
  ...ticketCore,
  description: z.string(),
  assignee_name: z.string().optional(),
  assignee_email: z.string().optional(),
  customer_name: z.string(),
  customer_email: z.string(),
  team_name: z.string().optional(),
  metadata: z.record(z.string(), z.unknown()),
  sla_policy_id: z.uuid(),
  reopened_at: z.string().optional(),
  legal_next_states: z.array(z.string()),
  time_total_minutes: z.number().int(),
  time_billable_minutes: z.number().int(),
  todo_counts: z.object({ open: z.number().int(), done: z.number().int(), overdue: z.number().int() }),
  events: z.array(ticketEvent),
});

export const ticketList = z.object({
  total: z.number().int(),
  limit: z.number().int(),
  offset: z.number().int(),
  tickets: z.array(ticketSummary),
});
