import { IANAZone } from 'luxon';

/**
 * Business time (issue 37): which instants a schedule counts, and the two questions SLA clocks and reports ask of
 * it, "when does this many business minutes from here end?" and "how many business minutes lie between these two
 * instants?". Pure: no database, no clock of its own. docs/decisions/business-time.md has the reasons; in short:
 *
 * - A schedule is an IANA time zone, weekly hours as local wall-clock intervals [start, end) in minutes after
 *   midnight per ISO weekday (several a day for split shifts; end 1440 is midnight, "24:00"), and holidays as local
 *   dates, closed all day.
 * - An interval is local wall-clock time, so it means what the clock on the office wall says: on a spring-forward
 *   day the skipped hour does not exist (09:00–17:00 is unaffected; 01:00–04:00 lasts two hours), on a fall-back
 *   day the repeated hour happens twice and counts twice (01:00–04:00 lasts four hours).
 * - Luxon's IANAZone gives the zone's UTC offset at an instant (from the runtime's time-zone database). Each local
 *   day is cut into spans of constant offset; an interval maps, within each span, to one range of real instants.
 *   A day's ranges are computed once per zone and day and kept (ZONE_DAYS), so walking the same days again costs
 *   arithmetic only.
 * - Both answers walk day by day from the first instant: linear in the days spanned plus the intervals met. The
 *   walk forward is bounded (HORIZON_DAYS, ten years): a target a schedule cannot meet within it has no due time.
 * - Calendar time is the schedule `null`: every instant counts (24×7), so the answers are plain arithmetic.
 *
 * Times are exact to the millisecond: a ticket opened at 16:30:12.345 on a Friday with 60 business minutes to go on
 * 09:00–17:00 is due on Monday at 09:30:12.345, as a calendar clock keeps the seconds of its start.
 */

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** How far forward a walk looks for the end of a target: ten years of days. */
export const HORIZON_DAYS = 3653;

/** The ISO weekdays as the API names them, Monday (1) first. */
export const WEEKDAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

/** A local wall-clock interval, minutes after midnight, [start, end) with 0 ≤ start < end ≤ 1440. */
export type MinuteInterval = readonly [start: number, end: number];

/** Seven days of intervals, Monday first (index = ISO weekday − 1); each day's sorted and disjoint. */
export type WeeklyHours = readonly (readonly MinuteInterval[])[];

export interface ScheduleDefinition {
  /** An IANA zone name (`Europe/Berlin`). */
  timeZone: string;
  weekly: WeeklyHours;
  /** Local dates, `YYYY-MM-DD`, closed all day. */
  holidays: Iterable<string>;
}

/** A range of real time, epoch milliseconds, [start, end). */
interface Range {
  start: number;
  end: number;
}

/** A schedule ready to be walked. Made only by `compileSchedule`. */
export interface CompiledSchedule {
  readonly timeZone: string;
  readonly weekly: WeeklyHours;
  /** Open minutes in an ordinary week (no holiday, no daylight-saving change). */
  readonly weeklyMinutes: number;
  /** The open ranges of one local day (days since 1970-01-01, local), holidays included: callers skip those. */
  openRanges(day: number): readonly Range[];
  isHoliday(day: number): boolean;
  /** The local day an instant falls on. */
  localDay(ms: number): number;
}

/** What a clock runs on: a compiled schedule, or `null` for calendar time (24×7). */
export type BusinessClock = CompiledSchedule | null;

// ------------------------------------------------------------------------------------------- local dates

/** `YYYY-MM-DD` → days since 1970-01-01; undefined when it is not a real date. */
export function dayOfDate(date: string): number | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(date);
  if (!m) return undefined;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const ms = Date.UTC(y, mo - 1, d);
  const back = new Date(ms);
  if (back.getUTCFullYear() !== y || back.getUTCMonth() !== mo - 1 || back.getUTCDate() !== d) return undefined;
  return ms / DAY;
}

/** Days since 1970-01-01 → `YYYY-MM-DD`. */
export const dateOfDay = (day: number): string => new Date(day * DAY).toISOString().slice(0, 10);

/** ISO weekday index of a day number, Monday 0 … Sunday 6 (1970-01-01 was a Thursday). */
const weekdayIndex = (day: number): number => (((day + 3) % 7) + 7) % 7;

// ------------------------------------------------------------------------------------------- validation

export const isValidTimeZone = (name: string): boolean => IANAZone.isValidZone(name);

