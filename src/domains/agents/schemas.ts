import { z } from 'zod';

export const createAgentBody = z.strictObject({ name: z.string().trim().min(1).max(200).meta({ examples: ['Triage bot'] }) });
export const agent = z.object({
  id: z.uuid().meta({ examples: ['2b1e3b65-2c04-4fa2-a2d7-467901e98978'] }),
  name: z.string().meta({ examples: ['Triage bot'] }),
  created_at: z.string().meta({ examples: ['2025-03-03T08:15:00.000Z'] }),
}).meta({ id: 'Agent' });
export const agentList = z.object({ agents: z.array(agent) });
