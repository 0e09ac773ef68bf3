import { sql, type RawBuilder } from 'kysely';
import type { Executor } from '../../db';
import type { TicketRow } from '../../db/types';
import { pageKey, pastCursor } from '../../db/keyset';
import type { Cursor } from '../../lib/paging';
import type { TicketFilters, TicketSort } from '../tickets/schemas';
import { filteredTickets, timeKeyset } from '../tickets/store';
import { isPrefixable, type FromFragment, type TicketQuery, type WordTerm } from './query';

/**
 * Ticket search in PostgreSQL (issue 36): the SQL behind the engine in engine.ts. The tsquery is built from bound
 * parameters only, one term at a time, through PostgreSQL's own parsers of plain text (plainto_tsquery,
 * phraseto_tsquery); caller text is never spliced into tsquery syntax. A term matches under either
 * configuration (hd_english for stems, hd_simple for words as written; migration 0038 has both).
 */

export interface TicketSearchPage {
  limit: number;
  sort: TicketSort;
  after?: Cursor;
}

/** One ticket a search found, with the key its page is cut by (the rank under relevance, else the sort's time). */
export type TicketHit = TicketRow & { page_key: string };

/** A word under both configurations; the simple half reads '-' and '+' as spaces, as the documents were indexed. */
function wordQuery(w: WordTerm): RawBuilder<string> {
  // A prefix is letters and digits only (checked again here): nothing in it can be read as tsquery syntax, so
  // `:*` appended to it is the whole of what to_tsquery is given to parse.
  if (w.prefix && isPrefixable(w.text)) {
    return sql`(to_tsquery('hd_english', ${w.text}::text || ':*') || to_tsquery('hd_simple', ${w.text}::text || ':*'))`;
  }
  return sql`(plainto_tsquery('hd_english', ${w.text}::text) || plainto_tsquery('hd_simple', translate(${w.text}::text, '-+', '  ')))`;
}

const phraseQuery = (p: string): RawBuilder<string> =>
  sql`(phraseto_tsquery('hd_english', ${p}::text) || phraseto_tsquery('hd_simple', translate(${p}::text, '-+', '  ')))`;

/** `%fragment%` for LIKE, its own `%`, `_` and `\` matched literally (backslash is LIKE's default escape). */
function containing(fragment: string): string {
  let out = '%';
  for (const c of fragment) out += c === '%' || c === '_' || c === '\\' ? `\\${c}` : c;
  return `${out}%`;
}

/** The same for text folded in SQL (lower case, no accents): escaped after folding, in SQL too. */
const containingFolded = (fragment: string) =>
  sql`'%' || replace(replace(replace(search_customer_fold(${fragment}::text), '\\', '\\\\'), '%', '\\%'), '_', '\\_') || '%'`;

/**
 * The customers a `from:` names (any of its fragments): their name, email or company, or one of their handles,
 * holds the fragment (folded: case and accents ignored); a phone fragment also matches a phone handle by its
 * digits (`415-555` finds +14155550100). The expressions are the ones migration 0039 indexes with trigrams (led
 * by the workspace), so each branch is an index scan however many customers the workspace has.
 */
function fromCustomers(tenantId: string, fragments: FromFragment[]): RawBuilder<boolean> {
  const people = fragments.map((f) => sql`search_customer_fold(c.display_name || ' ' || c.email || ' ' || c.company) LIKE ${containingFolded(f.text)}`);
  const handles = fragments.map((f) => sql`search_customer_fold(h.handle) LIKE ${containingFolded(f.text)}`);
  const phones = fragments.flatMap((f) => (f.digits ? [sql`search_phone_digits(h.handle) LIKE ${containing(f.digits)}`] : []));
  return sql<boolean>`tickets.customer_id IN (
    SELECT c.id FROM customers c WHERE c.tenant_id = ${tenantId} AND (${sql.join(people, sql` OR `)})
    UNION
    SELECT h.customer_id FROM customer_handles h WHERE h.tenant_id = ${tenantId} AND (${sql.join(handles, sql` OR `)})
    ${phones.length > 0 ? sql`UNION SELECT h.customer_id FROM customer_handles h WHERE h.tenant_id = ${tenantId} AND h.kind IN ('phone', 'whatsapp_id') AND (${sql.join(phones, sql` OR `)})` : sql``})`;
}

/**
 * One page of the workspace's tickets matching the query and the list filters, read with one extra row
 * (src/lib/paging.ts). `tx` is the engine's read-only transaction under the search's statement timeout
 * (src/db/search-timeout.ts).
 */
