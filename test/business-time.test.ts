/**
 * Business time (src/domains/schedules/business-time.ts) against an independent reference: a walk minute by minute,
 * written here, that asks Intl (not Luxon) for each minute's local time in the zone, and checks the weekday, the
 * holidays and the day's intervals. 10,000 generated cases (seeded, so a failure replays): random schedules (split
 * shifts, weekends off, 24-hour days, night shifts ending at 24:00, hours across the daylight-saving change), random
 * holidays, random starts, most of them within days of a daylight-saving change, in three zones (New York, Berlin,
 * and Sydney, whose summer is the northern winter), and a pause in some of them. Each case checks
 * `addBusinessMinutes`, `businessMinutesBetween` and `nextOpenInstant` against the walk, exactly.
 *
 * The walk asks Intl for a UTC hour's offset at its start and at its end, and when they differ (the hour of a
 * change) for every minute of it: exact for any zone that changes its offset at most once an hour, and fast enough
 * to walk some 20 million minutes in a few seconds.
 */
import { addBusinessMinutes, addBusinessMinutesWithin, businessMinutesBetween, compileSchedule, HORIZON_DAYS, nextOpenInstant, reachable, weeklyProblems, type MinuteInterval } from '../src/domains/schedules/business-time';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const ZONES = ['America/New_York', 'Europe/Berlin', 'Australia/Sydney'] as const;

// ------------------------------------------------------------------------------------------- the reference

const formats = new Map<string, Intl.DateTimeFormat>();
/** The zone's UTC offset at an instant, in minutes, from Intl's reading of the wall clock there. */
function intlOffset(zone: string, ms: number): number {
  let f = formats.get(zone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', { timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric' });
    formats.set(zone, f);
  }
  const p = Object.fromEntries(f.formatToParts(new Date(ms)).map((x) => [x.type, x.value]));
  const wall = Date.UTC(Number(p.year), Number(p.month) - 1, Number(p.day), Number(p.hour), Number(p.minute));
  return Math.round((wall - Math.floor(ms / MINUTE) * MINUTE) / MINUTE);
}

interface Case {
  zone: string;
  week: MinuteInterval[][];
  holidays: string[];
  from: number;
  /** Minutes walked from `from`. */
  span: number;
  /** A pause within the span, minutes after `from`: [start, end). */
  pause?: [number, number];
}

/**
 * Walks `span` minutes from `from`: for each minute, whether the schedule counts it (its local time, in the zone,
 * on a day that is not a holiday, within one of its weekday's intervals).
 */
function walk(c: Case): boolean[] {
  const hourOffsets = new Map<number, number | null>();
  const offsetAt = (ms: number): number => {
    const hour = Math.floor(ms / HOUR);
    let known = hourOffsets.get(hour);
    if (known === undefined) {
      const [a, b] = [intlOffset(c.zone, hour * HOUR), intlOffset(c.zone, (hour + 1) * HOUR)];
      known = a === b ? a : null;
      hourOffsets.set(hour, known);
    }
    return known ?? intlOffset(c.zone, ms);
  };
  const holidays = new Set(c.holidays);
  const out: boolean[] = [];
  // The local date's facts, read from a Date once per local date the walk enters.
  let dateStart = NaN;
  let closed = false;
  let intervals: MinuteInterval[] = [];
  for (let i = 0; i < c.span; i++) {
    const t = c.from + i * MINUTE;
    const local = t + offsetAt(t) * MINUTE;
    const midnight = local - (((local % DAY) + DAY) % DAY);
    if (midnight !== dateStart) {
      const d = new Date(midnight);
      dateStart = midnight;
      closed = holidays.has(d.toISOString().slice(0, 10));
      intervals = c.week[(d.getUTCDay() + 6) % 7]!; // Monday 0
    }
    const minute = (local - midnight) / MINUTE;
    out.push(!closed && intervals.some(([a, b]) => a <= minute && minute < b));
  }
  return out;
}

// ------------------------------------------------------------------------------------------- generated cases

/** mulberry32: a small seeded generator, so every run sees the same cases. */
function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  return { next, int, pick: <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]! };
}
type Rng = ReturnType<typeof rng>;

