import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import type { Db, Executor } from '../../db';
import { newId, isUuid } from '../../lib/ids';
import { encodeCursor, type Cursor } from '../../lib/paging';
import type { ConfigSection } from '../../config';
import { notFound, validationFailed } from '../../lib/errors';
import type { Feed, FeedBatch, FeedRun } from '../../lib/feed';
import { iso } from '../../lib/time';
import type { RedisClient } from '../../queue/connection';
import { mayManageIntegrations, type Principal } from '../identity/principal';
import { crossTenantListIds } from '../workspaces/store';
import { EVENT_CURSOR_SORT, EVENT_LOG_SORT, type EventLogQuery, type EventStreamQuery } from './schemas';
import { createLogTail, createStreamSlots, createWriteTurns } from './live';
import * as store from './store';
import type { EventSink, NewOutboundEvent } from './types';

/** Events sent per read of the log while a stream catches up. */
const STREAM_PAGE = 50;
/** What every stream of a process may write to its socket in one turn of the event loop, together. */
const WRITE_BYTES_PER_TURN = 128 * 1024;
/** Stream pages kept for the other streams of the same workspace, per process. */
const SHARED_PAGES_BYTES = 4 * 1024 * 1024;

interface SharedPage {
  /** When its read was issued (performance.now()): it covers every event committed before then. */
  startedAt: number;
  /**
   * Its events as feed items, rendered once and sent by every stream as this one batch (so the transport encodes
   * it once, too: src/lib/feed.ts); empty when no event is past the cursor.
   */
  batch: FeedBatch;
  /** The UTF-8 bytes of its items' JSON: what the page costs the shared pages' budget. */
  bytes: number;
  /** The log position of its last event (where the stream resumes). */
  last: string | undefined;
  more: boolean;
}
/** A page of GET /v1/events holds at most this many bytes of events (and always at least one event). */
const LIST_PAGE_BYTES = 4 * 1024 * 1024;
/** No event is too large for the list or GET /v1/events/{id}: they are where a stream's references point. */
const WHOLE = 2 ** 31 - 1;

/** The reader may not see integration ids (the webhook URL secret) unless they may manage integrations. */
const hides = (p: Principal) => !mayManageIntegrations(p);

/** Where a reader resumes after an event: its id only, so the log's position (a global sequence) stays ours. */
const cursorAfter = (id: string): string => encodeCursor({ sort: EVENT_CURSOR_SORT, key: '0', id });

