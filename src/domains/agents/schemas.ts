import { z } from 'zod';

export const createAgentBody = z.strictObject({ name: z.string().trim().min(1).max(200) });
export const agent = z.object({ id: z.uuid(), name: z.string(), created_at: z.string() });
export const agentList = z.object({ agents: z.array(agent) });
