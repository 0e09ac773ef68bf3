import type { Logger } from 'pino';
import type { Db } from '../../db';
import { DomainError } from '../../lib/errors';
import { newId } from '../../lib/ids';
import type { RedisClient } from '../../queue/connection';
import { callerOf, type Principal } from '../identity/principal';
import * as store from './store';

/**
 * What the live streams of one API process share (issue 32): one poll of the log's end for every workspace
 * with a stream open, and the count of streams against their caps.
 */

/** Waits `ms`, or less when `signal` aborts or `wake` is called. */
function nap(ms: number, signal: AbortSignal, waiters: Set<() => void>): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      waiters.delete(done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
    waiters.add(done);
  });
}

export interface LogWatch {
  /** The workspace's last committed log position as of the last poll; undefined before the first one answered. */
  head(): bigint | undefined;
  /** When that poll answered (performance.now() time): a read issued after it sees at least that head. */
  at(): number;
  /** Waits up to `ms` for the position to move (or the stream to end). */
  wait(ms: number, signal: AbortSignal): Promise<void>;
  close(): void;
}

/**
 * The end of each watched workspace's log, polled every `pollMs` in one statement (an index probe per
 * workspace), so an idle stream costs nothing of its own: a stream reads the log only when its workspace's end
 * moved past what it has seen. Before this, each stream polled the log itself: 2,000 idle streams cost 62 % of
 * a core. Positions are assigned at commit in commit order within a workspace (0023), so once a position is
 * seen every position below it is visible too.
 */
export function createLogTail(deps: { db: Db; pollMs: number; logger: Logger }) {
  const { db, pollMs, logger } = deps;
  const tenants = new Map<string, { head: bigint | undefined; at: number; watchers: number; waiters: Set<() => void> }>();
  let timer: NodeJS.Timeout | undefined;
  let failing = false;
  let polling = false;
  /** A workspace was added while a poll was out: poll again as soon as it answers. */
  let again = false;

  async function poll() {
    timer = undefined;
    const ids = [...tenants.keys()];
    if (ids.length === 0) return;
    polling = true;
    try {
      const heads = await store.crossTenantHeads(db, ids);
      const at = performance.now();
      failing = false;
      for (const [id, raw] of heads) {
        const t = tenants.get(id);
        if (!t) continue;
        const head = raw === null ? 0n : BigInt(raw);
        t.at = at;
        if (t.head !== head) {
          t.head = head;
          for (const wake of [...t.waiters]) wake();
        }
      }
    } catch (err) {
      // The database is away: streams keep their place and wait; the next poll tries again.
      if (!failing) logger.warn({ err_code: 'event_tail_unavailable', cause: (err as Error)?.message }, 'event stream poll failed; retrying');
      failing = true;
    } finally {
      polling = false;
    }
    if (again) {
      again = false;
      pollNow();
    } else if (tenants.size > 0) schedule();
  }
  const schedule = () => {
    if (polling) return;
    timer ??= setTimeout(() => void poll(), pollMs);
    timer.unref();
  };
  /** A workspace's first stream is answered by a poll now, not after a whole interval. */
  const pollNow = () => {
    if (polling) {
      again = true;
      return;
    }
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => void poll(), 0);
    timer.unref();
  };

  return {
    watch(tenantId: string): LogWatch {
      let t = tenants.get(tenantId);
      const first = !t;
      if (!t) tenants.set(tenantId, (t = { head: undefined, at: 0, watchers: 0, waiters: new Set() }));
      t.watchers += 1;
      const entry = t;
      if (first) pollNow();
      else schedule();
      let closed = false;
      return {
        head: () => entry.head,
        at: () => entry.at,
        wait: (ms, signal) => nap(ms, signal, entry.waiters),
        close() {
          if (closed) return;
          closed = true;
          entry.watchers -= 1;
          if (entry.watchers === 0) tenants.delete(tenantId);
        },
      };
    },
    /** Workspaces watched now (for tests and metrics). */
    size: () => tenants.size,
  };
}

export type LogTail = ReturnType<typeof createLogTail>;

/** A stream's place under the caps; released when the stream ends. */
export interface StreamSlot {
  release(): void;
}

/** How long a slot is held in Redis without renewal: a killed process's streams free theirs within this. */
const SLOT_LEASE_MS = 60_000;
const SLOT_RENEW_MS = 20_000;
/** What a refused stream is told to wait before trying again. */
const RETRY_AFTER_SECONDS = 10;

export const streamsRefused = (what: string, cap: number) =>
  new DomainError('too_many_streams', `${what} already has ${cap} event streams open, the most allowed; close one, or retry later.`, { retryAfterSeconds: RETRY_AFTER_SECONDS });

/**
 * Caps on open streams: per caller (API key, or user of an access token) and per workspace, counted in Redis
 * so every API process shares them, and per process, counted here. A slot in Redis is a member of a sorted set
 * scored by its lease's end: renewed while the stream lives, dropped when it ends, and forgotten by itself when
 * its process dies. Both sets carry the workspace as their hash tag (one slot on a cluster, one MULTI). Redis
 * unreachable: the per-process cap still holds, and the others are not applied (logged), as with the rate
 * limits.
 */
