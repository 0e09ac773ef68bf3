import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { LRUCache } from 'lru-cache';
import type { Logger } from 'pino';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { ConfigSection } from '../../config';
import type { Db } from '../../db';
import { DomainError, notFound, validationFailed } from '../../lib/errors';
import type { Feed, FeedRun } from '../../lib/feed';
import { setLogTenant } from '../../lib/log-context';
import { retryAfterSeconds } from '../../limits/budget';
import { sameHash } from '../../lib/secrets';
import { iso } from '../../lib/time';
import type { IntakeOutcome } from '../../intake/edge';
import type { RedisClient } from '../../queue/connection';
import { sessionMessage, sessionMessageId } from '../channels/adapters/web-chat';
import type { InboundMessage } from '../channels/adapters/types';
import { normalOrigin } from '../channels/config';
import * as channelStore from '../channels/store';
import { createStreamSlots, type LogWatch } from '../events/live';
import type { FileService, RangeOf } from '../files/service';
import type { ListQuery, PostBody, VisitorAttachment, WebChatMessage } from './schemas';
import { createVisitorTokens, newVisitorId, type Cursor } from './tokens';
import * as store from './store';

/** Log entries one read scans past a stream's position (bounded work, whatever the workspace writes meanwhile). */
const LOG_SCAN = 500;
/** Messages per stream page. */
const STREAM_PAGE = 50;
/** Reads one list request may make to fill its page when the log holds little of the visitor's. */
const LIST_ROUNDS = 8;
/** The window of a visitor's read budget (WEB_CHAT_READ_RATE_POINTS per window). */
const READ_WINDOW_SECONDS = 60;

/** What of a connection the visitor routes need, as read (and kept briefly) per workspace. */
interface Connection {
  hash: Buffer;
  enabled: boolean;
  origins: string[];
}

/** A verified visitor: whose token it is, until when, and the connection's token hash it was checked against. */
export interface VisitorSession {
  tenantId: string;
  visitorId: string;
  expiresAt: number;
  kid: string;
  fingerprint: string;
  hash: Buffer;
}

/** What the visitor routes need of the live event streams (src/domains/events/service.ts `live`). */
export interface SharedLive {
  watch(tenantId: string): LogWatch;
  takeTurn(bytes: number): Promise<void>;
}

const bearerOf = (authorization: string | undefined): string | undefined => {
  if (authorization === undefined) return undefined;
  const space = authorization.indexOf(' ');
  if (space < 0 || authorization.slice(0, space).toLowerCase() !== 'bearer') return undefined;
  const token = authorization.slice(space + 1).trim();
  return token === '' ? undefined : token;
};

/** The visitor routes' 401s say how to authenticate, as the API's do. */
const visitorAuth = { 'WWW-Authenticate': 'Bearer realm="web-chat"' };
const tokenInvalid = (detail = 'The visitor token is missing, malformed or not signed by this service; open a new session (POST /v1/web-chat/sessions).') =>
  new DomainError('visitor_token_invalid', detail, { headers: visitorAuth });
const tokenExpired = (at: number) =>
  new DomainError('visitor_token_expired', `The visitor token expired at ${iso(new Date(at))}; open a new session (POST /v1/web-chat/sessions).`, { headers: visitorAuth });
const sessionEnded = () =>
  new DomainError('visitor_session_ended', "This web chat session has ended: the connection's inbound token was rotated or the connection disabled; open a new session.", { headers: visitorAuth });

/** A files-only message's subject: `[file: a.pdf]`, `[2 files: a.pdf, b.png]` (as other channels mark files in text). */
const filesMarker = (names: string[]) => (names.length === 1 ? `[file: ${names[0]}]` : `[${names.length} files: ${names.join(', ')}]`);

/**
 * Web chat both ways (issue 33): a browser widget opens a visitor session with the connection's public inbound
 * token, posts the visitor's messages through the ingest pipeline, and reads the visitor's own conversation
 * (their messages and the agents' replies), as a list or live.
 */
