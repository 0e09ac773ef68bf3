import { z } from 'zod';
import { TICKET_SOURCES } from '../channels/registry';
import { boolParam, intParam, metadata } from '../../lib/params';
import { afterParam, listParam, pageSchema } from '../../lib/paging';
import { PRIORITIES } from '../sla/targets';
import type { TicketEventsTable } from '../../db/types';
import { STATUSES } from './status';
import { attachmentSummary, attachmentTokens } from '../files/schemas';

/** At most this many ids in one multi-value filter (`assignee_id=a,b,c`). */
const MAX_FILTER_IDS = 50;

export const LIMITS = { subject: 500, description: 65_536, body: 65_536, tags: 50, tag: 64 } as const;

const tags = z.array(z.string().trim().min(1).max(LIMITS.tag)).max(LIMITS.tags).meta({ examples: [['billing', 'refund']] });
const priority = z.enum(PRIORITIES);
const source = z.enum(TICKET_SOURCES);
const status = z.enum(STATUSES as [string, ...string[]]);

type ActorType = TicketEventsTable['actor_type'];
/** Who can act on a ticket: a record over the table's type, so a kind added to one and not the other fails tsc. */
const EVERY_ACTOR_TYPE: Record<ActorType, true> = { customer: true, user: true, system: true, agent: true };
const ACTOR_TYPES = Object.keys(EVERY_ACTOR_TYPE) as [ActorType, ...ActorType[]];

const SUBJECT = 'Invoice #10482 was charged twice';
const DESCRIPTION = 'Hi, my card was charged twice for invoice #10482 on 3 March. Could you refund one of the two payments? Thanks, Maya';
const REPLY = 'Hi Maya, sorry about the double charge. I have refunded the second payment; it will show on your card within 5 business days.';
const METADATA = { order_id: 'SO-10482', plan: 'business' };
/** Jonas Berg, the agent of the examples (his user id is the one the sampler gives every user_id). */
const assigneeId = z.uuid().meta({ examples: ['a169451c-8525-4352-b8ca-070dd449a1a5'] });

export const ticketIdParams = z.object({ ticket_id: z.uuid() });

export const createTicketBody = z
  .strictObject({
    subject: z.string().trim().min(1).max(LIMITS.subject).meta({ examples: [SUBJECT] }),
    description: z.string().max(LIMITS.description).meta({ examples: [DESCRIPTION] }),
    priority: priority.default('normal').meta({ examples: ['high'] }),
    source: source.default('api').meta({ examples: ['api'] }),
    customer_id: z.uuid().optional(),
    customer_email: z.email().max(320).optional().meta({ examples: ['maya.fischer@fischer-logistik.example'] }),
    assignee_id: assigneeId.optional(),
    team_id: z.uuid().optional(),
    tags: tags.default([]),
    metadata: metadata.default({}).meta({ examples: [METADATA] }),
  })
  .refine((b) => (b.customer_id === undefined) !== (b.customer_email === undefined), {
    message: 'send exactly one of customer_id and customer_email',
    path: ['customer_id'],
  });

export const patchTicketBody = z
  .strictObject({
    status: status.optional().meta({ examples: ['pending'] }),
    priority: priority.optional().meta({ examples: ['urgent'] }),
    assignee_id: assigneeId.nullable().optional(),
    team_id: z.uuid().nullable().optional(),
    tags: tags.optional(),
    metadata: metadata.optional().meta({ examples: [{ refund_id: 're_3Ox2Qm', plan: null }] }),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), { message: 'send at least one field to change' });

export const messageBody = z.strictObject({
  body: z.string().trim().min(1).max(LIMITS.body).meta({ examples: [REPLY] }),
  // Files uploaded with POST /v1/uploads, bound to this reply or note in its transaction (issue 34).
  attachments: attachmentTokens.optional(),
});

/**
 * A reply may name an approved WhatsApp template (the only thing WhatsApp delivers past 24 hours after the
 * customer's last message). `body` is what the timeline shows; the customer gets the template.
 */
