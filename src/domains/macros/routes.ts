import { z } from 'zod';
import { defineOperation } from '../../define-operation';
import { EXAMPLE_TICKET, ticketDetail } from '../tickets/schemas';
import { applyParams, createMacroBody, macro, macroIdParams, macroList, patchMacroBody } from './schemas';

const applyResult = z.object({
  ticket: ticketDetail,
  skipped: z.array(z.object({ action: z.record(z.string(), z.unknown()), reason: z.string() })),
});

/** Time-based rules (issue 37), as the create and change rows say them (docs/api-guide.md, "Time-based rules", has the example). */
const TIME_RULES =
  'A time rule is a macro whose trigger is `{"event": "time", "time": {"hours_since": "status_entered", "hours": 72}, "conditions": {"status": "pending"}}`: ' +
  'a sweep every minute fires it on each ticket passing `conditions` (GET /v1/tickets filters; `assignee_id=none` is unassigned) once the time condition holds, ' +
  'only on open, pending and on-hold tickets, at most once per ticket and stretch (a moved anchor starts a new one), never on a ticket its actions would not change. ' +
  'Each firing is a `rule_fired` timeline event and a `ticket.rule_fired` outbound event, beside those of the changes it made.';

export const macroOperations = [
  defineOperation({
    id: 'create_macro',
    method: 'post',
    path: '/v1/macros',
    summary: 'Create a macro: typed actions, optionally fired by a ticket event or a time condition',
    description: TIME_RULES,
    access: { floor: 'editor', tag: 'helpdesk-ops', action: 'write' },
    body: createMacroBody,
    response: { status: 201, description: 'The macro', schema: macro },
    errors: ['team_unknown', 'assignee_unknown', 'filter_unknown', 'filter_invalid'],
    versioned: true,
    handler: async ({ principal, body }, s) => {
      const m = await s.macros.create(principal, body);
      return { status: 201, body: m, version: m.version };
    },
  }),
  defineOperation({
    id: 'list_macros',
    method: 'get',
    path: '/v1/macros',
    summary: 'Macros of the workspace',
    access: { floor: 'viewer', tag: 'helpdesk-ops', action: 'read' },
    response: { status: 200, description: 'Macros', schema: macroList },
    handler: async ({ principal }, s) => ({ body: await s.macros.list(principal) }),
  }),
  defineOperation({
    id: 'patch_macro',
    method: 'patch',
    path: '/v1/macros/{macro_id}',
    summary: 'Change a macro; trigger: null makes it manual-only, an omitted trigger is left unchanged',
    description: 'A time rule (`trigger.event: "time"`: see create_macro) changed does not fire again on a stretch it already fired for.',
    access: { floor: 'editor', tag: 'helpdesk-ops', action: 'write' },
    params: macroIdParams,
    body: patchMacroBody,
    response: { status: 200, description: 'The macro as it now stands', schema: macro },
    errors: ['team_unknown', 'assignee_unknown', 'filter_unknown', 'filter_invalid', 'precondition_failed'],
    versioned: true,
    handler: async ({ principal, params, body, ifMatch }, s) => {
      const m = await s.macros.patch(principal, params.macro_id, body, ifMatch);
      return { body: m, version: m.version };
    },
  }),
  defineOperation({
    id: 'apply_macro',
    method: 'post',
    path: '/v1/tickets/{ticket_id}/macros/{macro_id}/apply',
    summary: 'Apply a macro to a ticket by hand',
    description: 'Actions the status machine forbids are skipped (listed in skipped and recorded as events), never forced. A disabled macro cannot be applied.',
    access: { floor: 'editor', tag: 'tickets', action: 'write' },
    params: applyParams,
    response: { status: 200, description: 'The ticket after the macro, and what was skipped', schema: applyResult },
    errors: ['macro_disabled', 'ticket_merged'],
    example: {
      response: {
        ticket: { ...EXAMPLE_TICKET, priority: 'urgent', tags: ['billing', 'refund', 'vip'] },
        skipped: [{ action: { type: 'assign_team', team_id: '3e9c1a7b-5d2f-4b8e-a6c4-9f0d2e7b1a53' }, reason: 'the team no longer exists' }],
      },
    },
    handler: async ({ principal, params }, s) => ({ body: await s.macros.apply(principal, params.ticket_id, params.macro_id) }),
  }),
];
