import { LRUCache } from 'lru-cache';
import type { ScheduleRow } from '../../db/types';
import { compileSchedule, type CompiledSchedule } from './business-time';

/** What a clock is made of: a schedule row's hours, both sets of holidays, and its version. */
export type ScheduleSource = Pick<ScheduleRow, 'tenant_id' | 'id' | 'version' | 'time_zone' | 'weekly' | 'holidays' | 'ical_holidays'>;

// Every change of a schedule moves its version, so a compiled clock is good for its (schedule, version) for ever.
const compiled = new LRUCache<string, CompiledSchedule>({ max: 1000 });

/** A schedule row as a business clock: its typed and imported holidays both close the day. */
export function clockOf(row: ScheduleSource): CompiledSchedule {
  const key = `${row.tenant_id}|${row.id}|${row.version}`;
  let clock = compiled.get(key);
  if (!clock) {
    clock = compileSchedule({ timeZone: row.time_zone, weekly: row.weekly, holidays: [...row.holidays, ...row.ical_holidays] });
    compiled.set(key, clock);
  }
  return clock;
}