export const replyBody = messageBody.extend({
  template: z
    .strictObject({
      name: z.string().trim().min(1).max(512),
      language: z.string().trim().min(2).max(15).meta({ examples: ['en_US'] }),
      // Meta's template components (header/body/button parameters), passed on as given; bounded in size.
      components: z
        .array(z.record(z.string(), z.unknown()))
        .max(20)
        .refine((c) => JSON.stringify(c).length <= 16_384, { message: 'components must serialise to at most 16 KiB' })
        .optional(),
    })
    .optional()
    .meta({ description: 'WhatsApp tickets only: send this approved template instead of free-form text.', examples: [{ name: 'order_update', language: 'en_US' }] }),
});

export const mergeBody = z.strictObject({ target_ticket_id: z.uuid() });


/**
 * The filters GET /v1/tickets understands. Exported on its own so saved views validate their `filters`
 * with exactly this schema: an unknown key, or a known key with a bad value, is refused in both places.
 */
export const ticketFilters = z.strictObject({
  // Multi-value filters take a comma-separated list (`status=open,pending`): a row matches any of the values.
  status: listParam(status, STATUSES.length).optional().meta({ examples: ['open,pending'] }),
  priority: listParam(priority, PRIORITIES.length).optional().meta({ examples: ['high,urgent'] }),
  // `none` (issue 37): the unassigned tickets, or those of no team ("unassigned for 30 minutes" is a time rule's condition).
  assignee_id: listParam(z.union([z.literal('none'), assigneeId]), MAX_FILTER_IDS)
    .optional()
    .meta({ description: 'Assignee ids, or `none` for unassigned tickets; a ticket matches any of them.', examples: ['none,a169451c-8525-4352-b8ca-070dd449a1a5'] }),
  team_id: listParam(z.union([z.literal('none'), z.uuid()]), MAX_FILTER_IDS)
    .optional()
    .meta({ description: 'Team ids, or `none` for tickets of no team; a ticket matches any of them.', examples: ['810007d0-bec5-486c-b5d1-28fcd8a079ba'] }),
  customer_id: listParam(z.uuid(), MAX_FILTER_IDS).optional().meta({ examples: ['160c0c4b-9966-4dc1-a916-8407eb10d74e'] }),
  tag: z.string().min(1).max(LIMITS.tag).optional().meta({ examples: ['billing'] }),
  source: listParam(source, TICKET_SOURCES.length).optional().meta({ examples: ['email,chat'] }),
  sla_breached: boolParam.optional(),
  created_after: z.iso.datetime({ offset: true }).optional().meta({ examples: ['2025-03-01T00:00:00Z'] }),
  created_before: z.iso.datetime({ offset: true }).optional().meta({ examples: ['2025-04-01T00:00:00Z'] }),
  // What an integration syncing changes asks for: everything touched since its last run (with sort=updated_at).
  updated_after: z.iso.datetime({ offset: true }).optional().meta({ examples: ['2025-03-14T09:00:00Z'] }),
  updated_before: z.iso.datetime({ offset: true }).optional().meta({ examples: ['2025-03-15T00:00:00Z'] }),
});

/**
 * Sort orders of GET /v1/tickets: a leading `-` is newest first; each time order has its own (tenant, key, id)
 * index. `relevance` (issue 36) ranks the tickets a search (`q`) matched, best first, ties newest first.
 */
export const TICKET_SORTS = { created_at: 'timestamp', '-created_at': 'timestamp', updated_at: 'timestamp', '-updated_at': 'timestamp', relevance: 'rank' } as const;
export type TicketSort = keyof typeof TICKET_SORTS;
/** The sorts of a plain list (no `q`): the time orders. */
export type TicketTimeSort = Exclude<TicketSort, 'relevance'>;

/** The syntax of `q`, as the OpenAPI document states it (docs/api-guide.md, "Search", has it in full). */
export const SEARCH_SYNTAX =
  "Full-text search (case, accents and word forms ignored) over the subject, description, messages, internal notes, tags, the customer's name, email and handles, and provider message ids. " +
  'Words must all match, the last one as a prefix; `"a phrase"` matches in order; `-word` and `-"a phrase"` exclude. ' +
  'Operators: `from:` (3+ characters of the customer\'s name, email or handle; a phone fragment matches by digits), `tag:`, `status:`, `channel:`, `assignee:me|none|<user id>`, `before:`/`after:` (created_at; `YYYY-MM-DD` or an ISO datetime); quote a value with spaces. ' +
  'Merged tickets are never returned; a blank q is no search.';