export function createStreamSlots(deps: { redis: RedisClient; prefix: string; perCaller: number; perWorkspace: number; perProcess: number; logger: Logger }) {
  const { redis, prefix, perCaller, perWorkspace, perProcess, logger } = deps;
  const held = new Map<string, { callerKey: string; workspaceKey: string }>();
  let renewer: NodeJS.Timeout | undefined;

  const keysOf = (tenantId: string, caller: string) => {
    const tag = `${prefix}:streams:{${tenantId}}`;
    return { callerKey: `${tag}:${caller}`, workspaceKey: `${tag}:workspace` };
  };

  /** Every held slot's lease moved on: one pipeline per workspace (a cluster serves one hash slot per pipeline). */
  function renewAll() {
    const until = Date.now() + SLOT_LEASE_MS;
    const byWorkspace = new Map<string, [string, { callerKey: string; workspaceKey: string }][]>();
    for (const entry of held) byWorkspace.set(entry[1].workspaceKey, [...(byWorkspace.get(entry[1].workspaceKey) ?? []), entry]);
    for (const [workspaceKey, slots] of byWorkspace) {
      const pipe = redis.pipeline();
      for (const [id, k] of slots) pipe.zadd(k.callerKey, until, id).zadd(workspaceKey, until, id).pexpire(k.callerKey, SLOT_LEASE_MS);
      pipe.pexpire(workspaceKey, SLOT_LEASE_MS);
      pipe.exec().catch((err: Error) => logger.warn({ err_code: 'stream_slots_unavailable', cause: err.message }, 'stream slots not renewed'));
    }
  }

  /**
   * Takes a slot for a new stream of `caller` (any key naming who holds the stream: an API key, a user, a web
   * chat visitor) in the workspace, or refuses with 429 too_many_streams naming the cap reached (`who` is what
   * the refusal calls the caller).
   */
  async function acquireFor(tenantId: string, caller: string, who: string): Promise<StreamSlot> {
    if (held.size >= perProcess) throw streamsRefused('This server', perProcess);
    const id = newId();
    const keys = keysOf(tenantId, caller);
    const now = Date.now();
    held.set(id, keys);
    let counts: [number, number] | undefined;
    try {
      // Added first, then counted: two streams racing for the last slot may both be refused, never both let in.
      const r = await redis
        .multi()
        .zremrangebyscore(keys.callerKey, '-inf', now)
        .zremrangebyscore(keys.workspaceKey, '-inf', now)
        .zadd(keys.callerKey, now + SLOT_LEASE_MS, id)
        .zadd(keys.workspaceKey, now + SLOT_LEASE_MS, id)
        .pexpire(keys.callerKey, SLOT_LEASE_MS)
        .pexpire(keys.workspaceKey, SLOT_LEASE_MS)
        .zcard(keys.callerKey)
        .zcard(keys.workspaceKey)
        .exec();
      counts = [Number(r?.[6]?.[1] ?? 0), Number(r?.[7]?.[1] ?? 0)];
    } catch (err) {
      logger.warn({ err_code: 'stream_slots_unavailable', cause: (err as Error)?.message }, 'stream caps per caller and workspace not applied');
    }
    const release = () => {
      if (!held.delete(id)) return;
      redis
        .multi()
        .zrem(keys.callerKey, id)
        .zrem(keys.workspaceKey, id)
        .exec()
        .catch(() => {});
      if (held.size === 0 && renewer) {
        clearInterval(renewer);
        renewer = undefined;
      }
    };
    if (counts && (counts[0] > perCaller || counts[1] > perWorkspace)) {
      release();
      throw counts[0] > perCaller ? streamsRefused(who, perCaller) : streamsRefused('This workspace', perWorkspace);
    }
    renewer ??= setInterval(renewAll, SLOT_RENEW_MS).unref();
    return { release };
  }

  return {
    /** Takes a slot for a new stream of `p`, or refuses with 429 too_many_streams naming the cap reached. */
    acquire: (p: Principal): Promise<StreamSlot> => acquireFor(p.tenantId, callerOf(p), p.apiKeyId ? 'This API key' : 'This user'),
    acquireFor,
    /** Streams open in this process. */
    open: () => held.size,
  };
}

export type StreamSlots = ReturnType<typeof createStreamSlots>;

/**
 * How much all of a process's streams may hand to their sockets in one turn of the event loop: at most
 * `bytesPerTurn`, and nothing more once `msPerTurn` has gone on it. Hundreds of streams woken by the same commit
 * each write a page, and socket writes are synchronous: 200 pages in one turn held every other request for tens
 * to hundreds of milliseconds (bench/streams.ts). What a write costs is not proportional to its bytes (on
 * loopback the kernel does the receiver's work in the writer's call, more when the receiver's buffer is full),
 * so the turn is bounded in time as well. Past the budget a stream waits for the next turn (oldest first), and
 * requests are served in between; a lone stream is never held back.
 */
export function createWriteTurns(bytesPerTurn: number, msPerTurn = 2) {
  let used = 0;
  let startedAt = 0;
  let scheduled = false;
  const waiting: (() => void)[] = [];
  const nextTurn = () => {
    used = 0;
    scheduled = false;
    for (const wake of waiting.splice(0)) wake();
  };
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(nextTurn);
  };
  const full = (bytes: number) => used > 0 && (used + bytes > bytesPerTurn || performance.now() - startedAt > msPerTurn);
  return {
    /** Resolves when `bytes` may be written in this turn. */
    async take(bytes: number): Promise<void> {
      while (full(bytes)) {
        await new Promise<void>((resolve) => {
          waiting.push(resolve);
          schedule();
        });
      }
      if (used === 0) startedAt = performance.now();
      used += bytes;
      schedule();
    },
  };
}
