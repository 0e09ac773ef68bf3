import ICAL from 'ical.js';
import { getBounded, type AddressPolicy } from '../webhook-endpoints/transport';
import { dateOfDay, dayOfDate } from './business-time';

/**
 * A schedule's iCal holiday feed (issue 37), read by the workers: fetched under the outbound address guard, parsed
 * with ical.js into the local dates it closes. What counts is an all-day event (`DTSTART;VALUE=DATE`), every day
 * from its start to its end (DTEND exclusive, or DURATION; one day without either), repeated by its RRULE / RDATE
 * (less EXDATE, moved by its RECURRENCE-ID exceptions) from a year back to three years ahead. Timed events are left
 * out (a holiday closes whole days) and so are cancelled ones. docs/decisions/business-time.md says why.
 */

/** How far back and ahead a feed's dates are kept: open tickets reach back, due times reach ahead. */
const BACK_DAYS = 366;
const AHEAD_DAYS = 3 * 366;
/** A repeating event is followed at most this many times (a daily rule over four years is 1,461). */
const MAX_OCCURRENCES = 2000;

/** Why a feed gave no dates, worded for the schedule's `ical_error`. */
export class FeedError extends Error {
  override name = 'FeedError';
}

const dayOfTime = (t: ICAL.Time): number => dayOfDate(`${String(t.year).padStart(4, '0')}-${String(t.month).padStart(2, '0')}-${String(t.day).padStart(2, '0')}`)!;

/** The local dates an iCalendar text closes, sorted, within [today − a year, today + three years]. */
export function holidayDates(text: string, today: Date): string[] {
  let root: ICAL.Component;
  try {
    const parsed: unknown = ICAL.parse(text);
    // A feed is one VCALENDAR; ical.js answers several as an array.
    root = new ICAL.Component((Array.isArray(parsed) && Array.isArray(parsed[0]) ? parsed[0] : parsed) as unknown[]);
  } catch (err) {
    throw new FeedError(`not an iCalendar feed: ${(err as Error).message}`);
  }
  if (root.name !== 'vcalendar') throw new FeedError(`not an iCalendar feed: it holds ${root.name ? `a ${String(root.name).toUpperCase()}` : 'nothing'}, not a VCALENDAR`);
  const first = Math.floor(today.getTime() / 86_400_000) - BACK_DAYS;
  const last = first + BACK_DAYS + AHEAD_DAYS;
  const days = new Set<number>();
  const close = (start: number, end: number) => {
    for (let d = Math.max(start, first); d < Math.min(end, last + 1); d++) days.add(d);
  };
  try {
    for (const component of root.getAllSubcomponents('vevent')) {
      const event = new ICAL.Event(component);
      // Exceptions are read through their series (getOccurrenceDetails), not on their own.
      if (event.isRecurrenceException()) continue;
      if (String(component.getFirstPropertyValue('status') ?? '').toUpperCase() === 'CANCELLED') continue;
      if (!event.startDate || !event.startDate.isDate) continue;
      if (!event.isRecurring()) {
        close(dayOfTime(event.startDate), Math.max(dayOfTime(event.endDate), dayOfTime(event.startDate) + 1));
        continue;
      }
      const expansion = event.iterator();
      for (let n = 0; n < MAX_OCCURRENCES; n++) {
        const next = expansion.next();
        if (!next) break;
        const details = event.getOccurrenceDetails(next);
        const start = dayOfTime(details.startDate);
        if (start > last) break;
        if (details.item.component.getFirstPropertyValue('status')?.toString().toUpperCase() === 'CANCELLED') continue;
        if (details.startDate.isDate) close(start, Math.max(dayOfTime(details.endDate), start + 1));
      }
    }
  } catch (err) {
    if (err instanceof FeedError) throw err;
    throw new FeedError(`the feed could not be read: ${(err as Error).message}`);
  }
  return [...days].sort((a, b) => a - b).map(dateOfDay);
}

/** `webcal://` is how calendar apps spell an https feed. */
export const feedUrl = (url: string): string => (url.startsWith('webcal://') ? `https://${url.slice('webcal://'.length)}` : url);

/**
 * Reads a feed's text: an https URL (or http on loopback where the deployment allows it), every address checked
 * (src/domains/webhook-endpoints/transport.ts), within `timeoutMs` and `maxBytes`. Any other answer than a 200 is
 * a FeedError naming it.
 */
export async function readFeed(url: string, opts: { timeoutMs: number; maxBytes: number; policy: AddressPolicy }): Promise<string> {
  let answer;
  try {
    answer = await getBounded(feedUrl(url), { ...opts, headers: { accept: 'text/calendar, */*;q=0.5', 'user-agent': 'helpdesk-schedules/1' } });
  } catch (err) {
    const e = err as Error & { code?: string };
    if (e.name === 'TimeoutError') throw new FeedError(`the feed did not answer within ${opts.timeoutMs} ms`);
    if (e.name === 'TooLargeError') throw new FeedError(`the feed is larger than ${opts.maxBytes} bytes (SCHEDULE_ICAL_MAX_BYTES)`);
    if (e.code === 'EADDRNOTALLOWED') throw new FeedError('the feed\'s host resolves to an address this deployment does not read from (loopback, private or special-purpose)');
    throw new FeedError(`the feed could not be reached: ${e.code ?? e.message}`);
  }
  if (answer.status !== 200) throw new FeedError(`the feed answered HTTP ${answer.status}${answer.status >= 300 && answer.status < 400 ? ' (a redirect: give the URL it leads to)' : ''}`);
  return answer.body.toString('utf8');
}