/** The search text (issue 36); blank is no search. Parsed by the service, which knows the deployment's limits. */
export const searchParam = z.string().meta({ description: SEARCH_SYNTAX, examples: ['refund from:maya status:open'] });

/** Whether a query searches: `q` holds more than spaces. */
export const searches = (q: { q?: string | undefined }) => q.q !== undefined && q.q.trim() !== '';

/** The order a list comes in when `sort` is not given: relevance when it searches, else newest first. */
export const sortOf = (q: { q?: string | undefined; sort?: TicketSort | undefined }): TicketSort => q.sort ?? (searches(q) ? 'relevance' : '-created_at');

export const listTicketsQuery = ticketFilters.extend({
  q: searchParam.optional(),
  limit: intParam(1, 500).default(50),
  after: afterParam(TICKET_SORTS).optional(),
  sort: z
    .enum(Object.keys(TICKET_SORTS) as [TicketSort, ...TicketSort[]])
    .optional()
    .meta({ description: 'Default `-created_at`; with `q`, `relevance` (best first, ties newest first), which needs `q`.', examples: ['-created_at'] }),
})
  // A cursor continues the order it was given out in: under another sort its key means something else.
  .refine((q) => q.after === undefined || q.after.sort === sortOf(q), { message: 'this cursor belongs to another sort order', path: ['after'] })
  .refine((q) => q.sort !== 'relevance' || searches(q), { message: 'sort=relevance ranks by the search: send q with it', path: ['sort'] });

export type ListTicketsQuery = z.output<typeof listTicketsQuery>;
export type TicketFilters = z.output<typeof ticketFilters>;
export type CreateTicketInput = z.output<typeof createTicketBody>;
export type PatchTicketInput = z.output<typeof patchTicketBody>;

export const ticketEvent = z.object({
  id: z.uuid(),
  kind: z.string(),
  body: z.string(),
  meta: z.record(z.string(), z.unknown()),
  actor_type: z.enum(ACTOR_TYPES),
  actor_user_id: z.uuid().optional(),
  actor_name: z.string().optional(),
  created_at: z.string(),
  /** The files that came with this event (a reply's or note's uploads, an inbound message's files); absent when none. */
  attachments: z.array(attachmentSummary).optional(),
}).meta({ id: 'TicketEvent' });

const ticketCore = {
  id: z.uuid(),
  subject: z.string(),
  status,
  priority,
  // Not an enum in answers: the column has no CHECK and internal writers record sources of their own (the
  // demo's phone tickets), so a closed list here would turn such a ticket into a 500.
  source: z.string(),
  assignee_id: z.uuid().optional(),
  customer_id: z.uuid(),
  team_id: z.uuid().optional(),
  tags: z.array(z.string()),
  first_response_due: z.string(),
  resolution_due: z.string(),
  sla_breached: z.boolean(),
  // Issue 37: the next-reply target while one runs (a customer wrote after an agent's reply), and a business-time
  // resolution clock stopped in pending / on_hold with the business minutes it had left (negative: overdue).
  next_reply_due: z.string().optional().meta({ description: 'While a customer message after a reply awaits an answer.' }),
  resolution_paused_at: z.string().optional().meta({ description: 'Resolution clock paused (pending, on hold).' }),
  resolution_remaining_minutes: z.number().int().optional().meta({ description: 'While paused: business minutes left (negative: overdue).' }),
  merged_into_id: z.uuid().optional(),
  created_at: z.string(),
  updated_at: z.string(),
};

const at = (minute: number) => new Date(Date.UTC(2025, 2, 14, 9, minute, 53, 412)).toISOString();
const agentActor = { actor_type: 'user', actor_user_id: 'a169451c-8525-4352-b8ca-070dd449a1a5', actor_name: 'Jonas Berg' };