/** Every instant, 2024–2027, at which a zone's offset changes (found hour by hour, then to the minute, with Intl). */
function transitions(zone: string): number[] {
  const out: number[] = [];
  const end = Date.UTC(2028, 0, 1);
  let prev = intlOffset(zone, Date.UTC(2024, 0, 1));
  for (let t = Date.UTC(2024, 0, 1) + HOUR; t <= end; t += HOUR) {
    const o = intlOffset(zone, t);
    if (o === prev) continue;
    let m = t - HOUR;
    while (intlOffset(zone, m) === prev) m += MINUTE;
    out.push(m);
    prev = o;
  }
  return out;
}

const fiveDays = (interval: MinuteInterval[]): MinuteInterval[][] => [0, 1, 2, 3, 4, 5, 6].map((d) => (d < 5 ? interval : []));

/** A random week of one of several shapes; never empty. */
function randomWeek(r: Rng): MinuteInterval[][] {
  const kind = r.pick(['office', 'split', 'allday', 'night', 'dst', 'random', 'random'] as const);
  let week: MinuteInterval[][];
  switch (kind) {
    case 'office': {
      const start = r.int(6 * 60, 10 * 60);
      week = fiveDays([[start, Math.min(1440, start + r.int(4 * 60, 10 * 60))]]);
      if (r.next() < 0.3) week[5] = [[9 * 60, 13 * 60]];
      break;
    }
    case 'split': {
      const a = r.int(7 * 60, 9 * 60);
      const b = r.int(a + 60, 12 * 60 + 30);
      const c = r.int(b + 1, 14 * 60);
      week = fiveDays([
        [a, b],
        [c, r.int(c + 30, 20 * 60)],
      ]);
      break;
    }
    case 'allday':
      week = [0, 1, 2, 3, 4, 5, 6].map(() => (r.next() < 0.6 ? [[0, 1440]] : r.next() < 0.5 ? [] : [[r.int(0, 700), r.int(701, 1440)]]));
      break;
    case 'night':
      // Night shifts: 22:00–24:00 one day, 00:00–06:00 the next.
      week = [0, 1, 2, 3, 4, 5, 6].map(() => (r.next() < 0.8 ? [[0, r.int(180, 420)], [r.int(1200, 1380), 1440]] : []));
      break;
    case 'dst':
      // Hours across the change: the hour that is skipped or repeated lies inside them.
      week = [0, 1, 2, 3, 4, 5, 6].map(() => (r.next() < 0.85 ? [[r.int(0, 120), r.int(150, 300)]] : []));
      break;
    case 'random':
      week = [0, 1, 2, 3, 4, 5, 6].map(() => {
        const cuts = [...new Set(Array.from({ length: 2 * r.int(0, 3) }, () => r.int(0, 1440)))].sort((x, y) => x - y);
        const out: MinuteInterval[] = [];
        for (let i = 0; i + 1 < cuts.length; i += 2) out.push([cuts[i]!, cuts[i + 1]!]);
        return out;
      });
      break;
  }
  if (week.every((d) => d.length === 0)) week[r.int(0, 6)] = [[9 * 60, 17 * 60]];
  return week;
}

function randomCase(r: Rng, changes: Record<string, number[]>): Case {
  const zone = r.pick(ZONES);
  const week = randomWeek(r);
  // Most starts lie within four days of a daylight-saving change; the rest anywhere in 2024–2027.
  const from =
    r.next() < 0.75
      ? r.pick(changes[zone]!) + r.int(-4 * 24 * 60, 4 * 24 * 60) * MINUTE
      : Date.UTC(2024, 0, 1) + r.int(0, 4 * 365 * 24 * 60) * MINUTE;
  // Most walks are short (the suite stays fast), some span up to a week.
  const span = r.next() < 0.9 ? r.int(1, 2 * 24 * 60) : r.int(2 * 24 * 60, 7 * 24 * 60);
  const firstDay = Math.floor(from / DAY);
  const holidays = Array.from({ length: r.int(0, 4) }, () => new Date((firstDay + r.int(-1, Math.ceil(span / 1440) + 1)) * DAY).toISOString().slice(0, 10));
  const c: Case = { zone, week, holidays, from, span };
  if (r.next() < 0.25) {
    const a = r.int(0, span);
    c.pause = [a, r.int(a, span)];
  }
  return c;
}

/** The instant at the end of the minute in which the walk counted its `n`th business minute (n ≥ 1). */
function endOfNth(open: boolean[], from: number, n: number): number | undefined {
  let count = 0;
  for (let i = 0; i < open.length; i++) if (open[i] && ++count === n) return from + (i + 1) * MINUTE;
  return undefined;
}

