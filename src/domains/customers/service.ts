import type { ConfigSection } from '../../config';
import type { Db, Executor } from '../../db';
import type { ReadRouting } from '../../db/reads';
import { withSearchTimeout } from '../../db/search-timeout';
import type { CustomerRow } from '../../db/types';
import { notFound, refuse } from '../../lib/errors';
import { pageOf } from '../../lib/paging';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import { MATCH_ORDER, type CreateCustomerInput, type CustomerMatch, type SearchCustomersQuery } from './schemas';
import type { EventSink } from '../events/types';
import { boundedText, isLetterOrDigit, type SearchLimits } from '../search/limits';
import * as store from './store';

/** Whoever wrote in on a channel: their handle of the channel's kind, a display name, an address if the channel gave one. */
export interface Sender {
  kind: string;
  handle: string;
  name: string;
  email?: string;
}

/** One key per person on a channel: an address is case-insensitive, other handles are exact. */
// The kind never contains "|", so the key is unambiguous; it doubles as the sender lock's name.
export const senderKey = (s: Pick<Sender, 'kind' | 'handle'>) => `${s.kind}|${s.kind === 'email' ? s.handle.toLowerCase() : s.handle}`;

export const presentCustomer = (c: CustomerRow) => ({
  id: c.id,
  display_name: c.display_name,
  email: c.email,
  company: c.company,
  country: c.country,
  metadata: c.metadata,
  created_at: iso(c.created_at),
  updated_at: iso(c.updated_at),
});

/** The fewest letters or digits a customer search fragment holds: fewer has no trigram to look up. */
export const MIN_FRAGMENT_CHARS = 3;
/** The most hits a customer search ranks whole (exact, prefix, contains); a broader fragment is walked newest first. */
export const RANKED_HITS_MAX = 2000;
/** The most exact matches one fragment is expected to have (one address, a handle on a few channels). */
const EXACT_HITS_MAX = 100;

/** What a phone number is written with besides its digits. */
const PHONE_PUNCTUATION = new Set([' ', '+', '-', '(', ')', '.', '/']);

/**
 * A customer search's `q` as the store takes it: the fragment (trimmed, inner white space as single spaces) and,
 * when it is written like a phone number (digits and phone punctuation only, at least 3 digits), its digits.
 * Refused: over SEARCH_QUERY_MAX_CHARS characters or SEARCH_QUERY_MAX_TERMS words (search/limits.ts, checked
 * before anything else reads it), fewer than 3 letters or digits (400 query_invalid). Linear in the characters.
 */
export function customerFragment(q: string, limits: SearchLimits): { fragment: string; digits: string | null } {
  const { chars } = boundedText(q, limits);
  let fragment = '';
  let digits = '';
  let counted = 0;
  let phoneLike = true;
  let space = false;
  for (const ch of chars) {
    if (ch.trim() === '') {
      space = fragment !== '';
      continue;
    }
    if (space) fragment += ' ';
    space = false;
    fragment += ch;
    if (ch >= '0' && ch <= '9') digits += ch;
    else if (!PHONE_PUNCTUATION.has(ch)) phoneLike = false;
    if (isLetterOrDigit(ch)) counted += 1;
  }
  if (counted < MIN_FRAGMENT_CHARS) {
    throw refuse('query_invalid', `A customer search needs at least ${MIN_FRAGMENT_CHARS} letters or digits; this one has ${counted}.`, [
      { path: 'q', message: `at least ${MIN_FRAGMENT_CHARS} letters or digits` },
    ]);
  }
  return { fragment, digits: phoneLike && digits.length >= MIN_FRAGMENT_CHARS ? digits : null };
}

