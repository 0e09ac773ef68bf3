import { z } from 'zod';

const role = z.enum(['viewer', 'editor', 'admin', 'owner']);

export const userIdParams = z.object({ user_id: z.uuid() });

export const addMemberBody = z.strictObject({
  email: z.email().max(320),
  name: z.string().trim().min(1).max(200),
  role,
  realm_subject: z.string().min(1).max(255).optional(),
});

export const patchMemberBody = z
  .strictObject({
    role: role.optional(),
    status: z.enum(['active', 'deactivated']).optional(),
  })
  .refine((b) => b.role !== undefined || b.status !== undefined, { message: 'send role, status or both' });

export const member = z.object({
  user_id: z.uuid(),
  email: z.string(),
  name: z.string(),
  role,
  status: z.enum(['active', 'deactivated']),
  realm_subject: z.string().nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});

export const memberList = z.object({ members: z.array(member) });

export type AddMemberInput = z.output<typeof addMemberBody>;
export type PatchMemberInput = z.output<typeof patchMemberBody>;

export const presenceBody = z.strictObject({ presence: z.enum(['online', 'away', 'offline']) });
export const presenceResult = z.object({ presence: z.enum(['online', 'away', 'offline']), refreshed_at: z.string() });
export const preferencesBody = z
  .strictObject({ helpdesk_unavailable: z.boolean().optional() })
  .refine((b) => b.helpdesk_unavailable !== undefined, { message: 'send at least one preference' });
export const preferencesResult = z.object({ helpdesk_unavailable: z.boolean() });
