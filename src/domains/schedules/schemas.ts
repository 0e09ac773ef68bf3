import { z } from 'zod';
import { dayOfDate, isValidTimeZone, WEEKDAYS, weeklyProblems, type MinuteInterval, type Weekday } from './business-time';

/**
 * A schedule as the API writes and reads it: weekly hours per weekday as `HH:MM` intervals (`24:00` ends a day),
 * holidays as local dates. Stored as minutes (the table's `weekly`), read back as written.
 */

const SCHEDULE_ID = '6f1d2c3b-4a5e-4f60-9b7c-8d9e0a1b2c3d';
export const scheduleParams = z.object({ schedule_id: z.uuid() });

const clock = z
  .string()
  .regex(/^(?:[01]\d|2[0-3]):[0-5]\d$|^24:00$/, 'a local time, HH:MM from 00:00 to 24:00')
  .meta({ examples: ['09:00'] });
const interval = z.strictObject({ start: clock, end: clock.meta({ examples: ['17:00'] }) }).meta({ id: 'ScheduleInterval' });
/** A day holds at most this many intervals (split shifts, not minute-by-minute rosters). */
const MAX_INTERVALS_A_DAY = 12;
const MAX_HOLIDAYS = 1000;

const minutesOf = (hhmm: string) => Number(hhmm.slice(0, 2)) * 60 + Number(hhmm.slice(3, 5));
const hhmmOf = (minutes: number) => `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}`;

type WeeklyInput = Partial<Record<Weekday, { start: string; end: string }[]>>;

/** The API's week (named days, HH:MM) as the table stores it: seven arrays, Monday first, of [start, end) minutes. */
export const weeklyToMinutes = (w: WeeklyInput): MinuteInterval[][] => WEEKDAYS.map((d) => (w[d] ?? []).map((i) => [minutesOf(i.start), minutesOf(i.end)] as const));
/** The stored week as the API shows it: every day named, closed days as []. */
export const weeklyFromMinutes = (w: readonly (readonly MinuteInterval[])[]) =>
  Object.fromEntries(WEEKDAYS.map((d, i) => [d, (w[i] ?? []).map(([a, b]) => ({ start: hhmmOf(a), end: hhmmOf(b) }))])) as Record<Weekday, { start: string; end: string }[]>;

const OFFICE = { start: '09:00', end: '17:00' };
const WEEKLY_EXAMPLE = {
  mon: [OFFICE],
  tue: [OFFICE],
  wed: [OFFICE],
  thu: [OFFICE],
  fri: [
    { start: '09:00', end: '12:30' },
    { start: '13:30', end: '16:00' },
  ],
  sat: [],
  sun: [],
};

const weeklyHours = z
  .strictObject(Object.fromEntries(WEEKDAYS.map((d) => [d, z.array(interval).max(MAX_INTERVALS_A_DAY).optional()])) as Record<Weekday, z.ZodOptional<z.ZodArray<typeof interval>>>)
  .superRefine((w, ctx) => {
    for (const [day, message] of weeklyProblems(weeklyToMinutes(w))) ctx.addIssue({ code: 'custom', path: [day], message });
  })
  .meta({
    id: 'WeeklyHours',
    description: 'Open hours per weekday in the schedule\'s time zone, as local wall-clock intervals [start, end): several a day for split shifts, in order, not overlapping; `24:00` ends a day (a night shift is 22:00–24:00 one day and 00:00–06:00 the next). A day left out, or `[]`, is closed. At least one interval in the week.',
    examples: [WEEKLY_EXAMPLE],
  });

const localDate = z
  .string()
  .refine((d) => dayOfDate(d) !== undefined, 'a date, YYYY-MM-DD')
  .meta({ examples: ['2025-12-25'] });
const holidays = z.array(localDate).max(MAX_HOLIDAYS).meta({ description: 'Local dates closed all day (besides the iCal feed\'s).', examples: [['2025-12-25', '2025-12-26']] });

const timeZone = z
  .string()
  .max(64)
  .refine(isValidTimeZone, 'an IANA time zone name, such as Europe/Berlin')
  .meta({ description: 'An IANA time zone: the weekly hours and holidays are its local time, across daylight-saving changes.', examples: ['Europe/Berlin'] });
const icalUrl = z
  .url({ protocol: /^(?:https?|webcal)$/ })
  .max(2048)
  .meta({
    description: 'A public iCal holiday feed (https:// or webcal://): the workers read it when it is set and daily after, and take its all-day events (repeating ones for the next three years) as holidays (`ical_holidays`). null removes the feed and its holidays.',
    examples: ['https://calendar.example.com/holidays/de.ics'],
  });
const name = z.string().trim().min(1).max(120).meta({ examples: ['Support desk (Berlin)'] });

export const createScheduleBody = z.strictObject({
  name,
  time_zone: timeZone,
  weekly_hours: weeklyHours,
  holidays: holidays.default([]),
  ical_url: icalUrl.nullable().optional(),
});
export type CreateScheduleInput = z.output<typeof createScheduleBody>;

export const patchScheduleBody = z
  .strictObject({ name: name.optional(), time_zone: timeZone.optional(), weekly_hours: weeklyHours.optional(), holidays: holidays.optional(), ical_url: icalUrl.nullable().optional() })
  .refine((b) => Object.keys(b).length > 0, { message: 'name at least one field to change' });
export type PatchScheduleInput = z.output<typeof patchScheduleBody>;

const at = z.string().meta({ examples: ['2025-03-14T09:26:53.412Z'] });
const EXAMPLE = {
  id: SCHEDULE_ID,
  name: 'Support desk (Berlin)',
  time_zone: 'Europe/Berlin',
  weekly_hours: WEEKLY_EXAMPLE,
  holidays: ['2025-12-24'],
  ical_url: 'https://calendar.example.com/holidays/de.ics',
  ical_holidays: ['2025-12-25', '2025-12-26', '2026-01-01'],
  ical_fetched_at: '2025-03-14T03:00:12.031Z',
  ical_error: null,
  version: '3',
  created_at: '2025-03-01T08:12:40.118Z',
  updated_at: '2025-03-14T03:00:12.031Z',
};

export const schedule = z
  .object({
    id: z.uuid().meta({ examples: [SCHEDULE_ID] }),
    name: z.string(),
    time_zone: z.string(),
    // Every weekday is present in an answer ([] when closed); an object with each key, not a record over an
    // enum, so the document lists the properties it requires.
    weekly_hours: z.object(Object.fromEntries(WEEKDAYS.map((d) => [d, z.array(interval)])) as Record<Weekday, z.ZodArray<typeof interval>>),
    holidays: z.array(z.string()),
    ical_url: z.string().nullable(),
    ical_holidays: z.array(z.string()).meta({ description: 'The dates the iCal feed gave at its last good read (kept when a read fails).' }),
    ical_fetched_at: at.nullable().meta({ description: 'When the feed was last read successfully.' }),
    ical_error: z.string().nullable().meta({ description: 'Why the last read failed (time-out, too large, not iCalendar, an HTTP status), null after a good one.' }),
    version: z.string().meta({ description: 'The strong ETag\'s value: send it in If-Match to PATCH.' }),
    created_at: at,
    updated_at: at,
  })
  .meta({ id: 'Schedule', examples: [EXAMPLE] });
export const scheduleList = z.object({ schedules: z.array(schedule) });