export function createWebChatService(deps: {
  db: Db;
  config: ConfigSection<'webChat' | 'events' | 'secrets' | 'redis'>;
  redis: RedisClient;
  logger: Logger;
  channels: { tokenHash(token: string): Buffer };
  ingest: {
    receiveParsed(channel: string, tenantId: string, tokenHash: string, messages: InboundMessage[]): Promise<IntakeOutcome>;
    charge(tenantId: string, channel: string): Promise<void>;
    received(tenantId: string, channel: string, providerMessageId: string): Promise<boolean>;
  };
  /** The files domain (issue 34): visitors upload, name and download files through the same machinery as agents. */
  files: Pick<FileService, 'upload' | 'checkUploads' | 'serve'>;
  live: SharedLive;
}) {
  const { db, config, logger, channels, ingest, files, live } = deps;
  const tokens = createVisitorTokens(config.ENCRYPTION_KEYS);
  const cacheMs = config.WEB_CHAT_CONNECTION_CACHE_MS;

  // What a connection holds, per workspace, and which workspace an inbound token routes to, each trusted for at
  // most WEB_CHAT_CONNECTION_CACHE_MS: a rotated token or a disabled connection ends sessions within that (the
  // ingest worker checks a posted message's token in its own transaction regardless). Reads in flight are shared.
  const connections = cacheMs > 0 ? new LRUCache<string, Promise<Connection | null>>({ max: 10_000, ttl: cacheMs }) : null;
  const routes = cacheMs > 0 ? new LRUCache<string, string>({ max: 10_000, ttl: cacheMs }) : null;

  function connectionOf(tenantId: string): Promise<Connection | null> {
    const held = connections?.get(tenantId);
    if (held) return held;
    const read = store.webChatConnection(db, tenantId).then((row) => {
      if (!row) return null;
      const origins = (row.config as { allowed_origins?: unknown }).allowed_origins;
      return { hash: row.inbound_token_hash, enabled: row.enabled, origins: Array.isArray(origins) ? origins.filter((o): o is string => typeof o === 'string') : [] };
    });
    connections?.set(tenantId, read);
    read.catch(() => {
      if (connections?.get(tenantId) === read) connections.delete(tenantId);
    });
    return read;
  }

  /** The enabled web chat connection an inbound token names, and its workspace; 404 for any other token. */
  async function byInboundToken(token: string): Promise<{ tenantId: string; conn: Connection }> {
    const hash = channels.tokenHash(token);
    const key = hash.toString('hex');
    let tenantId = routes?.get(key);
    if (tenantId === undefined) {
      const found = await channelStore.crossTenantConnectionByToken(db, hash);
      if (!found || found.channel !== 'web_chat') throw notFound('channel connection');
      tenantId = found.tenant_id;
      routes?.set(key, tenantId);
    }
    const conn = await connectionOf(tenantId);
    if (!conn || !conn.enabled || !sameHash(conn.hash, hash)) throw notFound('channel connection');
    return { tenantId, conn };
  }

  /** The session's connection as it is now; refused when the token expired or the connection's token was rotated (or it was disabled). */
  async function connectionFor(s: Pick<VisitorSession, 'tenantId' | 'kid' | 'fingerprint' | 'expiresAt'>): Promise<Connection> {
    if (Date.now() >= s.expiresAt) throw tokenExpired(s.expiresAt);
    const conn = await connectionOf(s.tenantId);
    if (!conn || !conn.enabled || tokens.fingerprint(s.kid, conn.hash) !== s.fingerprint) throw sessionEnded();
    return conn;
  }

  /** The visitor a token names, checked now (signature, expiry, the connection's current inbound token). */
  async function verify(token: string | undefined, corsToken?: string): Promise<VisitorSession> {
    if (token === undefined) throw tokenInvalid('Send the visitor token as Authorization: Bearer <visitor_token> (open a session with POST /v1/web-chat/sessions).');
    const claims = tokens.read(token);
    if (!claims) throw tokenInvalid();
    const conn = await connectionFor(claims);
    // ?token= (for CORS) must name the same connection, as it is now.
    if (corsToken !== undefined && !sameHash(channels.tokenHash(corsToken), conn.hash)) throw tokenInvalid('?token= is not the current inbound token of the visitor token\'s connection.');
    setLogTenant(claims.tenantId);
    return { tenantId: claims.tenantId, visitorId: claims.visitorId, expiresAt: claims.expiresAt, kid: claims.kid, fingerprint: claims.fingerprint, hash: conn.hash };
  }

  // A visitor's reads (list pages, stream opens) per minute: a token is free to mint, its reads are not.
  const reads = new RateLimiterRedis({ storeClient: deps.redis, keyPrefix: `${config.REDIS_PREFIX}:throttle:web-chat-reads`, points: config.WEB_CHAT_READ_RATE_POINTS, duration: READ_WINDOW_SECONDS });
  async function chargeRead(s: VisitorSession) {
    try {
      await reads.consume(`${s.tenantId}:${s.visitorId}`);
    } catch (res) {
      if (res instanceof RateLimiterRes) throw new DomainError('throttled', 'This visitor reads more than its rate; retry later.', { retryAfterSeconds: retryAfterSeconds(res) });
      // Redis unreachable: reads go on without the budget, as the API's do (src/limits/api.ts).
      logger.warn({ err_code: 'web_chat_read_budget_unavailable', cause: (res as Error)?.message }, 'web chat read budget not applied');
    }
  }

  // Visitor streams have caps of their own (a busy site holds far more visitors than a workspace has agents);
  // the log poll and the write turns are the event streams' (one per process).
  const slots = createStreamSlots({
    redis: deps.redis,
    prefix: `${config.REDIS_PREFIX}:web-chat`,
    perCaller: config.WEB_CHAT_STREAMS_PER_VISITOR,
    perWorkspace: config.WEB_CHAT_STREAMS_PER_WORKSPACE,
    perProcess: config.WEB_CHAT_STREAMS_PER_PROCESS,
    logger,
  });

  const present = (visitorId: string, r: store.MessageRow, attached: VisitorAttachment[] | undefined): WebChatMessage => {
    const withFiles = attached && attached.length > 0 ? { attachments: attached } : {};
    if (r.kind === 'reply') return { id: r.id, author: 'agent', ...(r.actor_name ? { agent_name: r.actor_name } : {}), text: r.body, created_at: iso(r.created_at), ...withFiles };
    const messageId = sessionMessageId(visitorId, r.provider_message_id);
    return { id: r.id, author: 'visitor', text: r.body, created_at: iso(r.created_at), ...(messageId !== undefined ? { message_id: messageId } : {}), ...withFiles };
  };

  /** The files of a page of messages, by message, in one read. */
  async function filesOf(s: VisitorSession, rows: store.MessageRow[]): Promise<Map<string, VisitorAttachment[]>> {
    const out = new Map<string, VisitorAttachment[]>();
    for (const f of await store.filesOfMessages(db, s.tenantId, rows.map((r) => r.id))) {
      const list = out.get(f.event_id) ?? [];
      list.push({ id: f.id, name: f.name, content_type: f.content_type, size: f.size, state: f.state });
      out.set(f.event_id, list);
    }
    return out;
  }

  type Item = { row: store.MessageRow; cursor: Cursor };

  /**
   * The visitor's messages after a cursor, and where to resume after them. Two ways to read, one meaning:
   *
   * - past a log position (`p`, while the event there is still kept): the workspace's event log, in commit
   *   order, scanning at most LOG_SCAN entries. Each message committed with its `message.created` event, so
   *   nothing that commits later can appear behind the position: no gap, no repeat. This is how a caught-up
   *   reader (a stream, a polling widget) goes on.
   * - otherwise (the conversation from its start, a page of history, a position older than the log keeps):
   *   the timeline in its order, after `m`, in one REPEATABLE READ snapshot with the log's end. The snapshot
   *   holds exactly the messages logged up to that end, so once the history is read to its end the reader
   *   goes on from that position in the log, missing nothing and repeating nothing.
   */
  async function readAfter(s: VisitorSession, c: Cursor, limit: number): Promise<{ items: Item[]; next: Cursor; more: boolean }> {
    if (c.p !== undefined && c.p !== '0' && (await store.logHolds(db, s.tenantId, c.p))) {
      const page = await store.visitorMessagesInLog(db, s.tenantId, s.visitorId, c.p, LOG_SCAN);
      let m = BigInt(c.m);
      const items: Item[] = [];
      for (const row of page.rows.slice(0, limit)) {
        if (BigInt(row.seq) > m) m = BigInt(row.seq);
        items.push({ row, cursor: { m: String(m), p: row.position } });
      }
      if (page.rows.length > limit) return { items, next: items.at(-1)!.cursor, more: true };
      return { items, next: { m: String(m), p: page.last ?? c.p }, more: page.scanned >= LOG_SCAN };
    }
    const { head, rows } = await db
      .transaction()
      .setIsolationLevel('repeatable read')
      .execute(async (tx) => {
        const end = await store.logHead(tx, s.tenantId);
        return { head: end ?? '0', rows: await store.visitorMessages(tx, s.tenantId, s.visitorId, c.m, limit + 1) };
      });
    const more = rows.length > limit;
    const shown = rows.slice(0, limit);
    const items = shown.map((row, i) => ({ row, cursor: { m: row.seq, ...(!more && i === shown.length - 1 ? { p: head } : {}) } }));
    return { items, next: more ? { m: shown.at(-1)!.seq } : { m: shown.at(-1)?.seq ?? c.m, p: head }, more };
  }

  const seal = (s: VisitorSession, c: Cursor) => tokens.sealCursor(s.tenantId, s.visitorId, c);

  /** Where a reader starts: right after the cursor it sent, or at the start of the conversation. */
  function startAt(s: VisitorSession, text: string | undefined, where: string): Cursor {
    if (text === undefined) return { m: '0' };
    const c = tokens.openCursor(s.tenantId, s.visitorId, text);
    if (!c) throw validationFailed([{ path: where, message: 'not a cursor this visitor was given' }]);
    return c;
  }

  return {
    /**
     * POST /v1/web-chat/sessions?token=: a visitor token for a new visitor, or for the visitor of the token
     * presented (resumed, with a fresh expiry) when it is still valid for this connection and names the
     * `visitor_id` sent, if one was. A visitor id alone resumes nothing.
     */
    async openSession(inboundToken: string, body: { visitor_id?: string }, authorization: string | undefined) {
      const { tenantId, conn } = await byInboundToken(inboundToken);
      setLogTenant(tenantId);
      let visitorId: string | undefined;
      const presented = bearerOf(authorization);
      const claims = presented === undefined ? null : tokens.read(presented);
      if (
        claims &&
        claims.tenantId === tenantId &&
        Date.now() < claims.expiresAt &&
        tokens.fingerprint(claims.kid, conn.hash) === claims.fingerprint &&
        (body.visitor_id === undefined || body.visitor_id === claims.visitorId)
      ) {
        visitorId = claims.visitorId;
      }
      const resumed = visitorId !== undefined;
      visitorId ??= newVisitorId();
      const expiresAt = Math.floor((Date.now() + config.WEB_CHAT_SESSION_TTL_SECONDS * 1000) / 1000) * 1000;
      return { visitor_id: visitorId, visitor_token: tokens.mint(tenantId, visitorId, expiresAt, conn.hash), expires_at: iso(new Date(expiresAt)), resumed };
    },

    /**
     * POST /v1/web-chat/messages: the visitor's message into the ingest pipeline (the workspace's lane and
     * budget, the ledger's dedupe, exactly-once writes), as the token's visitor. The answer leaves out the
     * ticket and customer ids: the widget has no use for them, and they are the workspace's, not the visitor's.
     */
    async post(authorization: string | undefined, corsToken: string | undefined, body: PostBody) {
      const s = await verify(bearerOf(authorization), corsToken);
      const message = sessionMessage(s.visitorId, body.message_id, body.text ?? '', new Date());
      const tokens = body.attachments ?? [];
      if (tokens.length > 0) {
        let named: { id: string; name: string }[];
        try {
          named = await files.checkUploads({ tenantId: s.tenantId, visitorId: s.visitorId }, tokens);
        } catch (err) {
          // A retry of a message already written names uploads that message spent: it is a redelivery, answered
          // was_duplicate by the ledger with nothing bound again, not a 422. (The ledger row commits with the
          // binding, so once a token reads as used, a delivery that used it is in the ledger.)
          if (!(err instanceof DomainError) || err.code !== 'upload_token_invalid' || !(await ingest.received(s.tenantId, 'web_chat', message.providerMessageId))) throw err;
          named = [];
        }
        if (named.length > 0) {
          message.uploads = named.map((r) => r.id);
          // A message of files alone still names its ticket by something: the files, as other channels' markers do.
          if (message.body === '') message.subject = filesMarker(named.map((r) => r.name));
        }
      }
      let outcome: IntakeOutcome;
      try {
        outcome = await ingest.receiveParsed('web_chat', s.tenantId, s.hash.toString('hex'), [message]);
      } catch (err) {
        // The worker found the token rotated (or the connection disabled) after the check above: nothing written.
        if (err instanceof DomainError && err.code === 'not_found') throw sessionEnded();
        throw err;
      }
      if (outcome.accepted) return { status: 202, body: { status: 'accepted' as const, channel: 'web_chat' as const, message_id: body.message_id } };
      const r = outcome.body as { was_created: boolean; was_duplicate: boolean };
      return { status: 200, body: { channel: 'web_chat' as const, message_id: body.message_id, was_created: r.was_created, was_duplicate: r.was_duplicate }, duplicate: outcome.duplicate === true };
    },

    /** GET /v1/web-chat/messages: a page of the visitor's conversation, oldest first, and where to resume. */
    async list(authorization: string | undefined, q: ListQuery) {
      if (q.visitor_token !== undefined) {
        throw validationFailed([{ path: 'query.visitor_token', message: 'accepted by the stream only (Accept: text/event-stream); send Authorization: Bearer <visitor_token>' }]);
      }
      const s = await verify(bearerOf(authorization), q.token);
      await chargeRead(s);
      let cursor = startAt(s, q.after, 'query.after');
      const items: Item[] = [];
      let more = true;
      for (let round = 0; round < LIST_ROUNDS && more && items.length < q.limit; round += 1) {
        const page = await readAfter(s, cursor, q.limit - items.length);
        items.push(...page.items);
        cursor = page.next;
        more = page.more;
      }
      const attached = await filesOf(s, items.map((i) => i.row));
      return { messages: items.map((i) => present(s.visitorId, i.row, attached.get(i.row.id))), next_cursor: seal(s, cursor), has_more: more };
    },

    /**
     * GET /v1/web-chat/messages with Accept: text/event-stream: the visitor's conversation, live, as a feed
     * (src/lib/feed.ts; the route frames it as Server-Sent Events). Each message is an item of kind `message`,
     * its id a cursor: a client that reconnects with Last-Event-ID (EventSource does so by itself) resumes right
     * after it. Bounded like the event streams:
     * it reads only when the workspace's log end moved (the process's one poll), writes within the process's
     * write turns, ends a client that reads nothing for EVENT_STREAM_STALL_SECONDS, and checks the session
     * before every delivery and every EVENT_STREAM_RECHECK_SECONDS: it ends (after a `session_ended` item)
     * when the token expires or the connection's inbound token is rotated. Open streams are capped per visitor,
     * per workspace and per process (429 too_many_streams).
     */
    async openStream(authorization: string | undefined, q: ListQuery, lastEventId: string | undefined): Promise<FeedRun> {
      // EventSource cannot send headers: the stream alone takes the token in its URL (never logged: see decisions).
      const s = await verify(bearerOf(authorization) ?? q.visitor_token, q.token);
      const start = lastEventId !== undefined ? startAt(s, lastEventId, 'header.last-event-id') : startAt(s, q.after, 'query.after');
      await chargeRead(s);
      const slot = await slots.acquireFor(s.tenantId, `visitor:${s.visitorId}`, 'This visitor');
      let watch: LogWatch;
      try {
        watch = live.watch(s.tenantId);
      } catch (err) {
        slot.release();
        throw err;
      }
      const stallMs = config.EVENT_STREAM_STALL_SECONDS * 1000;
      const recheckMs = config.EVENT_STREAM_RECHECK_SECONDS * 1000;
      const heartbeatMs = config.EVENT_STREAM_HEARTBEAT_SECONDS * 1000;

      return async (out: Feed) => {
        let cursor = start;
        /** Where the client resumes (its last item's id); moved on with a heartbeat when reading moved past it. */
        let held = start;
        let checkedAt = performance.now();
        let wroteAt = Date.now();
        /** Whether the client kept up with what was just written (false: it stayed behind past the stall deadline, or left). */
        const keptUp = async (written: boolean) => written || (await out.drained(stallMs));
        /** False when the session has ended (the client is told why, in a last item, then the stream ends). */
        const stillOn = async () => {
          try {
            await connectionFor(s);
            checkedAt = performance.now();
            return true;
          } catch (err) {
            if (!(err instanceof DomainError)) throw err;
            wroteAt = Date.now();
            await keptUp(out.send({ items: [{ kind: 'session_ended', json: JSON.stringify({ code: err.code, detail: err.detail }) }] }));
            return false;
          }
        };
        try {
          /** The workspace's log end as of the last read that caught up: nothing to read until it moves. */
          let seen: bigint | undefined;
          while (!out.signal.aborted) {
            if ((Date.now() >= s.expiresAt || performance.now() - checkedAt >= recheckMs) && !(await stillOn())) return;
            const head = watch.head();
            if (head === undefined) {
              // The process's poll has not answered for this workspace yet: wait for it rather than read alone.
              await watch.wait(config.EVENT_STREAM_POLL_MS, out.signal);
              continue;
            }
            if (seen === undefined || head > seen) {
              for (;;) {
                // A read issued now covers the head just seen (positions are assigned in commit order).
                const page = await readAfter(s, cursor, STREAM_PAGE);
                if (page.items.length > 0) {
                  // Before delivering: the session as it is now (a rotation that committed before these were read ends it).
                  if (!(await stillOn())) return;
                  const attached = await filesOf(s, page.items.map((i) => i.row));
                  const batch = { items: page.items.map((i) => ({ id: seal(s, i.cursor), kind: 'message', json: JSON.stringify(present(s.visitorId, i.row, attached.get(i.row.id))) })) };
                  await live.takeTurn(out.size(batch));
                  wroteAt = Date.now();
                  if (!(await keptUp(out.send(batch)))) return;
                  held = page.items.at(-1)!.cursor;
                }
                cursor = page.next;
                if (!page.more) break;
              }
              seen = head;
            }
            if (Date.now() - wroteAt >= heartbeatMs) {
              // A heartbeat that moves where the client resumes, without an item: a reconnect then starts here, not
              // back at its last message with everything since to scan again.
              const moved = cursor.m !== held.m || cursor.p !== held.p;
              wroteAt = Date.now();
              if (!(await keptUp(out.heartbeat(moved ? seal(s, cursor) : undefined)))) return;
              held = cursor;
            }
            const wait = Math.min(checkedAt + recheckMs - performance.now(), wroteAt + heartbeatMs - Date.now(), s.expiresAt - Date.now());
            await watch.wait(Math.max(1, wait), out.signal);
          }
        } finally {
          watch.close();
          slot.release();
        }
      };
    },

    /**
     * POST /v1/web-chat/uploads: the visitor's file, streamed into the file store through the files domain exactly
     * as an agent's upload (limits, quota, sniffing, names, scanning), as this visitor's: only they can name the
     * token. An upload costs a point of the workspace's web chat intake budget, as a message does (a visitor
     * token is free to mint, so a per-visitor budget alone would bound nothing).
     */
    async upload(authorization: string | undefined, corsToken: string | undefined, input: { body: Readable; headers: IncomingHttpHeaders }) {
      const s = await verify(bearerOf(authorization), corsToken);
      await ingest.charge(s.tenantId, 'web_chat');
      const up = await files.upload({ tenantId: s.tenantId, visitorId: s.visitorId }, input);
      const a = up.attachment;
      return { upload_token: up.upload_token, attachment: { id: a.id, name: a.name, content_type: a.content_type, size: a.size, state: a.state }, expires_at: up.expires_at };
    },

    /**
     * GET /v1/web-chat/attachments/{id}/content: a file of a message the visitor reads (theirs, or an agent's reply
     * on their conversation), served as agents' downloads are; anything else is 404. A read of the visitor's
     * budget. The token may come in the URL, for links (see docs/decisions/attachments.md, "Web chat files").
     */
    async download(authorization: string | undefined, q: { token?: string; visitor_token?: string }, attachmentId: string, rangeOf: RangeOf) {
      const s = await verify(bearerOf(authorization) ?? q.visitor_token, q.token);
      await chargeRead(s);
      const row = await store.visitorFile(db, s.tenantId, s.visitorId, attachmentId);
      if (!row) throw notFound('attachment');
      return files.serve(row, rangeOf);
    },

    /** CORS: whether `origin` is among the allowed origins of the connection the request names. */
    async originAllowed(key: { token: string } | { visitorToken: string }, origin: string): Promise<boolean> {
      const wanted = normalOrigin(origin);
      if (wanted === null) return false;
      let conn: Connection | null;
      if ('token' in key) {
        conn = (await byInboundToken(key.token).catch(() => null))?.conn ?? null;
      } else {
        const claims = tokens.read(key.visitorToken);
        conn = claims ? await connectionFor(claims).catch(() => null) : null;
      }
      // A value stored before origins were checked at write (`null`, `*`) matches nothing.
      return conn !== null && conn.origins.some((o) => normalOrigin(o.trim()) === wanted);
    },

    /** Visitor streams open in this process. */
    openStreams: () => slots.open(),
  };
}

export type WebChatService = ReturnType<typeof createWebChatService>;
