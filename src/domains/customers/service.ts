import type { Db, Executor } from '../../db';
import type { ReadRouting } from '../../db/reads';
import type { CustomerRow } from '../../db/types';
import { notFound, refuse } from '../../lib/errors';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import type { CreateCustomerInput } from './schemas';
import type { EventSink } from '../events/types';
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

export function createCustomerService(deps: { db: Db; events?: EventSink; reads?: Pick<ReadRouting, 'forReading'> }) {
  const { db } = deps;
  const reads = deps.reads ?? { forReading: async () => db };

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
  };
}

export type CustomerService = ReturnType<typeof createCustomerService>;
