import type { Db, Executor } from '../../db';
import { newId } from '../../lib/ids';
import { encodeCursor } from '../../lib/paging';
import { iso } from '../../lib/time';
import type { Principal } from '../identity/principal';
import { crossTenantListIds } from '../workspaces/store';
import { EVENT_LOG_SORT, type EventLogQuery } from './schemas';
import * as store from './store';
import type { EventSink, NewOutboundEvent } from './types';

export function createEventService(deps: { db: Db }) {
  const { db } = deps;

  const present = (r: { id: string; type: string; occurred_at: Date; tenant_id: string; data: unknown }) => ({
    id: r.id,
    type: r.type,
    occurred_at: iso(r.occurred_at),
    tenant_id: r.tenant_id,
    data: r.data as Record<string, unknown>,
  });

  const sink: EventSink = {
    /** In the caller's transaction: the events commit, or roll back, with the change that caused them. */
    async emit(tx: Executor, tenantId: string, events: NewOutboundEvent[]) {
      await store.insertEvents(
        tx,
        tenantId,
        events.map((e) => ({ id: newId(), type: e.type, ticket_id: e.ticketId ?? null, data: JSON.stringify(e.data) })),
      );
    },
  };

  return {
    ...sink,
    present,

    /**
     * A page of the log. Unlike a list, a log is tailed: `next_cursor` always says where to resume (past the
     * last event shown, or where the caller was when nothing new has committed), and `has_more` says
     * whether more is there now. It is null only for an empty log read from its start.
     */
    async list(actor: Principal, q: EventLogQuery) {
      const rows = await store.listEvents(db, actor.tenantId, q);
      const shown = rows.slice(0, q.limit);
      const last = shown.at(-1);
      const next = last ? encodeCursor({ sort: EVENT_LOG_SORT, key: last.page_key, id: last.id }) : q.after ? encodeCursor(q.after) : null;
      return { events: shown.map(present), next_cursor: next, has_more: rows.length > q.limit };
    },

    /** Retention sweep (maintenance worker): each workspace pruned on its own. */
    async prune(retentionDays: number): Promise<{ deleted: number }> {
      let deleted = 0;
      for (const tenantId of await crossTenantListIds(db)) deleted += await store.deleteOlderThan(db, tenantId, retentionDays);
      return { deleted };
    },
  };
}

export type EventService = ReturnType<typeof createEventService>;