/** What is wrong with a week of intervals, as `[day, message]` pairs (none: it can be compiled). */
export function weeklyProblems(weekly: WeeklyHours): [Weekday, string][] {
  const problems: [Weekday, string][] = [];
  if (weekly.length !== 7) return [['mon', 'a week has seven days']];
  weekly.forEach((intervals, i) => {
    const day = WEEKDAYS[i]!;
    let previousEnd = -1;
    for (const [start, end] of intervals) {
      if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0 || end > 1440 || start >= end) {
        problems.push([day, `an interval must start before it ends, within 00:00–24:00 (got ${start}–${end} minutes)`]);
      } else if (start < previousEnd) {
        problems.push([day, 'intervals must be in order and must not overlap']);
      }
      previousEnd = Math.max(previousEnd, end);
    }
  });
  if (problems.length === 0 && weekly.every((d) => d.length === 0)) problems.push(['mon', 'a schedule needs some open hours in its week']);
  return problems;
}

// ------------------------------------------------------------------------------------------- the zone's days

/** One stretch of real time with one UTC offset (minutes). */
interface Span {
  start: number;
  end: number;
  offset: number;
}

/**
 * The spans of constant offset covering every instant whose local date can be `day`. Offsets lie within
 * −12 h … +14 h, so those instants lie within [midnight − 14 h, midnight + 36 h) of the day read as UTC. The offset
 * is sampled every three hours (no zone changes twice within three hours) and each change is found to the minute
 * by bisection (changes fall on whole minutes).
 */
function spansOf(zone: IANAZone, day: number): Span[] {
  // 54 hours, a whole number of samples: the last one falls on `to`.
  const from = day * DAY - 15 * HOUR;
  const to = day * DAY + 39 * HOUR;
  const spans: Span[] = [];
  let start = from;
  let offset = zone.offset(from);
  for (let t = from + 3 * HOUR; t <= to; t += 3 * HOUR) {
    const next = zone.offset(t);
    if (next === offset) continue;
    let lo = t - 3 * HOUR;
    let hi = t;
    while (hi - lo > MINUTE) {
      const mid = lo + Math.floor((hi - lo) / MINUTE / 2) * MINUTE;
      if (zone.offset(mid) === offset) lo = mid;
      else hi = mid;
    }
    spans.push({ start, end: hi, offset });
    start = hi;
    offset = next;
  }
  spans.push({ start, end: to, offset });
  return spans;
}

/** Spans per zone and day, shared by every schedule in the process; dropped whole when it grows past its bound. */
const ZONE_DAYS = new Map<string, Span[]>();
const ZONE_DAYS_MAX = 100_000;

function zoneDay(zone: IANAZone, day: number): Span[] {
  const key = `${zone.name}|${day}`;
  let spans = ZONE_DAYS.get(key);
  if (!spans) {
    if (ZONE_DAYS.size >= ZONE_DAYS_MAX) ZONE_DAYS.clear();
    spans = spansOf(zone, day);
    ZONE_DAYS.set(key, spans);
  }
  return spans;
}

// ------------------------------------------------------------------------------------------- compiling

/** Compiles a schedule; throws on an unknown zone or a malformed week (the API edge refuses both first). */
export function compileSchedule(def: ScheduleDefinition): CompiledSchedule {
  if (!isValidTimeZone(def.timeZone)) throw new Error(`unknown time zone ${def.timeZone}`);
  const problems = weeklyProblems(def.weekly);
  if (problems.length > 0) throw new Error(`malformed weekly hours: ${problems.map(([d, m]) => `${d}: ${m}`).join('; ')}`);
  const zone = IANAZone.create(def.timeZone);
  const weekly = def.weekly.map((d) => d.map(([a, b]) => [a, b] as const));
  const holidays = new Set<number>();
  for (const date of def.holidays) {
    const day = dayOfDate(date);
    if (day !== undefined) holidays.add(day);
  }
  const weeklyMinutes = weekly.reduce((sum, d) => sum + d.reduce((s, [a, b]) => s + (b - a), 0), 0);
  const memo = new Map<number, Range[]>();

  function openRanges(day: number): Range[] {
    let ranges = memo.get(day);
    if (ranges) return ranges;
    ranges = [];
    const intervals = weekly[weekdayIndex(day)]!;
    if (intervals.length > 0) {
      const midnight = day * DAY;
      // Within a span local time runs at the pace of real time, so an interval is one range there; spans and
      // the intervals within each come in time order, so the ranges do too.
      for (const span of zoneDay(zone, day)) {
        for (const [a, b] of intervals) {
          const start = Math.max(span.start, midnight + (a - span.offset) * MINUTE);
          const end = Math.min(span.end, midnight + (b - span.offset) * MINUTE);
          if (start >= end) continue;
          const last = ranges[ranges.length - 1];
          if (last && last.end === start) last.end = end;
          else ranges.push({ start, end });
        }
      }
    }
    if (memo.size >= 1024) memo.clear();
    memo.set(day, ranges);
    return ranges;
  }

  return {
    timeZone: def.timeZone,
    weekly,
    weeklyMinutes,
    openRanges,
    isHoliday: (day) => holidays.has(day),
    // The offset at `ms` from the spans of its UTC day (cached; they cover that whole day), not a fresh zone lookup.
    localDay: (ms) => {
      const span = zoneDay(zone, Math.floor(ms / DAY)).find((x) => ms >= x.start && ms < x.end)!;
      return Math.floor((ms + span.offset * MINUTE) / DAY);
    },
  };
}