export function createCustomerService(deps: { db: Db; events?: EventSink; reads?: Pick<ReadRouting, 'forReading'>; search: ConfigSection<'search'> }) {
  const { db, search } = deps;
  const reads = deps.reads ?? { forReading: async () => db };
  const limits = { maxChars: search.SEARCH_QUERY_MAX_CHARS, maxTerms: search.SEARCH_QUERY_MAX_TERMS };
  const bound = { timeoutMs: search.SEARCH_TIMEOUT_MS, advice: 'use a longer or more distinctive fragment.' };

  /** `customer.created` for each new customer, in the transaction that created it (issue 19). */
  const created = async (tx: Executor, tenantId: string, rows: CustomerRow[]) => {
    if (deps.events && rows.length > 0) await deps.events.emit(tx, tenantId, rows.map((r) => ({ type: 'customer.created' as const, data: presentCustomer(r) })));
  };

  async function insert(tx: Executor, tenantId: string, input: CreateCustomerInput) {
    const row = await store.insertCustomer(tx, tenantId, {
      id: newId(),
      display_name: input.display_name,
      email: input.email,
      company: input.company ?? '',
      country: input.country ?? '',
      metadata: JSON.stringify(input.metadata ?? {}),
    });
    if (row) await created(tx, tenantId, [row]);
    return row;
  }

  return {
    async create(actor: Principal, input: CreateCustomerInput) {
      // A transaction of its own: the customer and its event commit together.
      const row = await db.transaction().execute((tx) => insert(tx, actor.tenantId, input));
      if (!row) throw refuse('customer_exists', 'A customer with this email already exists in the workspace.');
      return presentCustomer(row);
    },

    /** For ticket creation by email: the existing customer, or a new one named after the address. */
    async findOrCreateByEmail(tx: Executor, tenantId: string, email: string, displayName?: string): Promise<CustomerRow> {
      const existing = await store.findCustomerByEmail(tx, tenantId, email);
      if (existing) return existing;
      const created = await insert(tx, tenantId, { email, display_name: displayName ?? email.split('@')[0]! });
      return created ?? (await store.findCustomerByEmail(tx, tenantId, email))!;
    },

    /**
     * The customer behind each sender, created when new, keyed by senderKey. Email senders are found by
     * address; others by their channel handle, and a handle seen for the first time joins the customer with
     * the sender's address when the channel gave one. A few statements for any number of senders; the caller
     * holds the senders' locks, so two first messages from one sender cannot both create a customer.
     */
    async forSenders(tx: Executor, tenantId: string, senders: Sender[]): Promise<Map<string, string>> {
      const unique = [...new Map(senders.map((s) => [senderKey(s), s])).values()];
      const out = new Map<string, string>();
      const byHandle = unique.filter((s) => s.kind !== 'email');
      const known = await store.findHandles(tx, tenantId, byHandle);
      for (const s of byHandle) {
        const id = known.get(store.handleId(s));
        if (id) out.set(senderKey(s), id);
      }
      const unknown = byHandle.filter((s) => !out.has(senderKey(s)));
      const byEmail = [
        ...unique.filter((s) => s.kind === 'email').map((s) => ({ s, email: s.handle })),
        ...unknown.filter((s) => s.email).map((s) => ({ s, email: s.email! })),
      ];
      if (byEmail.length > 0) {
        const found = await store.findByEmails(tx, tenantId, byEmail.map((e) => e.email));
        const missing = [...new Map(byEmail.filter((e) => !found.has(e.email.toLowerCase())).map((e) => [e.email.toLowerCase(), e])).values()];
        if (missing.length > 0) {
          await created(tx, tenantId, await store.insertManyByEmail(tx, tenantId, missing.map((e) => ({ id: newId(), display_name: e.s.name.slice(0, 200), email: e.email }))));
          for (const [k, row] of await store.findByEmails(tx, tenantId, missing.map((e) => e.email))) found.set(k, row);
        }
        for (const e of byEmail) out.set(senderKey(e.s), found.get(e.email.toLowerCase())!.id);
        await store.insertHandles(tx, tenantId, unknown.filter((s) => s.email).map((s) => ({ kind: s.kind, handle: s.handle, customer_id: out.get(senderKey(s))! })));
      }
      const fresh = unknown.filter((s) => !s.email).map((s) => ({ id: newId(), display_name: s.name.slice(0, 200), kind: s.kind, handle: s.handle }));
      await created(tx, tenantId, await store.insertWithHandles(tx, tenantId, fresh));
      for (const f of fresh) out.set(senderKey(f), f.id);
      return out;
    },

    exists: async (tx: Executor, tenantId: string, id: string) => (await store.getCustomer(tx, tenantId, id)) !== undefined,

    async get(actor: Principal, id: string) {
      const row = await store.getCustomer(db, actor.tenantId, id);
      if (!row) throw notFound('customer');
      return presentCustomer(row);
    },

    async list(actor: Principal, page: { limit?: number; offset: number }) {
      const from = await reads.forReading(actor);
      const [rows, total] = await Promise.all([store.listCustomers(from, actor.tenantId, page), store.countCustomers(from, actor.tenantId)]);
      return { total, limit: page.limit ?? null, offset: page.offset, customers: rows.map(presentCustomer) };
    },

    /**
     * Customers by a fragment of their name, email, company or a channel handle (issue 36), in cursor pages. Read
     * like the directory (the replica when routing allows), in a transaction bounded by SEARCH_TIMEOUT_MS.
     *
     * The order: exact matches of the email or a handle, then matches at the start of a word or handle, then the
     * rest, newest first within each. Ranking means reading every hit, so a fragment with more than
     * RANKED_HITS_MAX hits ("gmail") is answered exact matches first and then every other hit newest first, which
     * a walk of the directory's index serves in a few milliseconds however many hits there are. A page's cursor
     * carries its rank, so the next page goes on in the order the first one chose.
     */
    async search(actor: Principal, query: SearchCustomersQuery) {
      const f = customerFragment(query.q, limits);
      const { limit } = query;
      const sort = query.after?.sort as CustomerMatch | undefined;
      const after = query.after && { tier: MATCH_ORDER.indexOf(sort!), key: query.after.key, id: query.after.id };
      const from = await reads.forReading(actor);
      const rows = await withSearchTimeout(from, bound, async (tx) => {
        if (sort !== 'broad') {
          // A ranked search's later pages are ranked whatever the count is now: they continue the first page's order.
          const cap = sort === 'prefix' || sort === 'contains' ? null : RANKED_HITS_MAX;
          const ranked = await store.rankedCustomerHits(tx, actor.tenantId, { ...f, limit, cap, ...(after ? { after } : {}) });
          if (!ranked.broad) return ranked.hits;
        }
        // Broad: the exact matches are few (an address is unique, a handle unique per channel), read whole to be
        // left out of the walk; cursor keys compare as text (fixed-width UTC, lower-case ids), as PostgreSQL orders them.
        const exact = await store.exactCustomerHits(tx, actor.tenantId, { ...f, limit: EXACT_HITS_MAX });
        const shown = sort === 'broad' ? [] : exact.filter((h) => !after || h.page_key < after.key || (h.page_key === after.key && h.id < after.id));
        if (shown.length > limit) return shown;
        const rest = await store.newestCustomerHits(tx, actor.tenantId, {
          ...f,
          limit: limit - shown.length,
          exclude: exact.map((h) => h.id),
          ...(sort === 'broad' && after ? { after } : {}),
        });
        return [...shown, ...rest];
      });
      const last = rows[Math.min(rows.length, limit) - 1];
      return pageOf('customers', rows, limit, MATCH_ORDER[last?.tier ?? 0]!, presentCustomer);
    },
  };
}

export type CustomerService = ReturnType<typeof createCustomerService>;
