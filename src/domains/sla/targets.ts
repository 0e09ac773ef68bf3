import { z } from 'zod';
import { addBusinessMinutes, type BusinessClock } from '../schedules/business-time';

export const PRIORITIES = ['low', 'normal', 'high', 'urgent'] as const;
export type Priority = (typeof PRIORITIES)[number];

/** One priority's targets: named, so the document writes its schema once rather than once per priority. */
const target = z
  .strictObject({
    first_response_minutes: z.number().int().min(1).max(525_600),
    resolution_minutes: z.number().int().min(1).max(525_600),
    // Issue 37: due from each customer message after an agent reply, met by the next agent reply. Optional: a
    // policy without it keeps no next-reply clock.
    next_reply_minutes: z.number().int().min(1).max(525_600).optional(),
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

/** The longest target a policy sets: what must be reachable on the schedule it names. */
export const longestTarget = (targets: SlaTargets): number =>
  Math.max(...PRIORITIES.flatMap((p) => [targets[p].first_response_minutes, targets[p].resolution_minutes, targets[p].next_reply_minutes ?? 0]));

/** A new clock's due times, counted from `from` in business minutes on `clock` (calendar minutes when null). */
export function dueTimes(targets: SlaTargets, priority: Priority, from: Date, clock: BusinessClock = null) {
  const t = targets[priority];
  return {
    first_response_due: addBusinessMinutes(clock, from, t.first_response_minutes),
    resolution_due: addBusinessMinutes(clock, from, t.resolution_minutes),
  };
}
