import { z } from 'zod';
import { slaTargets } from './targets';

const name = z.string().meta({ examples: ['Business hours (EU)'] });
const targetsExample = {
  urgent: { first_response_minutes: 30, resolution_minutes: 240 },
  high: { first_response_minutes: 120, resolution_minutes: 960 },
  normal: { first_response_minutes: 480, resolution_minutes: 2880 },
  low: { first_response_minutes: 1440, resolution_minutes: 7200 },
};

export const slaPolicy = z.object({
  id: z.uuid().meta({ examples: ['cbaea781-ac96-464c-a6ac-4c52797e2cf1'] }),
  name,
  is_default: z.boolean(),
  targets: slaTargets.meta({ examples: [targetsExample] }),
  created_at: z.string().meta({ examples: ['2025-02-20T10:00:00.000Z'] }),
}).meta({ id: 'SlaPolicy' });
export const slaPolicyList = z.object({ sla_policies: z.array(slaPolicy) });
export const createPolicyBody = z.strictObject({
  name: z.string().trim().min(1).max(120).meta({ examples: ['Business hours (EU)'] }),
  targets: slaTargets.meta({ examples: [targetsExample] }),
  is_default: z.boolean().default(false).meta({ examples: [true] }),
});
export type CreatePolicyInput = z.output<typeof createPolicyBody>;