export async function searchTickets(tx: Executor, tenantId: string, q: TicketQuery, f: TicketFilters, page: TicketSearchPage, viewerId: string): Promise<TicketHit[]> {
  const positive = [...q.words.map(wordQuery), ...q.phrases.map(phraseQuery)];
  const negative = [...q.excludedWords.map((text) => wordQuery({ text, prefix: false })), ...q.excludedPhrases.map(phraseQuery)];
  // Every word and phrase must match; a ticket matching any excluded one is left out.
  const matches = positive.length > 0 ? sql<string>`(${sql.join(positive, sql` && `)})` : null;
  const excluded = negative.length > 0 ? sql<string>`(${sql.join(negative, sql` || `)})` : null;

  // Merged tickets never: their events were copied to the winner, whose document holds their text.
  let base = filteredTickets(tx, tenantId, f).where('tickets.status', '!=', 'merged');
  if (q.statuses.length > 0) base = base.where('tickets.status', 'in', q.statuses);
  if (q.channels.length > 0) base = base.where('tickets.source', 'in', q.channels);
  if (q.tags.length > 0) base = base.where(sql<boolean>`tickets.tags @> ARRAY[${sql.join(q.tags)}]::text[]`);
  if (q.assignees.length > 0) {
    const ids = [...new Set(q.assignees.flatMap((a) => (a.kind === 'me' ? [viewerId] : a.kind === 'user' ? [a.id] : [])))];
    const unassigned = q.assignees.some((a) => a.kind === 'none');
    base = base.where(
      sql<boolean>`(${ids.length > 0 ? sql`tickets.assignee_id IN (${sql.join(ids)})` : sql`false`} OR ${unassigned ? sql`tickets.assignee_id IS NULL` : sql`false`})`,
    );
  }
  if (q.before) base = base.where('tickets.created_at', '<', q.before);
  if (q.after) base = base.where('tickets.created_at', '>=', q.after);
  if (q.from.length > 0) base = base.where(fromCustomers(tenantId, q.from));

  // Words or phrases: the document is joined (its GIN index leads with the workspace). Exclusions alone only
  // check the documents of the tickets the other filters chose (a negated tsquery cannot use the index).
  let searched = base;
  if (matches) {
    // Typed as the plain statement: the document is only ever named in raw SQL below (as `s`).
    searched = base
      .innerJoin('ticket_search as s', (j) => j.onRef('s.tenant_id', '=', 'tickets.tenant_id').onRef('s.ticket_id', '=', 'tickets.id'))
      .where(sql<boolean>`s.doc @@ ${matches}`) as unknown as typeof base;
    if (excluded) searched = searched.where(sql<boolean>`NOT (s.doc @@ ${excluded})`);
  } else if (excluded) {
    searched = base.where(sql<boolean>`NOT EXISTS (SELECT 1 FROM ticket_search s WHERE s.tenant_id = tickets.tenant_id AND s.ticket_id = tickets.id AND s.doc @@ ${excluded})`);
  }

  if (page.sort === 'relevance') {
    // The rank is computed once per matching ticket: OFFSET 0 keeps the inner statement from being merged into
    // the outer one, which would compute it again for the page key and the cursor's comparison.
    const ranked = searched
      .select((matches ? sql<number>`ts_rank_cd(s.doc, ${matches})` : sql<number>`0::real`).as('rank'))
      .offset(0)
      .as('r');
    let outer = tx.selectFrom(ranked).selectAll('r').select(sql<string>`r.rank::text`.as('page_key'));
    if (page.after) outer = outer.where(sql<boolean>`(r.rank, r.id) < (${page.after.key}::real, ${page.after.id}::uuid)`);
    // Best first; among equals the newest (ids are time-ordered, src/lib/ids.ts).
    const rows = await outer.orderBy('r.rank', 'desc').orderBy('r.id', 'desc').limit(page.limit + 1).execute();
    return rows as unknown as TicketHit[];
  }

  const keyset = timeKeyset(page.sort);
  // The time orders' columns are the ticket's (ticket_search has none of them), so the keyset names them bare.
  let timed = searched.select(pageKey(keyset).as('page_key'));
  if (page.after) timed = timed.where(pastCursor(keyset, page.after));
  const rows = await timed.orderBy(sql.ref(keyset.key), keyset.direction).orderBy('tickets.id', keyset.direction).limit(page.limit + 1).execute();
  return rows as unknown as TicketHit[];
}
