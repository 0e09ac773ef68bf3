import { z } from 'zod';

export const PRIORITIES = ['low', 'normal', 'high', 'urgent'] as const;
export type Priority = (typeof PRIORITIES)[number];

/** One priority's targets: named, so the document writes its schema once rather than once per priority. */
const target = z
  .strictObject({
    first_response_minutes: z.number().int().min(1).max(525_600),
    resolution_minutes: z.number().int().min(1).max(525_600),
  })
  .meta({ id: 'SlaTarget' });

export const slaTargets = z.strictObject({ low: target, normal: target, high: target, urgent: target });
export type SlaTargets = z.output<typeof slaTargets>;

/** A workspace's default until its admins set their own: hours for urgent work, days for low. */
export const DEFAULT_SLA_TARGETS: SlaTargets = {
  urgent: { first_response_minutes: 60, resolution_minutes: 240 },
  high: { first_response_minutes: 240, resolution_minutes: 1440 },
  normal: { first_response_minutes: 480, resolution_minutes: 2880 },
  low: { first_response_minutes: 1440, resolution_minutes: 5760 },
};

export function dueTimes(targets: SlaTargets, priority: Priority, from: Date) {
  const t = targets[priority];
  return {
    first_response_due: new Date(from.getTime() + t.first_response_minutes * 60_000),
    resolution_due: new Date(from.getTime() + t.resolution_minutes * 60_000),
  };
}
