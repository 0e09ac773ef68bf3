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
]);
export type MacroAction = z.output<typeof macroAction>;

export const TRIGGER_EVENTS = ['ticket.created', 'ticket.updated', 'ticket.reopened'] as const;

export const macroTrigger = z.strictObject({
  event: z.enum(TRIGGER_EVENTS),
  conditions: rawFilterObject.default({}),
});

const actions = z.array(macroAction).min(1).max(50);

export const macroIdParams = z.object({ macro_id: z.uuid() });
export const applyParams = z.object({ ticket_id: z.uuid(), macro_id: z.uuid() });

export const createMacroBody = z.strictObject({
  name: z.string().trim().min(1).max(120),
  description: z.string().max(2000).default(''),
  actions,
  enabled: z.boolean().default(true),
  trigger: macroTrigger.nullable().default(null),
});

/** trigger: null removes the trigger (manual only); an omitted trigger is left as it is. */
export const patchMacroBody = z
  .strictObject({
    name: z.string().trim().min(1).max(120).optional(),
    description: z.string().max(2000).optional(),
    actions: actions.optional(),
    enabled: z.boolean().optional(),
    trigger: macroTrigger.nullable().optional(),
  })
  .refine((b) => Object.values(b).some((v) => v !== undefined), { message: 'send at least one field to change' });

export type CreateMacroInput = z.output<typeof createMacroBody>;
export type PatchMacroInput = z.output<typeof patchMacroBody>;

export const macro = z.object({
  id: z.uuid(),
  name: z.string(),
  description: z.string(),
  actions: z.array(z.record(z.string(), z.unknown())),
  enabled: z.boolean(),
  trigger: z.object({ event: z.string(), conditions: z.record(z.string(), z.string()) }).nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export const macroList = z.object({ macros: z.array(macro) });
