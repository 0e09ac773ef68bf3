import type { Db } from '../../db';
import type { SavedViewRow } from '../../db/types';
import { insufficientRole, notFound } from '../../lib/errors';
import type { Principal } from '../identity/principal';
import { newId } from '../../lib/ids';
import { iso } from '../../lib/time';
import { roleAtLeast } from '../identity/roles';
import { checkTicketFilters } from '../tickets/filters';
import * as store from './store';

const present = (v: SavedViewRow) => ({
  id: v.id,
  name: v.name,
  filters: v.filters,
  shared: v.shared,
  owner_user_id: v.owner_user_id,
  created_at: iso(v.created_at),
  updated_at: iso(v.updated_at),
});

export function createSavedViewService(deps: { db: Db }) {
  const { db } = deps;
  return {
    async create(actor: Principal, input: { name: string; filters: Record<string, unknown>; shared: boolean }) {
      const { stored } = checkTicketFilters(input.filters, 'body.filters', { search: true });
      const row = await store.insertView(db, actor.tenantId, { id: newId(), owner_user_id: actor.userId, name: input.name, filters: stored, shared: input.shared });
      return present(row);
    },

    async list(actor: Principal) {
      return { saved_views: (await store.listVisible(db, actor.tenantId, actor.userId)).map(present) };
    },

    /** A view you cannot see is 404; a shared view of someone else's is deletable by an admin only. */
    async remove(actor: Principal, id: string) {
      const view = await store.getVisible(db, actor.tenantId, actor.userId, id);
      if (!view) throw notFound('saved view');
      if (view.owner_user_id !== actor.userId && !roleAtLeast(actor.role, 'admin')) throw insufficientRole('admin');
      await store.deleteView(db, actor.tenantId, id);
    },
  };
}

export type SavedViewService = ReturnType<typeof createSavedViewService>;
