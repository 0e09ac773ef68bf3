import type { ConfigSection } from '../../config';
import type { Db, Executor } from '../../db';
import type { ReadRouting } from '../../db/reads';
import { withSearchTimeout } from '../../db/search-timeout';
import type { CustomerRow } from '../../db/types';
import { isUniqueViolation, notFound, refuse, requireVersion, validationFailed, type VersionCondition } from '../../lib/errors';
import { pageOf } from '../../lib/paging';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import { MATCH_ORDER, MAX_HANDLES, type CreateCustomerInput, type CustomerMatch, type PatchCustomerInput, type SearchCustomersQuery } from './schemas';
import type { AuditService } from '../audit/service';
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

/** A customer as the API shows it; `handles` read beside it (empty when the caller did not read them). */
export const presentCustomer = (c: CustomerRow, handles: store.Handle[] = []) => ({
  id: c.id,
  display_name: c.display_name,
  email: c.email,
  company: c.company,
  country: c.country,
  metadata: c.metadata,
  phone: c.phone,
  notes: c.notes,
  locale: c.locale,
  time_zone: c.time_zone,
  handles: handles.map((h) => ({ kind: h.kind, handle: h.handle })),
  version: Number(c.version),
  erased_at: c.erased_at ? iso(c.erased_at) : null,
  created_at: iso(c.created_at),
  updated_at: iso(c.updated_at),
});

/** A handle as stored: an address lower-cased (intake compares addresses case-insensitively), the rest as sent. */
export const normalHandle = (h: store.Handle): store.Handle => ({ kind: h.kind, handle: h.kind === 'email' ? h.handle.toLowerCase() : h.handle });

/** The most customers a duplicates suggestion lists. */
export const DUPLICATES_MAX = 20;

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

/** 409 customer_merged: the customer was merged away; the detail names the survivor. */
const mergedAway = (id: string, into: string) => refuse('customer_merged', `Customer ${id} was merged into ${into}; use ${into}.`);

/** Why a customer id was not found: merged away (409 naming the survivor) or unknown (404). */
export async function missingCustomer(db: Executor, tenantId: string, id: string) {
  const merge = await store.mergeOf(db, tenantId, id);
  return merge ? mergedAway(id, merge.merged_into_id) : notFound('customer');
}

/** The senders' lock names (senderKey) of a customer: its handles, and its address as an email sender. */
async function senderKeysOf(db: Executor, tenantId: string, id: string): Promise<string[]> {
  const c = await store.getCustomer(db, tenantId, id);
  const handles = (await store.handlesOf(db, tenantId, [id])).get(id) ?? [];
  return [...handles.map(senderKey), ...(c && c.email !== '' ? [senderKey({ kind: 'email', handle: c.email })] : [])];
}

