import type { Db, Executor } from '../../db';
import type { CustomerRow } from '../../db/types';
import { conflict, notFound } from '../../http/errors';
import type { Principal } from '../../http/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import type { CreateCustomerInput } from './schemas';
import * as store from './store';

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

export function createCustomerService(deps: { db: Db }) {
  const { db } = deps;

  async function insert(tx: Executor, tenantId: string, input: CreateCustomerInput) {
    return store.insertCustomer(tx, tenantId, {
      id: newId(),
      display_name: input.display_name,
      email: input.email,
      company: input.company ?? '',
      country: input.country ?? '',
      metadata: JSON.stringify(input.metadata ?? {}),
    });
  }

  return {
    async create(actor: Principal, input: CreateCustomerInput) {
      const row = await insert(db, actor.tenantId, input);
      if (!row) throw conflict('customer_exists', 'A customer with this email already exists in the workspace.');
      return presentCustomer(row);
    },

    /** For ticket creation by email: the existing customer, or a new one named after the address. */
    async findOrCreateByEmail(tx: Executor, tenantId: string, email: string, displayName?: string): Promise<CustomerRow> {
      const existing = await store.findCustomerByEmail(tx, tenantId, email);
      if (existing) return existing;
      const created = await insert(tx, tenantId, { email, display_name: displayName ?? email.split('@')[0]! });
      return created ?? (await store.findCustomerByEmail(tx, tenantId, email))!;
    },

    /** A customer met on a channel: by email when the channel gave one (reusing that customer), else a new one. */
    async createForInbound(tx: Executor, tenantId: string, c: { display_name: string; email?: string }): Promise<CustomerRow> {
      if (c.email) return this.findOrCreateByEmail(tx, tenantId, c.email, c.display_name);
      return (await insert(tx, tenantId, { display_name: c.display_name.slice(0, 200), email: '' }))!;
    },

    createWithHandle: (tx: Executor, tenantId: string, c: { display_name: string; kind: string; handle: string }) =>
      store.insertWithHandle(tx, tenantId, { id: newId(), display_name: c.display_name.slice(0, 200), kind: c.kind, handle: c.handle }),

    exists: async (tx: Executor, tenantId: string, id: string) => (await store.getCustomer(tx, tenantId, id)) !== undefined,

    async get(actor: Principal, id: string) {
      const row = await store.getCustomer(db, actor.tenantId, id);
      if (!row) throw notFound('customer');
      return presentCustomer(row);
    },

    async list(actor: Principal, page: { limit?: number; offset: number }) {
      const [rows, total] = await Promise.all([store.listCustomers(db, actor.tenantId, page), store.countCustomers(db, actor.tenantId)]);
      return { total, limit: page.limit ?? null, offset: page.offset, customers: rows.map(presentCustomer) };
    },
  };
}

export type CustomerService = ReturnType<typeof createCustomerService>;