/** One ticket as the examples of the OpenAPI document show it (a reopened or merged ticket would add fields). */
export const EXAMPLE_TICKET = {
  id: '595be628-f6f2-4262-9c10-6389c6c4a5b8',
  subject: SUBJECT,
  status: 'open',
  priority: 'high',
  source: 'email',
  assignee_id: 'a169451c-8525-4352-b8ca-070dd449a1a5',
  customer_id: '160c0c4b-9966-4dc1-a916-8407eb10d74e',
  team_id: '810007d0-bec5-486c-b5d1-28fcd8a079ba',
  tags: ['billing', 'refund'],
  first_response_due: at(26 + 240),
  resolution_due: at(26 + 1440),
  sla_breached: false,
  created_at: at(26),
  updated_at: at(41),
  description: DESCRIPTION,
  assignee_name: 'Jonas Berg',
  assignee_email: 'jonas.berg@northwind.example',
  customer_name: 'Maya Fischer',
  customer_email: 'maya.fischer@fischer-logistik.example',
  team_name: 'Billing',
  metadata: METADATA,
  sla_policy_id: 'cbaea781-ac96-464c-a6ac-4c52797e2cf1',
  status_entered_at: at(26),
  last_customer_message_at: at(26),
  last_agent_reply_at: at(41),
  legal_next_states: ['closed', 'on_hold', 'pending', 'solved', 'spam'],
  time_total_minutes: 25,
  time_billable_minutes: 15,
  todo_counts: { open: 1, done: 0, overdue: 0 },
  events: [
    { id: 'c1a7e3f0-5b2d-4e8a-9f61-2d4b7a9c0e13', kind: 'ticket_created', body: DESCRIPTION, meta: {}, actor_type: 'customer', actor_name: 'Maya Fischer', created_at: at(26) },
    {
      id: '4d9b2e61-7c3a-4f85-b0d2-8e1f6a3c5b97',
      kind: 'assigned',
      body: '',
      meta: { team_id: '810007d0-bec5-486c-b5d1-28fcd8a079ba', assignee_id: 'a169451c-8525-4352-b8ca-070dd449a1a5', from_assignee_id: null },
      ...agentActor,
      created_at: at(30),
    },
    { id: '9e2f4a18-3b6c-4d07-a5e9-1c8b7d2f0a64', kind: 'reply', body: REPLY, meta: { first_response: true, delivery: 'queued', channel: 'email' }, ...agentActor, created_at: at(41) },
  ],
};
const exampleSummary = Object.fromEntries(Object.entries(EXAMPLE_TICKET).filter(([k]) => k in ticketCore));

export const ticketSummary = z.object(ticketCore).meta({ id: 'TicketSummary', examples: [exampleSummary] });

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
  // What time-based rules count from (issue 37), so a rule's firing can be read against the ticket.
  status_entered_at: z.string().meta({ description: 'When the ticket entered its current status.' }),
  last_customer_message_at: z.string().optional().meta({ description: "The customer's latest inbound message." }),
  last_agent_reply_at: z.string().optional().meta({ description: 'The latest reply (not a note).' }),
  legal_next_states: z.array(status),
  time_total_minutes: z.number().int(),
  time_billable_minutes: z.number().int(),
  todo_counts: z.object({ open: z.number().int(), done: z.number().int(), overdue: z.number().int() }),
  events: z.array(ticketEvent),
}).meta({ id: 'Ticket', examples: [EXAMPLE_TICKET] });

/**
 * What a write on one ticket answers (PATCH, reply, note): the ticket as it now stands without its timeline,
 * and the events this request appended, oldest first. A write's cost must not grow with the ticket's history,
 * so the whole timeline is GET /v1/tickets/{ticket_id}'s (merge and reopen answer the full detail, as the
 * contract says).
 */
const { events: exampleEvents, ...exampleWithoutTimeline } = EXAMPLE_TICKET;
export const ticketWrite = ticketDetail
  .omit({ events: true })
  .extend({ new_events: z.array(ticketEvent) })
  .meta({ id: 'TicketWrite', examples: [{ ...exampleWithoutTimeline, new_events: exampleEvents.slice(-1) }] });

export const ticketList = pageSchema('tickets', ticketSummary);
