import { z } from 'zod';
import { slaTargets } from './targets';

const name = z.string().meta({ examples: ['Business hours (EU)'] });
const SCHEDULE_ID = '6f1d2c3b-4a5e-4f60-9b7c-8d9e0a1b2c3d';
const targetsExample = {
  urgent: { first_response_minutes: 30, resolution_minutes: 240 },
  high: { first_response_minutes: 120, resolution_minutes: 960 },
  normal: { first_response_minutes: 480, resolution_minutes: 2880, next_reply_minutes: 240 },
  low: { first_response_minutes: 1440, resolution_minutes: 7200 },
};

export const slaPolicy = z.object({
  id: z.uuid().meta({ examples: ['cbaea781-ac96-464c-a6ac-4c52797e2cf1'] }),
  name,
  is_default: z.boolean(),
  targets: slaTargets.meta({ examples: [targetsExample] }),
  schedule_id: z.uuid().optional().meta({ description: 'The schedule whose business hours the targets count (absent: calendar minutes, 24×7).', examples: [SCHEDULE_ID] }),
  created_at: z.string().meta({ examples: ['2025-02-20T10:00:00.000Z'] }),
}).meta({ id: 'SlaPolicy' });
export const slaPolicyList = z.object({ sla_policies: z.array(slaPolicy) });
export const createPolicyBody = z.strictObject({
  name: z.string().trim().min(1).max(120).meta({ examples: ['Business hours (EU)'] }),
  targets: slaTargets.meta({ examples: [targetsExample] }),
  is_default: z.boolean().default(false).meta({ examples: [true] }),
  schedule_id: z
    .uuid()
    .nullable()
    .default(null)
    .meta({
      description: 'Count the targets in business minutes on this schedule (GET /v1/schedules), pausing the resolution clock while the ticket is pending or on hold; null or absent: calendar minutes, never paused. Every target must be reachable on the schedule within ten years.',
      examples: [SCHEDULE_ID],
    }),
});
export type CreatePolicyInput = z.output<typeof createPolicyBody>;