export function createEventService(deps: { db: Db; config: ConfigSection<'events' | 'redis'>; redis: RedisClient; logger: Logger }) {
  const { db, config, logger } = deps;
  const tail = createLogTail({ db, pollMs: config.EVENT_STREAM_POLL_MS, logger });
  // Streams woken together write their pages a turn of the event loop at a time (live.ts).
  const turns = createWriteTurns(WRITE_BYTES_PER_TURN);
  const slots = createStreamSlots({
    redis: deps.redis,
    prefix: config.REDIS_PREFIX,
    perCaller: config.EVENT_STREAMS_PER_CALLER,
    perWorkspace: config.EVENT_STREAMS_PER_WORKSPACE,
    perProcess: config.EVENT_STREAMS_PER_PROCESS,
    logger,
  });

  /**
   * Pages of the log as feed batches, shared by this process's streams: the streams of one workspace move in
   * step (one poll wakes them all), so two hundred of them asking for the same page get one read, one
   * rendering and one copy of its items (and of the transport's encoding of them). A page is used only when
   * its read started after the moment the stream needs it to cover (`notBefore`), so a shared page is never
   * older than the head its stream saw. Kept briefly and bounded by bytes; reads in flight are shared as well.
   */
  // A page counts twice its JSON: its items, and the one encoding of them a transport keeps while the page lives.
  const pages = new LRUCache<string, SharedPage>({ maxSize: SHARED_PAGES_BYTES, sizeCalculation: (p) => 2 * p.bytes + 256, ttl: 10_000 });
  const reading = new Map<string, { startedAt: number; page: Promise<SharedPage> }>();
  function sharedPage(tenantId: string, after: string | undefined, types: string[] | undefined, hide: boolean, notBefore: number): Promise<SharedPage> {
    const key = `${tenantId}|${after ?? ''}|${types?.join(',') ?? '*'}|${hide ? 'h' : 's'}`;
    const kept = pages.get(key);
    if (kept && kept.startedAt > notBefore) return Promise.resolve(kept);
    const flying = reading.get(key);
    if (flying && flying.startedAt > notBefore) return flying.page;
    const startedAt = performance.now();
    const page = store
      .readLog(db, tenantId, {
        limit: STREAM_PAGE,
        ...(after !== undefined ? { after } : {}),
        ...(types ? { types } : {}),
        maxBytes: config.EVENT_STREAM_MAX_EVENT_BYTES,
        wholeBytes: config.EVENT_STREAM_MAX_EVENT_BYTES,
        hideIntegrationIds: hide,
        asText: true,
      })
      .then(({ rows, more }) => {
        // Each event an item, `id` its event id (where a reader resumes), of the kind of its type.
        const items = rows.map((r) => ({ id: r.id, kind: r.type, json: itemJson(r) }));
        const bytes = items.reduce((n, i) => n + Buffer.byteLength(i.json), 0);
        const shared: SharedPage = { startedAt, batch: { items }, bytes, last: rows.at(-1)?.page_key, more };
        pages.set(key, shared);
        return shared;
      })
      .finally(() => {
        if (reading.get(key)?.page === page) reading.delete(key);
      });
    reading.set(key, { startedAt, page });
    return page;
  }

  /** An event's item JSON from its row, `data` being PostgreSQL's JSON text (or null: too large, a reference). */
  const itemJson = (r: store.LogRow) => {
    if (r.data === null) return JSON.stringify(reference(r));
    const head = JSON.stringify({ id: r.id, type: r.type, occurred_at: iso(r.occurred_at), tenant_id: r.tenant_id });
    return `${head.slice(0, -1)},"data":${r.data as string}}`;
  };

  const present = (r: { id: string; type: string; occurred_at: Date; tenant_id: string; data: unknown }) => ({
    id: r.id,
    type: r.type,
    occurred_at: iso(r.occurred_at),
    tenant_id: r.tenant_id,
    data: r.data as Record<string, unknown>,
  });

  /**
   * An event too large for a stream's item, as a reference: what it is, and where to read it whole. A viewer
   * who writes 380 KiB replies cannot make every stream carry (and every process hold) 380 KiB per event.
   */
  const reference = (r: store.LogRow) => ({
    id: r.id,
    type: r.type,
    occurred_at: iso(r.occurred_at),
    tenant_id: r.tenant_id,
    data_ref: { url: `/v1/events/${r.id}`, bytes: r.bytes },
  });

  /** The log position a cursor or a Last-Event-ID names; undefined: the start of the log (or the event was pruned). */
  async function positionAfter(tenantId: string, after: Cursor | undefined): Promise<string | undefined> {
    if (after === undefined) return undefined;
    // Cursors given out before issue 32 carry the position itself.
    if (after.sort === EVENT_LOG_SORT) return after.key;
    return store.positionOf(db, tenantId, after.id);
  }

  const sink: EventSink = {
    /** In the caller's transaction: the events commit, or roll back, with the change that caused them. */
    async emit(tx: Executor, tenantId: string, events: NewOutboundEvent[]) {
      await store.insertEvents(
        tx,
        tenantId,
        events.map((e) => {
          const data = JSON.stringify(e.data);
          return { id: newId(), type: e.type, ticket_id: e.ticketId ?? null, data, data_bytes: Buffer.byteLength(data) };
        }),
      );
    },
  };

  return {
    ...sink,
    present,

    /**
     * A page of the log. Unlike a list, a log is tailed: `next_cursor` always says where to resume (past the
     * last event shown, or where the caller was when nothing new has committed), and `has_more` says
     * whether more is there now. It is null only for an empty log read from its start. A page holds at most
     * LIST_PAGE_BYTES of events (at least one), so `limit=500` of large events is not one answer of 190 MB.
     */
    async list(actor: Principal, q: EventLogQuery) {
      const after = await positionAfter(actor.tenantId, q.after);
      const { rows, more } = await store.readLog(db, actor.tenantId, {
        limit: q.limit,
        ...(after !== undefined ? { after } : {}),
        ...(q.types ? { types: q.types } : {}),
        maxBytes: LIST_PAGE_BYTES,
        wholeBytes: WHOLE,
        hideIntegrationIds: hides(actor),
      });
      const last = rows.at(-1);
      const next = last ? cursorAfter(last.id) : q.after ? encodeCursor(q.after) : null;
      return { events: rows.map(present), next_cursor: next, has_more: more };
    },

    /** One event whole: where a stream's reference to a large event points. */
    async get(actor: Principal, id: string) {
      const row = await store.getEvent(db, actor.tenantId, id, hides(actor));
      if (!row) throw notFound('event');
      return present(row);
    },

    /**
     * GET /v1/events/stream: the log tailed live as a feed of items (src/lib/feed.ts; the route frames them as
     * Server-Sent Events), each item's id the event's id, so a client that reconnects with `Last-Event-ID`
     * resumes right after the last event it got: no gap and no repeat, on this process or another (the position
     * is in the database, not in the process). Bounded (issue 32):
     *
     * - it reads the log only when its workspace's end moved (one shared poll per process, see live.ts), a
     *   page of at most EVENT_STREAM_MAX_EVENT_BYTES at a time, and an event larger than that is sent as a
     *   reference to GET /v1/events/{id};
     * - it reads nothing while the client's buffer is above the high-water mark, and ends the stream when the
     *   client stays behind for EVENT_STREAM_STALL_SECONDS (it resumes with Last-Event-ID, losing nothing);
     * - it checks the credential again before every page it delivers (a credential revoked, or a member
     *   removed, before those events committed never sees them) and at least every EVENT_STREAM_RECHECK_SECONDS
     *   while idle, and ends when the credential expires;
     * - streams are capped per caller, per workspace and per process (429 too_many_streams).
     */
    async openStream(
      actor: Principal,
      q: EventStreamQuery,
      lastEventId: string | undefined,
      reauthorize: (notBefore: number) => Promise<Principal>,
    ): Promise<FeedRun> {
      // Checked and resolved before the stream starts, so a bad id is a problem answer, not a broken stream.
      if (lastEventId !== undefined && !isUuid(lastEventId)) throw validationFailed([{ path: 'header.last-event-id', message: 'not an event id this stream gave out' }]);
      let position = lastEventId !== undefined ? await store.positionOf(db, actor.tenantId, lastEventId) : await positionAfter(actor.tenantId, q.after);
      const slot = await slots.acquire(actor);
      const watch = tail.watch(actor.tenantId);
      const stallMs = config.EVENT_STREAM_STALL_SECONDS * 1000;
      const recheckMs = config.EVENT_STREAM_RECHECK_SECONDS * 1000;
      const heartbeatMs = config.EVENT_STREAM_HEARTBEAT_SECONDS * 1000;

      return async (out: Feed) => {
        let caller = actor;
        let checkedAt = performance.now();
        let wroteAt = Date.now();
        /** The caller as they are now (a check started after `notBefore`); false when a new request would be refused. */
        const recheck = async (notBefore: number): Promise<boolean> => {
          try {
            caller = await reauthorize(notBefore);
            checkedAt = performance.now();
            return true;
          } catch {
            return false;
          }
        };
        const expired = () => caller.expiresAt !== undefined && Date.now() >= caller.expiresAt;
        /** A heartbeat; false when the client stayed behind past the stall deadline (or left). */
        const beat = async () => {
          wroteAt = Date.now();
          return out.heartbeat() || (await out.drained(stallMs));
        };
        try {
          /** The workspace's log end as of the last read that caught up: nothing to read until it moves. */
          let seen: bigint | undefined;
          while (!out.signal.aborted) {
            // At least every EVENT_STREAM_RECHECK_SECONDS (a check another stream of this credential made within the last second will do).
            if (expired() || (performance.now() - checkedAt >= recheckMs && !(await recheck(performance.now() - 1000)))) return;
            const head = watch.head();
            if (head === undefined) {
              // The process's poll has not answered for this workspace yet (a first stream): streams opened
              // together then read together, once, instead of each reading the log by itself.
              await watch.wait(config.EVENT_STREAM_POLL_MS, out.signal);
              continue;
            }
            // A page read after this moment covers the head seen now.
            const observedAt = watch.at();
            if (seen === undefined || head > seen) {
              for (;;) {
                const hide = hides(caller);
                const page = await sharedPage(actor.tenantId, position, q.types, hide, observedAt);
                if (page.last === undefined) break;
                // Before delivering: the credential as it is now, checked after these events were read, so a
                // revocation or a removal that committed before them is seen. A caller who lost the right to
                // see integration ids meanwhile gets the page read again without them.
                if (!(await recheck(page.startedAt)) || expired()) return;
                if (hides(caller) !== hide) continue;
                await turns.take(out.size(page.batch));
                wroteAt = Date.now();
                // Only a full buffer is waited for. A client cut off mid-page has the whole items it read, and
                // resumes after the last of them.
                if (!out.send(page.batch) && !(await out.drained(stallMs))) return;
                position = page.last;
                if (!page.more) break;
              }
              seen = head;
            }
            if (Date.now() - wroteAt >= heartbeatMs && !(await beat())) return;
            const untilCheck = checkedAt + recheckMs - performance.now();
            const untilBeat = wroteAt + heartbeatMs - Date.now();
            const untilExpiry = caller.expiresAt === undefined ? Infinity : caller.expiresAt - Date.now();
            const wait = Math.min(untilCheck, untilBeat, untilExpiry);
            await watch.wait(Math.max(1, wait), out.signal);
          }
        } finally {
          watch.close();
          slot.release();
        }
      };
    },

    /** Streams open in this process (the per-process cap counts these). */
    openStreams: () => slots.open(),

    /**
     * What other live streams of this process share with these (web chat, issue 33): the one poll of each
     * watched workspace's log end, and the write turns that bound what every stream hands its socket per turn.
     */
    live: {
      watch: (tenantId: string) => tail.watch(tenantId),
      takeTurn: (bytes: number) => turns.take(bytes),
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