const schedule = (c: Case) => compileSchedule({ timeZone: c.zone, weekly: c.week, holidays: c.holidays });

describe('business time against a minute-by-minute walk: 10,000 generated cases', () => {
  test('addBusinessMinutes, businessMinutesBetween and nextOpenInstant agree exactly with the walk, pauses included', () => {
    const r = rng(37);
    const changes = Object.fromEntries(ZONES.map((z) => [z, transitions(z)]));
    // The generator reaches what the cases are for: both kinds of change in every zone (Sydney's twice a year too).
    for (const z of ZONES) expect(changes[z]!.length).toBe(8);
    const failures: string[] = [];
    let paused = 0;
    let longest = 0;
    for (let n = 0; n < 10_000 && failures.length < 5; n++) {
      const c = randomCase(r, changes);
      const open = walk(c);
      const s = schedule(c);
      const from = new Date(c.from);
      const total = open.filter(Boolean).length;
      const describe = () => `case ${n}: ${JSON.stringify({ ...c, from: from.toISOString() })}`;
      longest = Math.max(longest, c.span);

      const between = businessMinutesBetween(s, from, new Date(c.from + c.span * MINUTE));
      if (between !== total) failures.push(`${describe()}: between ${between}, walk ${total}`);

      const target = r.int(0, total);
      const due = addBusinessMinutes(s, from, target);
      const expected = target === 0 ? c.from : endOfNth(open, c.from, target)!;
      if (due.getTime() !== expected) failures.push(`${describe()}: +${target} → ${due.toISOString()}, walk ${new Date(expected).toISOString()}`);
      if (businessMinutesBetween(s, from, due) !== target) failures.push(`${describe()}: between(from, from + ${target}) is ${businessMinutesBetween(s, from, due)}`);

      const firstOpen = open.indexOf(true);
      if (firstOpen >= 0 && nextOpenInstant(s, from)!.getTime() !== c.from + firstOpen * MINUTE) {
        failures.push(`${describe()}: next open ${nextOpenInstant(s, from)!.toISOString()}, walk ${new Date(c.from + firstOpen * MINUTE).toISOString()}`);
      }

      if (c.pause) {
        // The resolution clock's pause, as src/domains/tickets/sla.ts runs it: the minutes left at the pause, counted
        // again from the resume. The walk counts the target's minutes, skipping those inside the pause.
        paused += 1;
        const [p0, p1] = c.pause;
        const pauseAt = new Date(c.from + p0 * MINUTE);
        const resumeAt = new Date(c.from + p1 * MINUTE);
        const countable = open.map((o, i) => o && (i < p0 || i >= p1));
        const available = countable.filter(Boolean).length;
        const goal = r.int(0, available);
        const firstDue = addBusinessMinutes(s, from, goal);
        const left = businessMinutesBetween(s, pauseAt, firstDue);
        // Met before the pause: the due time stands. Otherwise the minutes left run again from the resume.
        const resumed = left > 0 ? addBusinessMinutes(s, resumeAt, left) : firstDue;
        const want = goal === 0 ? c.from : endOfNth(countable, c.from, goal)!;
        if (resumed.getTime() !== want) failures.push(`${describe()}: ${goal} paused ${p0}–${p1} → ${resumed.toISOString()}, walk ${new Date(want).toISOString()}`);
      }
    }
    expect(failures).toEqual([]);
    expect(paused).toBeGreaterThan(2000);
    expect(longest).toBeGreaterThan(6 * 24 * 60);
  });
});

// ------------------------------------------------------------------------------------------- named cases

const at = (iso: string) => new Date(iso);
const officeHours = (zone: string, holidays: string[] = []) => compileSchedule({ timeZone: zone, weekly: fiveDays([[9 * 60, 17 * 60]]), holidays });

