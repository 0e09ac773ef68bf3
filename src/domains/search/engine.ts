import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import { withSearchTimeout } from '../../db/search-timeout';
import type { TicketFilters } from '../tickets/schemas';
import type { SearchLimits, TicketQuery } from './query';
import * as store from './store';
import type { TicketHit, TicketSearchPage } from './store';

export type { TicketHit, TicketSearchPage } from './store';

/** Who searches: `assignee:me` is this user (an API key's is its creator's, as for everything else it does). */
export interface SearchViewer {
  userId: string;
}

/**
 * The one seam between the tickets list and a search engine (issue 36). PostgreSQL full-text search is the
 * engine every deployment has (createPgTicketSearch); another (OpenSearch) would implement this interface per
 * deployment, keeping its documents from the outbound events (ticket.created, ticket.updated, message.created)
 * instead of triggers, and reading the page's rows from PostgreSQL by the ids it ranked.
 * docs/decisions/search.md says why PostgreSQL is the default.
 */
export interface TicketSearchEngine {
  /**
   * One page of the workspace's tickets that match `q` and `filters`, never a merged one, in `page.sort` order,
   * read with one extra row (src/lib/paging.ts); `exec` is where the caller's reads go (the replica when routed).
   */
  searchTickets(exec: Db, tenantId: string, q: TicketQuery, filters: TicketFilters, page: TicketSearchPage, viewer: SearchViewer): Promise<TicketHit[]>;
}

/** What the tickets list is given to search with: the engine, and the limits a query is parsed under. */
export interface TicketSearch {
  engine: TicketSearchEngine;
  limits: SearchLimits;
}

/** PostgreSQL full-text search (migration 0038), each search bounded by `timeoutMs` of statement time. */
export function createPgTicketSearch(opts: { timeoutMs: number }): TicketSearchEngine {
  const bound = { timeoutMs: opts.timeoutMs, advice: 'add words or filters to narrow it.' };
  return {
    searchTickets: (exec, tenantId, q, filters, page, viewer) => withSearchTimeout(exec, bound, (tx) => store.searchTickets(tx, tenantId, q, filters, page, viewer.userId)),
  };
}

/** The deployment's ticket search, from its `search` settings. */
export function ticketSearchFromConfig(config: ConfigSection<'search'>): TicketSearch {
  return {
    engine: createPgTicketSearch({ timeoutMs: config.SEARCH_TIMEOUT_MS }),
    limits: { maxChars: config.SEARCH_QUERY_MAX_CHARS, maxTerms: config.SEARCH_QUERY_MAX_TERMS },
  };
}
