import { z } from 'zod';
import { PRIORITIES } from '../sla/targets';
import { STATUSES } from '../tickets/status';
import { LIMITS } from '../tickets/schemas';
import { rawFilterObject } from '../tickets/filters';

const tagList = z.array(z.string().trim().min(1).max(LIMITS.tag)).min(1).max(LIMITS.tags);

export const macroAction = z.discriminatedUnion('type', [
  z.strictObject({ type: z.literal('set_status'), status: z.enum(STATUSES.filter((s) => s !== 'merged') as [string, ...string[]]) }),
  z.strictObject({ type: z.literal('set_priority'), priority: z.enum(PRIORITIES) }),
  z.strictObject({ type: z.literal('add_tags'), tags: tagList }),
  z.strictObject({ type: z.literal('remove_tags'), tags: tagList }),
  z.strictObject({ type: z.literal('assign_team'), team_id: z.uuid() }),
  z.strictObject({ type: z.literal('assign_user'), user_id: z.uuid() }),
  z.strictObject({ type: z.literal('add_note'), body: z.string().trim().min(1).max(LIMITS.body) }),
])
  // Named: the document writes the actions' schema once, for the macro and for both of its request bodies.
  .meta({ id: 'MacroAction' });
export type MacroAction = z.output<typeof macroAction>;

export const TRIGGER_EVENTS = ['ticket.created', 'ticket.updated', 'ticket.reopened'] as const;
/** A time rule's trigger (issue 37): no ticket event, the minute's sweep (src/domains/macros/time-rules.ts). */
export const TIME_EVENT = 'time';

/** What a time condition counts from: a ticket timestamp, or a target's due time. */
export const TIME_ANCHORS = ['created', 'updated', 'last_customer_message', 'last_agent_reply', 'status_entered', 'first_response_due', 'next_reply_due', 'resolution_due'] as const;
export type TimeAnchor = (typeof TIME_ANCHORS)[number];
export const DUE_ANCHORS = ['first_response_due', 'next_reply_due', 'resolution_due'] as const satisfies readonly TimeAnchor[];

/** The longest a time condition waits: a year. */
export const MAX_TIME_HOURS = 8760;

/**
 * A time condition (issue 37): `hours_since` an anchor is at least `hours` (or `minutes`) ago, for a due time
 * overdue by at least that much; `hours_until` a due time is at most that far ahead, overdue included. Whole hours
 * or whole minutes, exactly one ("unassigned for 30 minutes" is `minutes: 30`; nothing is rounded).
 */
export const timeCondition = z
  .strictObject({
    hours_since: z.enum(TIME_ANCHORS).optional(),
    hours_until: z.enum(DUE_ANCHORS).optional(),
    hours: z.number().int().min(0).max(MAX_TIME_HOURS).optional(),
    minutes: z.number().int().min(0).max(MAX_TIME_HOURS * 60).optional(),
  })
  .refine((t) => (t.hours_since === undefined) !== (t.hours_until === undefined), { message: 'send exactly one of hours_since and hours_until' })
  .refine((t) => (t.hours === undefined) !== (t.minutes === undefined), { message: 'send exactly one of hours and minutes' })
  .meta({
    id: 'TimeCondition',
    description: '`hours_since` an anchor: at least this long ago (a due time: overdue by this much); `hours_until` a due time: due within this long, overdue included. One of the two, with one of `hours` and `minutes` (whole, at most a year).',
    examples: [{ hours_since: 'status_entered', hours: 72 }],
  });
export type TimeCondition = z.output<typeof timeCondition>;

export const macroTrigger = z.discriminatedUnion('event', [
  z.strictObject({
    event: z.enum(TRIGGER_EVENTS),
    conditions: rawFilterObject.default({}),
  }),
  // A time rule: the sweep fires it on each ticket that passes the conditions once the time condition holds.
  z.strictObject({
    event: z.literal(TIME_EVENT),
    conditions: rawFilterObject.default({}),
    time: timeCondition,
  }),
]);

const ACTIONS = [
  { type: 'set_priority', priority: 'urgent' },
  { type: 'add_tags', tags: ['vip'] },
  { type: 'assign_team', team_id: '810007d0-bec5-486c-b5d1-28fcd8a079ba' },
];
const TRIGGER = { event: 'ticket.created', conditions: { tag: 'vip' } };
const NAME = 'Escalate VIP tickets';
const DESCRIPTION = 'New tickets from VIP customers go straight to Billing as urgent.';
const at = z.string().meta({ examples: ['2025-03-01T12:00:00.000Z'] });

const actions = z.array(macroAction).min(1).max(50).meta({ examples: [ACTIONS] });

export const macroIdParams = z.object({ macro_id: z.uuid() });
export const applyParams = z.object({ ticket_id: z.uuid(), macro_id: z.uuid() });

export const createMacroBody = z.strictObject({
  name: z.string().trim().min(1).max(120).meta({ examples: [NAME] }),
  description: z.string().max(2000).default('').meta({ examples: [DESCRIPTION] }),
  actions,
  enabled: z.boolean().default(true),
  trigger: macroTrigger.nullable().default(null).meta({ examples: [TRIGGER] }),
});

/** trigger: null removes the trigger (manual only); an omitted trigger is left as it is. */
export const patchMacroBody = z
  .strictObject({
    name: z.string().trim().min(1).max(120).optional().meta({ examples: [NAME] }),
    description: z.string().max(2000).optional().meta({ examples: [DESCRIPTION] }),
    actions: actions.optional(),
    enabled: z.boolean().optional().meta({ examples: [false] }),
    trigger: macroTrigger.nullable().optional().meta({ examples: [null] }),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), { message: 'send at least one field to change' });

export type CreateMacroInput = z.output<typeof createMacroBody>;
export type PatchMacroInput = z.output<typeof patchMacroBody>;

export const macro = z.object({
  id: z.uuid().meta({ examples: ['058c5644-6d89-4487-8893-fd8d698da202'] }),
  name: z.string().meta({ examples: [NAME] }),
  description: z.string().meta({ examples: [DESCRIPTION] }),
  actions: z.array(z.record(z.string(), z.unknown())).meta({ examples: [ACTIONS] }),
  enabled: z.boolean(),
  trigger: z
    .union([
      z.object({ event: z.enum(TRIGGER_EVENTS), conditions: z.record(z.string(), z.string()) }),
      z.object({ event: z.literal(TIME_EVENT), conditions: z.record(z.string(), z.string()), time: timeCondition }),
    ])
    .nullable()
    .meta({ examples: [TRIGGER] }),
  created_at: at,
  updated_at: at,
  version: z.string().meta({ description: 'The macro\'s version: its ETag is this value in quotes, for If-Match on PATCH.', examples: ['3'] }),
}).meta({ id: 'Macro' });
export const macroList = z.object({ macros: z.array(macro) });