describe('business time, by example', () => {
  test('Friday 16:30 + 60 business minutes on 9–17 Monday to Friday is Monday 09:30 (and the seconds are kept)', () => {
    const s = officeHours('Europe/Berlin');
    // 2025-03-14 is a Friday; Berlin is UTC+1 in March before the change.
    expect(addBusinessMinutes(s, at('2025-03-14T15:30:00Z'), 60).toISOString()).toBe('2025-03-17T08:30:00.000Z');
    expect(addBusinessMinutes(s, at('2025-03-14T15:30:12.345Z'), 60).toISOString()).toBe('2025-03-17T08:30:12.345Z');
    // Thirty minutes end at closing time, not at Monday's opening.
    expect(addBusinessMinutes(s, at('2025-03-14T15:30:00Z'), 30).toISOString()).toBe('2025-03-14T16:00:00.000Z');
    expect(businessMinutesBetween(s, at('2025-03-14T15:30:00Z'), at('2025-03-17T08:30:00Z'))).toBe(60);
    // Calendar time (no schedule) would have made it 17:30 on the Friday.
    expect(addBusinessMinutes(null, at('2025-03-14T15:30:00Z'), 60).toISOString()).toBe('2025-03-14T16:30:00.000Z');
  });

  test('the API guide\'s example: a split Friday in Berlin, a high ticket at 16:30 is due Monday 09:30 and resolved by Monday 16:30', () => {
    const office: MinuteInterval[] = [[540, 1020]];
    const s = compileSchedule({ timeZone: 'Europe/Berlin', weekly: [office, office, office, office, [[540, 750], [810, 1020]], [], []], holidays: ['2025-12-24'] });
    expect(addBusinessMinutes(s, at('2025-03-14T15:30:00Z'), 60).toISOString()).toBe('2025-03-17T08:30:00.000Z');
    expect(addBusinessMinutes(s, at('2025-03-14T15:30:00Z'), 480).toISOString()).toBe('2025-03-17T15:30:00.000Z');
  });

  test('a holiday is skipped whole: Friday 16:30 + 60 with Monday a holiday is Tuesday 09:30', () => {
    const s = officeHours('America/New_York', ['2025-05-26']);
    // Friday 2025-05-23 16:30 EDT (UTC−4); Memorial Day on Monday.
    expect(addBusinessMinutes(s, at('2025-05-23T20:30:00Z'), 60).toISOString()).toBe('2025-05-27T13:30:00.000Z');
    expect(businessMinutesBetween(s, at('2025-05-23T20:30:00Z'), at('2025-05-27T13:30:00Z'))).toBe(60);
    expect(businessMinutesBetween(s, at('2025-05-26T00:00:00Z'), at('2025-05-27T00:00:00Z'))).toBe(0);
  });

  test('spring forward: 01:00–04:00 lasts two hours; 9–17 is untouched; the day holds 23 hours of 00:00–24:00', () => {
    // New York springs forward on Sunday 2025-03-09 at 02:00 (EST → EDT).
    const week = [0, 1, 2, 3, 4, 5, 6].map(() => [[60, 240]] as MinuteInterval[]);
    const s = compileSchedule({ timeZone: 'America/New_York', weekly: week, holidays: [] });
    expect(businessMinutesBetween(s, at('2025-03-09T05:00:00Z'), at('2025-03-10T05:00:00Z'))).toBe(120);
    // 01:00 EST is 06:00Z; an hour in, the clock jumps to 03:00 EDT (07:00Z), so minute 61 starts at 07:00Z.
    expect(addBusinessMinutes(s, at('2025-03-09T06:00:00Z'), 60).toISOString()).toBe('2025-03-09T07:00:00.000Z');
    expect(addBusinessMinutes(s, at('2025-03-09T06:00:00Z'), 90).toISOString()).toBe('2025-03-09T07:30:00.000Z');
    const allDay = compileSchedule({ timeZone: 'America/New_York', weekly: [0, 1, 2, 3, 4, 5, 6].map(() => [[0, 1440]] as MinuteInterval[]), holidays: [] });
    expect(businessMinutesBetween(allDay, at('2025-03-09T05:00:00Z'), at('2025-03-10T04:00:00Z'))).toBe(23 * 60);
    expect(businessMinutesBetween(officeHours('America/New_York'), at('2025-03-10T00:00:00Z'), at('2025-03-11T00:00:00Z'))).toBe(8 * 60);
  });

  test('fall back: the repeated hour counts twice, so 01:00–04:00 lasts four hours and 00:00–24:00 twenty-five', () => {
    // Berlin falls back on Sunday 2025-10-26 at 03:00 CEST → 02:00 CET (01:00Z).
    const week = [0, 1, 2, 3, 4, 5, 6].map(() => [[60, 240]] as MinuteInterval[]);
    const s = compileSchedule({ timeZone: 'Europe/Berlin', weekly: week, holidays: [] });
    // 01:00 CEST is 23:00Z on the 25th; 04:00 CET is 03:00Z.
    expect(businessMinutesBetween(s, at('2025-10-25T22:00:00Z'), at('2025-10-26T23:00:00Z'))).toBe(240);
    expect(addBusinessMinutes(s, at('2025-10-25T23:00:00Z'), 240).toISOString()).toBe('2025-10-26T03:00:00.000Z');
    const allDay = compileSchedule({ timeZone: 'Europe/Berlin', weekly: [0, 1, 2, 3, 4, 5, 6].map(() => [[0, 1440]] as MinuteInterval[]), holidays: [] });
    expect(businessMinutesBetween(allDay, at('2025-10-25T22:00:00Z'), at('2025-10-26T23:00:00Z'))).toBe(25 * 60);
  });

  test('the southern hemisphere: Sydney springs forward in October and falls back in April', () => {
    const week = [0, 1, 2, 3, 4, 5, 6].map(() => [[0, 1440]] as MinuteInterval[]);
    const s = compileSchedule({ timeZone: 'Australia/Sydney', weekly: week, holidays: [] });
    // 2025-10-05: 02:00 AEST → 03:00 AEDT. The local day runs from 14:00Z on the 4th to 13:00Z on the 5th.
    expect(businessMinutesBetween(s, at('2025-10-04T14:00:00Z'), at('2025-10-05T13:00:00Z'))).toBe(23 * 60);
    // 2025-04-06: 03:00 AEDT → 02:00 AEST. From 13:00Z on the 5th to 14:00Z on the 6th.
    expect(businessMinutesBetween(s, at('2025-04-05T13:00:00Z'), at('2025-04-06T14:00:00Z'))).toBe(25 * 60);
  });

  test('a night shift ending at 24:00 runs into the next day\'s 00:00–06:00 without a gap', () => {
    const week = [0, 1, 2, 3, 4, 5, 6].map(() => [[0, 6 * 60], [22 * 60, 1440]] as MinuteInterval[]);
    const s = compileSchedule({ timeZone: 'Europe/Berlin', weekly: week, holidays: [] });
    // 2025-06-10 22:00 CEST is 20:00Z; eight hours later is 06:00 CEST on the 11th.
    expect(addBusinessMinutes(s, at('2025-06-10T20:00:00Z'), 8 * 60).toISOString()).toBe('2025-06-11T04:00:00.000Z');
  });

  test('the walk is bounded: an hour a week cannot meet a year of minutes, and is refused before walking ten years', () => {
    const week: MinuteInterval[][] = [[[9 * 60, 10 * 60]], [], [], [], [], [], []];
    const s = compileSchedule({ timeZone: 'UTC', weekly: week, holidays: [] });
    const from = at('2025-01-01T00:00:00Z');
    expect(reachable(s, from, 525_600)).toBe(false);
    expect(reachable(s, from, 60 * 500)).toBe(true);
    expect(addBusinessMinutesWithin(s, from, 525_600)).toBeNull();
    // Unreachable, it is due at the end of the horizon: never, in practice.
    expect(addBusinessMinutes(s, from, 525_600).getTime()).toBe(from.getTime() + HORIZON_DAYS * DAY);
    const started = performance.now();
    expect(addBusinessMinutesWithin(s, from, 60 * 600)).toBeNull();
    expect(performance.now() - started).toBeLessThan(2000);
  });

  test('weekly hours are refused when unsorted, overlapping, out of the day or empty', () => {
    const week = (mon: MinuteInterval[]): MinuteInterval[][] => [mon, [], [], [], [], [], []];
    expect(weeklyProblems(week([[540, 720], [780, 1020]]))).toEqual([]);
    expect(weeklyProblems(week([[540, 720], [720, 1020]]))).toEqual([]);
    expect(weeklyProblems(week([[780, 1020], [540, 720]]))).toEqual([['mon', 'intervals must be in order and must not overlap']]);
    expect(weeklyProblems(week([[540, 800], [780, 1020]]))).toEqual([['mon', 'intervals must be in order and must not overlap']]);
    expect(weeklyProblems(week([[600, 600]]))[0]![1]).toMatch(/start before it ends/);
    expect(weeklyProblems(week([[0, 1441]]))[0]![1]).toMatch(/within 00:00–24:00/);
    expect(weeklyProblems(week([]))).toEqual([['mon', 'a schedule needs some open hours in its week']]);
    expect(() => compileSchedule({ timeZone: 'Mars/Olympus_Mons', weekly: week([[0, 60]]), holidays: [] })).toThrow(/unknown time zone/);
  });
});
