import { z } from 'zod';
import { refuse, toFieldErrors } from '../../lib/errors';
import { ticketFilters, type TicketFilters } from './schemas';

/**
 * Stored filters (saved views, macro trigger conditions) pass through the very schema GET /v1/tickets uses
 * for its query. Values are kept in their query-string form so a stored view replays as the same request.
 */
export function checkTicketFilters(raw: Record<string, unknown>, at: string): { stored: Record<string, string>; parsed: TicketFilters } {
  const known = new Set(Object.keys(ticketFilters.shape));
  const unknown = Object.keys(raw).filter((k) => !known.has(k));
  if (unknown.length > 0) {
    throw refuse(
      'filter_unknown',
      `GET /v1/tickets does not understand the filter(s) ${unknown.join(', ')}.`,
      unknown.map((k) => ({ path: `${at}.${k}`, message: 'unknown filter' })),
    );
  }
  const stored: Record<string, string> = {};
  const badType: string[] = [];
  for (const [k, v] of Object.entries(raw)) {
    if (typeof v === 'string') stored[k] = v;
    else if (typeof v === 'boolean' || typeof v === 'number') stored[k] = String(v);
    else badType.push(k);
  }
  const parsed = ticketFilters.safeParse(stored);
  if (badType.length > 0 || !parsed.success) {
    const errors = [
      ...badType.map((k) => ({ path: `${at}.${k}`, message: 'must be a string, number or boolean' })),
      ...(parsed.success ? [] : toFieldErrors(parsed.error, at)),
    ];
    throw refuse('filter_invalid', 'One or more filter values are not valid for GET /v1/tickets.', errors);
  }
  return { stored, parsed: parsed.data };
}

/**
 * An object taken as sent. z.record would rebuild it and silently drop a `__proto__` key before the
 * unknown-filter check could refuse it.
 */
export const rawFilterObject = z.custom<Record<string, unknown>>(
  (v) => typeof v === 'object' && v !== null && !Array.isArray(v),
  { message: 'expected an object of GET /v1/tickets filters' },
);
