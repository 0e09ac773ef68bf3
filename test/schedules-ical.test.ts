/**
 * iCal holiday feeds read into dates (src/domains/schedules/ical.ts), without a server: all-day events, spans, repeats
 * within three years, exceptions and what is left out. The feed's transport (a double serving .ics, a malformed feed,
 * one too large, one that never finishes) is test/schedules.test.ts's.
 */
import { FeedError, feedUrl, holidayDates } from '../src/domains/schedules/ical';
import { icsFeed } from './helpers/ical-feed';

const TODAY = new Date('2025-06-15T10:00:00Z');

describe('holiday dates from an iCalendar feed', () => {
  test('an all-day event closes its date; one spanning days closes each (DTEND exclusive, or DURATION)', () => {
    const feed = icsFeed([
      ['UID:a', 'DTSTART;VALUE=DATE:20251225', 'SUMMARY:Christmas Day'],
      ['UID:b', 'DTSTART;VALUE=DATE:20251229', 'DTEND;VALUE=DATE:20260101', 'SUMMARY:Between the years'],
      ['UID:c', 'DTSTART;VALUE=DATE:20250804', 'DURATION:P2D', 'SUMMARY:Summer bank holiday'],
    ]);
    expect(holidayDates(feed, TODAY)).toEqual(['2025-08-04', '2025-08-05', '2025-12-25', '2025-12-29', '2025-12-30', '2025-12-31']);
  });

  test('a yearly RRULE repeats up to three years ahead (and a year back), less its EXDATEs and moved by its exceptions', () => {
    const feed = icsFeed([
      ['UID:new-year', 'DTSTART;VALUE=DATE:20200101', 'RRULE:FREQ=YEARLY', 'EXDATE;VALUE=DATE:20270101', 'SUMMARY:New Year'],
      ['UID:labour', 'DTSTART;VALUE=DATE:20250501', 'RRULE:FREQ=YEARLY;COUNT=2', 'SUMMARY:Labour Day'],
      ['UID:labour', 'RECURRENCE-ID;VALUE=DATE:20260501', 'DTSTART;VALUE=DATE:20260504', 'SUMMARY:Labour Day (observed)'],
    ]);
    // From 2024-06-15 (a year back) to 2028-06-17 (three years ahead): 2025, 2026 and 2028 (2027 excluded).
    expect(holidayDates(feed, TODAY)).toEqual(['2025-01-01', '2025-05-01', '2026-01-01', '2026-05-04', '2028-01-01']);
  });

  test('timed events and cancelled ones close nothing', () => {
    const feed = icsFeed([
      ['UID:t', 'DTSTART:20251224T120000Z', 'DTEND:20251224T170000Z', 'SUMMARY:Half day'],
      ['UID:x', 'DTSTART;VALUE=DATE:20251124', 'STATUS:CANCELLED', 'SUMMARY:Cancelled'],
      ['UID:y', 'DTSTART;VALUE=DATE:20251126', 'SUMMARY:Kept'],
    ]);
    expect(holidayDates(feed, TODAY)).toEqual(['2025-11-26']);
  });

  test('a feed that is not iCalendar, or not a VCALENDAR, is a FeedError that says so', () => {
    expect(() => holidayDates('<html><body>Not found</body></html>', TODAY)).toThrow(FeedError);
    expect(() => holidayDates('<html><body>Not found</body></html>', TODAY)).toThrow(/not an iCalendar feed/);
    expect(() => holidayDates('BEGIN:VEVENT\r\nDTSTART;VALUE=DATE:20251225\r\nEND:VEVENT\r\n', TODAY)).toThrow(/not a VCALENDAR/);
    expect(() => holidayDates('', TODAY)).toThrow(FeedError);
  });

  test('webcal:// is read as https://', () => {
    expect(feedUrl('webcal://calendar.example.com/holidays.ics')).toBe('https://calendar.example.com/holidays.ics');
    expect(feedUrl('https://calendar.example.com/holidays.ics')).toBe('https://calendar.example.com/holidays.ics');
  });
});
