import { z } from 'zod';
import { slaTargets } from './targets';

export const slaPolicy = z.object({ id: z.uuid(), name: z.string(), is_default: z.boolean(), targets: slaTargets, created_at: z.string() });
export const slaPolicyList = z.object({ sla_policies: z.array(slaPolicy) });
export const createPolicyBody = z.strictObject({
  name: z.string().trim().min(1).max(120),
  targets: slaTargets,
  is_default: z.boolean().default(false),
});
export type CreatePolicyInput = z.output<typeof createPolicyBody>;