export function createCustomerService(deps: {
  db: Db;
  events?: EventSink;
  audit?: Pick<AuditService, 'record'>;
  reads?: Pick<ReadRouting, 'forReading'>;
  search: ConfigSection<'search'>;
}) {
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
      const row = await db.transaction().execute(async (tx) => {
        // An address a merge gave another customer as an extra email handle is that person's.
        if ((await store.findByEmailHandle(tx, actor.tenantId, [input.email])).size > 0) return undefined;
        return insert(tx, actor.tenantId, input);
      });
      if (!row) throw refuse('customer_exists', 'A customer with this email already exists in the workspace.');
      return presentCustomer(row);
    },

    /** For ticket creation by email: the existing customer, or a new one named after the address. */
    async findOrCreateByEmail(tx: Executor, tenantId: string, email: string, displayName?: string): Promise<CustomerRow> {
      const existing = await store.findCustomerByEmail(tx, tenantId, email);
      if (existing) return existing;
      // An address a merge gave to its survivor as an extra email handle threads to the survivor.
      const holder = (await store.findByEmailHandle(tx, tenantId, [email])).get(email.toLowerCase());
      if (holder) return (await store.getCustomer(tx, tenantId, holder))!;
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
        // Addresses held as extra email handles (given to a merge's survivor) thread to their holder.
        const held = await store.findByEmailHandle(tx, tenantId, byEmail.filter((e) => !found.has(e.email.toLowerCase())).map((e) => e.email));
        const holders = await store.customersByIds(tx, tenantId, [...new Set(held.values())]);
        for (const [address, holder] of held) found.set(address, holders.get(holder)!);
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

    /** One customer with its handles and version. */
    async get(actor: Principal, id: string) {
      const row = await store.getCustomer(db, actor.tenantId, id);
      if (!row) throw notFound('customer');
      return presentCustomer(row, (await store.handlesOf(db, actor.tenantId, [id])).get(id));
    },

    /** A read of a customer's id: the customer, or (301-like) where a merged-away customer went. */
    async read(actor: Principal, id: string) {
      const row = await store.getCustomer(db, actor.tenantId, id);
      if (row) return presentCustomer(row, (await store.handlesOf(db, actor.tenantId, [id])).get(id));
      const merge = await store.mergeOf(db, actor.tenantId, id);
      if (!merge) throw notFound('customer');
      return { id, merged_into_id: merge.merged_into_id, merged_at: iso(merge.merged_at) };
    },

    async list(actor: Principal, page: { limit?: number; offset: number }) {
      const from = await reads.forReading(actor);
      const [rows, total] = await Promise.all([store.listCustomers(from, actor.tenantId, page), store.countCustomers(from, actor.tenantId)]);
      const handles = await store.handlesOf(from, actor.tenantId, rows.map((r) => r.id));
      return { total, limit: page.limit ?? null, offset: page.offset, customers: rows.map((r) => presentCustomer(r, handles.get(r.id))) };
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
      const handles = await store.handlesOf(from, actor.tenantId, rows.slice(0, limit).map((r) => r.id));
      return pageOf('customers', rows, limit, MATCH_ORDER[last?.tier ?? 0]!, (r) => presentCustomer(r, handles.get(r.id)));
    },

    /**
     * PATCH /v1/customers/{id} (issue 38): the profile fields sent, under the customer's row lock, refused with
     * nothing written on a stale If-Match. The address stays unique per workspace ignoring case, against other
     * customers' addresses and their extra email handles alike; handles sent replace the customer's, and a
     * handle (or the phone, held as a phone handle) that another customer holds is refused: merge them instead.
     * The customer's tickets' search documents follow its name, address and handles in the same transaction.
     */
    async patch(actor: Principal, id: string, input: PatchCustomerInput, ifMatch?: VersionCondition) {
      const tenantId = actor.tenantId;
      const { row, handles } = await db.transaction().execute(async (tx) => {
        const [current] = await store.lockCustomers(tx, tenantId, [id]);
        if (!current) throw await missingCustomer(tx, tenantId, id);
        if (current.erased_at) throw refuse('customer_erased', 'This customer was erased; an erased customer cannot be changed.');
        requireVersion(ifMatch, 'customer', Number(current.version));
        const before = (await store.handlesOf(tx, tenantId, [id])).get(id)!;
        const email = input.email === undefined ? undefined : (input.email ?? '');
        if (email && email.toLowerCase() !== current.email.toLowerCase()) {
          const holder = (await store.findByEmailHandle(tx, tenantId, [email])).get(email.toLowerCase());
          if (holder && holder !== id) throw refuse('customer_exists', 'Another customer holds this email address; merge the two customers instead.');
        }
        let wanted = input.handles ? input.handles.map(normalHandle) : before;
        const phone = input.phone === undefined ? undefined : (input.phone ?? '');
        if (phone) wanted = [...wanted, { kind: 'phone', handle: phone }];
        // Distinct by kind and handle; the customer's own address is not also an email handle.
        const target = [...new Map(wanted.map((h) => [store.handleId(h), h])).values()].filter(
          (h) => !(h.kind === 'email' && h.handle === (email ?? current.email).toLowerCase()),
        );
        if (target.length > MAX_HANDLES) throw validationFailed([{ path: 'handles', message: `at most ${MAX_HANDLES} handles` }]);
        const handlesChanged = target.length !== before.length || target.some((h) => !before.some((b) => store.handleId(b) === store.handleId(h)));
        if (handlesChanged) {
          const holders = await store.findHandles(tx, tenantId, target);
          const taken = target.find((h) => { const holder = holders.get(store.handleId(h)); return holder !== undefined && holder !== id; });
          if (taken) throw refuse('handle_taken', `A ${taken.kind} handle sent belongs to customer ${holders.get(store.handleId(taken))}; merge the two customers instead.`);
          await store.replaceHandles(tx, tenantId, id, target);
        }
        const change: store.CustomerChange = {
          ...(input.display_name !== undefined ? { display_name: input.display_name } : {}),
          ...(email !== undefined ? { email } : {}),
          ...(phone !== undefined ? { phone } : {}),
          ...(input.notes !== undefined ? { notes: input.notes } : {}),
          ...(input.locale !== undefined ? { locale: input.locale ?? '' } : {}),
          ...(input.time_zone !== undefined ? { time_zone: input.time_zone ?? '' } : {}),
          ...(input.company !== undefined ? { company: input.company } : {}),
          ...(input.country !== undefined ? { country: input.country ?? '' } : {}),
          ...(input.metadata !== undefined ? { metadataPatch: input.metadata } : {}),
        };
        const row = await store.updateCustomer(tx, tenantId, id, change).catch((err: unknown) => {
          if (isUniqueViolation(err)) throw refuse('customer_exists', 'A customer with this email already exists in the workspace.');
          throw err;
        });
        const handles = handlesChanged ? (await store.handlesOf(tx, tenantId, [id])).get(id)! : before;
        if (handlesChanged || row.display_name !== current.display_name || row.email !== current.email) await store.reindexTicketsOf(tx, tenantId, id);
        const view = presentCustomer(row, handles);
        if (deps.events) await deps.events.emit(tx, tenantId, [{ type: 'customer.updated', data: view }]);
        return { row, handles };
      });
      return presentCustomer(row, handles);
    },

    /**
     * POST /v1/customers/{id}/merge (issue 38): `id` into `into`, in one transaction. The senders' locks of
     * `id`'s handles and address are taken first (as intake takes them), so a message from any of them either
     * committed before (its ticket moves with the rest) or reads the survivor after; then both rows, in id
     * order. A merge in the opposite direction at the same time waits for the first and finds its source or
     * target gone: 409 customer_merged. Repeating a merge that is done answers the survivor again.
     */
    async merge(actor: Principal, id: string, intoId: string) {
      const tenantId = actor.tenantId;
      if (id === intoId) throw refuse('merge_self', 'A customer cannot be merged into itself.');
      const result = await db.transaction().execute(async (tx) => {
        const done = await store.mergeOf(tx, tenantId, id);
        if (done) {
          if (done.merged_into_id === intoId) return { row: undefined, moved: [] as string[], again: true };
          throw mergedAway(id, done.merged_into_id);
        }
        const keys = await senderKeysOf(tx, tenantId, id);
        await store.lockSenderKeys(tx, tenantId, keys);
        const rows = await store.lockCustomers(tx, tenantId, [id, intoId]);
        const from = rows.find((r) => r.id === id);
        const into = rows.find((r) => r.id === intoId);
        if (!from) throw await missingCustomer(tx, tenantId, id);
        if (!into) throw await missingCustomer(tx, tenantId, intoId);
        if (from.erased_at || into.erased_at) throw refuse('customer_erased', 'An erased customer cannot be merged.');
        const moved = await store.mergeInto(tx, tenantId, from, into);
        // The survivor's empty fields take the merged-away person's; its own are kept.
        const row = await store.updateCustomer(tx, tenantId, into.id, {
          ...(into.phone === '' && from.phone !== '' ? { phone: from.phone } : {}),
          ...(into.company === '' && from.company !== '' ? { company: from.company } : {}),
          ...(into.country === '' && from.country !== '' ? { country: from.country } : {}),
          ...(into.locale === '' && from.locale !== '' ? { locale: from.locale } : {}),
          ...(into.time_zone === '' && from.time_zone !== '' ? { time_zone: from.time_zone } : {}),
          ...(from.notes !== '' ? { notes: into.notes === '' ? from.notes : `${into.notes}\n\n${from.notes}`.slice(0, 10_000) } : {}),
          ...(into.email === '' && from.email !== '' ? { email: from.email } : {}),
          metadataPatch: Object.fromEntries(Object.entries(from.metadata).filter(([k]) => !(k in into.metadata))),
        });
        await store.reindexTickets(tx, tenantId, moved);
        const handles = (await store.handlesOf(tx, tenantId, [into.id])).get(into.id)!;
        const view = presentCustomer(row, handles);
        if (deps.events) await deps.events.emit(tx, tenantId, [{ type: 'customer.merged', data: { id, merged_into_id: into.id, tickets_moved: moved.length, customer: view } }]);
        if (deps.audit) await deps.audit.record(tx, actor, 'customer.merged', { type: 'customer', id }, { merged_into_id: into.id, tickets_moved: moved.length });
        return { row, handles, moved, again: false };
      });
      if (result.again) return this.get(actor, intoId);
      return presentCustomer(result.row!, result.handles);
    },

    /** GET /v1/customers/{id}/duplicates: who may be the same person (shared address, phone, or name at one domain). */
    async duplicates(actor: Principal, id: string) {
      const from = await reads.forReading(actor);
      const c = await store.getCustomer(from, actor.tenantId, id);
      if (!c) throw await missingCustomer(from, actor.tenantId, id);
      const own = (await store.handlesOf(from, actor.tenantId, [id])).get(id)!;
      const hits = await store.duplicatesOf(from, actor.tenantId, c, own, DUPLICATES_MAX);
      const rows = await store.customersByIds(from, actor.tenantId, hits.map((h) => h.id));
      const handles = await store.handlesOf(from, actor.tenantId, hits.map((h) => h.id));
      return {
        customers: hits.flatMap((h) => {
          const r = rows.get(h.id);
          return r ? [{ customer: presentCustomer(r, handles.get(h.id)), reasons: h.reasons as ('email' | 'phone' | 'name_domain')[] }] : [];
        }),
      };
    },
  };
}

export type CustomerService = ReturnType<typeof createCustomerService>;
