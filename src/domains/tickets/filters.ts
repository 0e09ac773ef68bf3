import { z } from 'zod';
import { DomainError, refuse, toFieldErrors } from '../../lib/errors';
import { parseTicketQuery, SEARCH_LIMIT_CEILING } from '../search/query';
import { searchParam, ticketFilters, type TicketFilters } from './schemas';

/** The filters a saved view may hold: GET /v1/tickets's, and its search (`q`). */
const viewFilters = ticketFilters.extend({ q: searchParam.optional() });

/**
 * Stored filters (saved views, macro trigger conditions) pass through the very schema GET /v1/tickets uses
 * for its query. Values are kept in their query-string form so a stored view replays as the same request.
 *
 * `search`: whether `q` may be stored (issue 36). A saved view may search ("my open refund tickets"); a macro's
 * trigger condition may not, since it is checked against one ticket as it changes, not run as a list. A stored
 * `q` is parsed now, so a view with a malformed search is refused when saved rather than failing when opened;
 * the deployment's own length and term limits (SEARCH_QUERY_MAX_*) still apply when it is run.
 */
export function checkTicketFilters(raw: Record<string, unknown>, at: string, opts: { search?: boolean } = {}): { stored: Record<string, string>; parsed: TicketFilters & { q?: string } } {
  if (!opts.search && Object.hasOwn(raw, 'q')) {
    throw refuse('filter_unknown', 'A search (q) cannot be stored here: only saved views and GET /v1/tickets search.', [{ path: `${at}.q`, message: 'not a condition here' }]);
  }
  const schema = opts.search ? viewFilters : ticketFilters;
  const known = new Set(Object.keys(schema.shape));
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
  // Read as the larger schema: ticketFilters is viewFilters without q, so q is then never there.
  const parsed = (schema as typeof viewFilters).safeParse(stored);
  const searchErrors = parsed.success ? searchProblems(parsed.data.q, `${at}.q`) : [];
  if (badType.length > 0 || !parsed.success || searchErrors.length > 0) {
    const errors = [
      ...badType.map((k) => ({ path: `${at}.${k}`, message: 'must be a string, number or boolean' })),
      ...(parsed.success ? [] : toFieldErrors(parsed.error, at)),
      ...searchErrors,
    ];
    throw refuse('filter_invalid', 'One or more filter values are not valid for GET /v1/tickets.', errors);
  }
  return { stored, parsed: parsed.data };
}

/** What parsing a stored search finds wrong with it (nothing for no search, or a blank one, which is none). */
function searchProblems(q: string | undefined, path: string) {
  if (q === undefined || q.trim() === '') return [];
  try {
    parseTicketQuery(q, SEARCH_LIMIT_CEILING, path);
    return [];
  } catch (err) {
    if (err instanceof DomainError) return err.extra.errors ?? [{ path, message: err.detail }];
    throw err;
  }
}

/**
 * An object taken as sent. z.record would rebuild it and silently drop a `__proto__` key before the
 * unknown-filter check could refuse it.
 */
export const rawFilterObject = z.custom<Record<string, unknown>>(
  (v) => typeof v === 'object' && v !== null && !Array.isArray(v),
  { message: 'expected an object of GET /v1/tickets filters' },
);
