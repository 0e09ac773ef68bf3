import { z } from 'zod';
import { intParam } from '../../lib/params';
import { afterParam, pageSchema } from '../../lib/paging';
import type { Role } from '../../db/types';
import { ROLES } from '../identity/roles';

const role = z.enum(ROLES as [Role, ...Role[]]).meta({ examples: ['editor'] });
const at = z.string().meta({ examples: ['2025-03-03T08:15:00.000Z'] });
const email = 'jonas.berg@northwind.example';
const realmSubject = 'auth0|65f1c2a9e4b0d3a1c8f7e215';

export const userIdParams = z.object({ user_id: z.uuid() });

export const addMemberBody = z.strictObject({
  email: z.email().max(320).meta({ examples: [email] }),
  name: z.string().trim().min(1).max(200).meta({ examples: ['Jonas Berg'] }),
  role,
  realm_subject: z.string().min(1).max(255).optional().meta({ examples: [realmSubject] }),
});

export const patchMemberBody = z
  .strictObject({
    role: role.optional(),
    status: z.enum(['active', 'deactivated']).optional(),
  })
  .refine((b) => b.role !== undefined || b.status !== undefined, { message: 'send role, status or both' });

export const member = z.object({
  user_id: z.uuid(),
  email: z.string().meta({ examples: [email] }),
  name: z.string().meta({ examples: ['Jonas Berg'] }),
  role,
  status: z.enum(['active', 'deactivated', 'invited']).meta({
    description: '`invited`: added by email and not signed in yet; it can do nothing until its person signs in with a verified email.',
    examples: ['active'],
  }),
  realm_subject: z
    .string()
    .nullable()
    .meta({ description: 'The realm subject bound to this member in this workspace; null while invited.', examples: [realmSubject] }),
  created_at: at,
  updated_at: at,
}).meta({ id: 'Member' });

/** Members read in one order, oldest membership first (its cursor names it). */
export const MEMBER_SORT = 'created_at';
export const listMembersQuery = z.strictObject({ limit: intParam(1, 500).default(100), after: afterParam({ [MEMBER_SORT]: 'timestamp' }).optional() });
export const memberList = pageSchema('members', member);

export type AddMemberInput = z.output<typeof addMemberBody>;
export type PatchMemberInput = z.output<typeof patchMemberBody>;

export const presenceBody = z.strictObject({ presence: z.enum(['online', 'away', 'offline']) });
export const presenceResult = z.object({ presence: z.enum(['online', 'away', 'offline']), refreshed_at: z.string().meta({ examples: ['2025-03-14T09:26:53.412Z'] }) });
export const preferencesBody = z
  .strictObject({ helpdesk_unavailable: z.boolean().optional() })
  .refine((b) => b.helpdesk_unavailable !== undefined, { message: 'send at least one preference' });
export const preferencesResult = z.object({ helpdesk_unavailable: z.boolean() });