// ------------------------------------------------------------------------------------------- the answers

/**
 * The earliest instant at which `minutes` business minutes have passed since `from`, or null when the schedule
 * cannot give that many within `horizonDays` days. Zero (or less) is `from` itself; a target that ends exactly at
 * closing time is due at closing time, not at the next opening.
 */
export function addBusinessMinutesWithin(clock: BusinessClock, from: Date, minutes: number, horizonDays = HORIZON_DAYS): Date | null {
  const start = from.getTime();
  if (minutes <= 0) return new Date(start);
  if (clock === null) return new Date(start + minutes * MINUTE);
  let remaining = minutes * MINUTE;
  const first = clock.localDay(start);
  for (let day = first; day <= first + horizonDays; day++) {
    if (clock.isHoliday(day)) continue;
    for (const r of clock.openRanges(day)) {
      const lo = Math.max(r.start, start);
      if (r.end <= lo) continue;
      const open = r.end - lo;
      if (remaining <= open) return new Date(lo + remaining);
      remaining -= open;
    }
  }
  return null;
}

/**
 * `minutes` business minutes after `from`. A target the schedule cannot meet within HORIZON_DAYS (a schedule
 * whose holidays were imported over every working day) is due at the end of the horizon: never, in practice.
 * Policies whose targets cannot be met are refused when they are written (`reachable`), so this is the rare case.
 */
export function addBusinessMinutes(clock: BusinessClock, from: Date, minutes: number): Date {
  return addBusinessMinutesWithin(clock, from, minutes) ?? new Date(from.getTime() + HORIZON_DAYS * DAY);
}

/**
 * Business minutes in [from, to), fractional when the instants are (exact to the millisecond); negative when `to`
 * comes before `from` (the minutes from `to` to `from`, negated), so "minutes left until a due time" is one call.
 */
export function businessMinutesBetween(clock: BusinessClock, from: Date, to: Date): number {
  const [a, b] = [from.getTime(), to.getTime()];
  if (b < a) return -businessMinutesBetween(clock, to, from);
  if (clock === null) return (b - a) / MINUTE;
  let total = 0;
  const last = clock.localDay(b);
  for (let day = clock.localDay(a); day <= last; day++) {
    if (clock.isHoliday(day)) continue;
    for (const r of clock.openRanges(day)) {
      const lo = Math.max(r.start, a);
      const hi = Math.min(r.end, b);
      if (hi > lo) total += hi - lo;
    }
  }
  return total / MINUTE;
}

/** The first instant at or after `from` that the schedule counts, or null when none comes within `horizonDays`. */
export function nextOpenInstant(clock: BusinessClock, from: Date, horizonDays = HORIZON_DAYS): Date | null {
  const start = from.getTime();
  if (clock === null) return new Date(start);
  const first = clock.localDay(start);
  for (let day = first; day <= first + horizonDays; day++) {
    if (clock.isHoliday(day)) continue;
    for (const r of clock.openRanges(day)) if (r.end > start) return new Date(Math.max(r.start, start));
  }
  return null;
}

/**
 * Whether `minutes` can be met from `from` within the horizon: what a policy's targets are checked with when a
 * policy names a schedule, or a schedule named by policies changes. A week's open minutes bound the answer first,
 * so an hour a week against a year's target is refused without walking ten years.
 */
export function reachable(clock: BusinessClock, from: Date, minutes: number): boolean {
  if (clock === null || minutes <= 0) return true;
  // Daylight saving adds at most an hour or two a year to a week's hours.
  const ceiling = clock.weeklyMinutes * (HORIZON_DAYS / 7 + 1) + 120 * (HORIZON_DAYS / 365 + 1);
  if (minutes > ceiling) return false;
  return addBusinessMinutesWithin(clock, from, minutes) !== null;
}
