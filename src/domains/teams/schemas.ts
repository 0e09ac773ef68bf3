import { z } from 'zod';

const TEAM = 'Billing';

export const teamIdParams = z.object({ team_id: z.uuid() });
export const teamMemberParams = z.object({ team_id: z.uuid(), user_id: z.uuid() });
export const createTeamBody = z.strictObject({ name: z.string().trim().min(1).max(120).meta({ examples: [TEAM] }) });
export const addTeamMemberBody = z.strictObject({ user_id: z.uuid() });
export const assignBody = z.strictObject({ ticket_id: z.uuid() });

export const team = z.object({
  id: z.uuid().meta({ examples: ['810007d0-bec5-486c-b5d1-28fcd8a079ba'] }),
  name: z.string().meta({ examples: [TEAM] }),
  members: z.array(z.object({ user_id: z.uuid(), name: z.string().meta({ examples: ['Jonas Berg'] }), position: z.number().int() })),
  created_at: z.string().meta({ examples: ['2025-02-20T10:05:00.000Z'] }),
}).meta({ id: 'Team' });
export const teamList = z.object({ teams: z.array(team) });

export const SKIP_REASONS = ['not_a_member', 'invited', 'deactivated', 'unavailable', 'offline', 'presence_stale'] as const;
export const skipped = z.array(z.object({ user_id: z.uuid(), reason: z.enum(SKIP_REASONS) }));

export const assignmentResult = z.object({
  assignee_id: z.uuid().meta({ examples: ['a169451c-8525-4352-b8ca-070dd449a1a5'] }),
  assignee_name: z.string().meta({ examples: ['Jonas Berg'] }),
  ticket_id: z.uuid(),
  team_id: z.uuid(),
  skipped: skipped.meta({
    description: 'Members passed over on this turn, in rotation order, with the reason.',
    examples: [[{ user_id: '3b8f1d2a-6c4e-4a97-8e15-0f2d7c9b4a61', reason: 'offline' }]],
  }),
}).meta({ id: 'Assignment' });
