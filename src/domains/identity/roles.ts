import type { Role } from '../../db/types';

export const ROLES: readonly Role[] = ['viewer', 'editor', 'admin', 'owner'];
const RANK: Record<Role, number> = { viewer: 0, editor: 1, admin: 2, owner: 3 };

export const roleAtLeast = (role: Role, floor: Role): boolean => RANK[role] >= RANK[floor];
