import { z } from 'zod';

export const teamIdParams = z.object({ team_id: z.uuid() });
export const teamMemberParams = z.object({ team_id: z.uuid(), user_id: z.uuid() });
export const createTeamBody = z.strictObject({ name: z.string().trim().min(1).max(120) });
export const addTeamMemberBody = z.strictObject({ user_id: z.uuid() });
export const assignBody = z.strictObject({ ticket_id: z.uuid() });

export const team = z.object({
  id: z.uuid(),
  name: z.string(),
  members: z.array(z.object({ user_id: z.uuid(), name: z.string(), position: z.number().int() })),
  created_at: z.string(),
});
export const teamList = z.object({ teams: z.array(team) });

export const SKIP_REASONS = ['not_a_member', 'deactivated', 'unavailable', 'offline', 'presence_stale'] as const;
export const skipped = z.array(z.object({ user_id: z.uuid(), reason: z.enum(SKIP_REASONS) }));

export const assignmentResult = z.object({
  assignee_id: z.uuid(),
  assignee_name: z.string(),
  ticket_id: z.uuid(),
  team_id: z.uuid(),
  skipped: skipped.meta({ description: 'Members passed over on this turn, in rotation order, with the reason.' }),
});
