import type { Db, Executor } from '../../db';
import { newId } from '../../lib/ids';
import { encodeCursor, type Cursor } from '../../lib/paging';
import type { ConfigSection } from '../../config';
import { validationFailed } from '../../lib/errors';
import { isUuid } from '../../lib/ids';
import type { StreamWriter } from '../../http/result';
import { iso } from '../../lib/time';
import type { Principal } from '../identity/principal';
import { crossTenantListIds } from '../workspaces/store';
import { EVENT_LOG_SORT, type EventLogQuery, type EventStreamQuery } from './schemas';
import * as store from './store';
import type { EventSink, NewOutboundEvent } from './types';

/** Events sent per read of the log while a stream catches up. */
const STREAM_PAGE = 200;

/** Waits `ms`, or less when the stream closes. */
const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });

export function createEventService(deps: { db: Db; config: ConfigSection<'events'> }) {
  const { db, config } = deps;

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

    /**
     * GET /v1/events/stream: the log tailed live as Server-Sent Events, `id:` the event's id, so a client that
     * reconnects with `Last-Event-ID` resumes right after the last event it got: no gap and no repeat, on
     * this process or another (the position is in the database, not in the process). It polls the log every
     * EVENT_STREAM_POLL_MS (one index range read) and sends a comment every EVENT_STREAM_HEARTBEAT_SECONDS
     * while idle. An id the log no longer has (pruned) resumes from the oldest event kept.
     */
    async openStream(actor: Principal, q: EventStreamQuery, lastEventId: string | undefined): Promise<(w: StreamWriter) => Promise<void>> {
      // Checked and resolved before the stream starts, so a bad id is a problem answer, not a broken stream.
      if (lastEventId !== undefined && !isUuid(lastEventId)) throw validationFailed([{ path: 'header.last-event-id', message: 'not an event id this stream gave out' }]);
      let after: Cursor | undefined = q.after;
      if (lastEventId !== undefined) {
        const position = await store.positionOf(db, actor.tenantId, lastEventId);
        after = position ? { sort: EVENT_LOG_SORT, key: position, id: lastEventId } : undefined;
      }
      return async (w: StreamWriter) => {
        // The client's reconnection delay, then events as they commit.
        await w.write('retry: 2000\n\n');
        let idleSince = Date.now();
        while (!w.signal.aborted) {
          const rows = await store.listEvents(db, actor.tenantId, { limit: STREAM_PAGE, ...(after ? { after } : {}), ...(q.types ? { types: q.types } : {}) });
          for (const r of rows.slice(0, STREAM_PAGE)) {
            await w.write(`id: ${r.id}\nevent: ${r.type}\ndata: ${JSON.stringify(present(r))}\n\n`);
            after = { sort: EVENT_LOG_SORT, key: r.page_key, id: r.id };
            idleSince = Date.now();
          }
          if (rows.length > STREAM_PAGE) continue;
          if (Date.now() - idleSince >= config.EVENT_STREAM_HEARTBEAT_SECONDS * 1000) {
            await w.write(': heartbeat\n\n');
            idleSince = Date.now();
          }
          await sleep(config.EVENT_STREAM_POLL_MS, w.signal);
        }
      };
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
