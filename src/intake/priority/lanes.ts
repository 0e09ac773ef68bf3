import { DomainError } from '../../lib/errors';

/** What a refused sender is told to wait: a lane moves many items a second even at saturation. */
const RETRY_AFTER_SECONDS = 1;
/** How long a workspace counts as sending intake after its last request (for `sharedQueued`). */
const OTHERS_RECENT_MS = 1000;
/**
 * Once the host has CPU to spare again while others send, a burst's share grows back by doubling at most
 * this often, instead of jumping from `sharedQueued` to `perWorkspace` at once (see `capOf`).
 */
export const SHARE_RAMP_MS = 500;

interface Waiter {
  n: number;
  go: () => void;
}

/** Entry to a lane: hand the items back once answered; `bulk` says they come from a burst (see below). */
export interface Entered {
  release: () => void;
  bulk: boolean;
}

interface Lane {
  queued: number;
  waitingItems: number;
  waiters: Waiter[];
}

/**
 * The intake-priority room, the lanes: fair sharing of live intake between workspaces (issue 21), per API
 * process: one lane per workspace (INTAKE_WORKSPACE_QUEUED, INTAKE_WORKSPACE_WAITING,
 * INTAKE_WORKSPACE_SHARED_QUEUED). Moved from src/intake/fair-share.ts (issue 35).
 *
 * Every workspace's intake items share one queue to the workers, first in, first out. A burst in one workspace
 * used to put hundreds of its items ahead of every other workspace's next message. Now a workspace may have
 * at most `perWorkspace` items queued from this process; its further items wait in its own lane, here, until
 * its earlier ones are answered. A quiet workspace's message therefore goes to the queue at once and waits
 * behind at most `perWorkspace` items of each busy workspace, however deep their bursts are.
 *
 * - A lane holds at most `maxWaiting` items. Past that the request is answered 429 `throttled` with
 *   Retry-After and nothing is written, so a burst costs memory in proportion to its lanes, not its size.
 * - A message larger than `perWorkspace` still goes, alone, once its lane is empty.
 * - Items of a workspace in a burst (they waited in its lane, or half its share was already queued) are
 *   `bulk`: the edge queues them behind everyone else's (a lower job priority), so what a quiet workspace
 *   sends is worked off first, and the burst takes the capacity that is left, not less.
 * - While the host's CPUs are saturated (`contended`) and another workspace sent intake within the last
 *   second, a workspace with a backlog (requests waiting in its lane) may have only `sharedQueued` items
 *   queued; one without, up to half its share (see `capOf`). Its further requests wait in its lane,
 *   which costs nothing while they wait; the burst is slowed to what leaves the host room for the others'
 *   messages, instead of taking every core and making each of theirs wait its turn for one. With CPU to
 *   spare its share doubles back every SHARE_RAMP_MS; alone, a burst gets `perWorkspace` at once.
 * - Counting is in memory, with no round trip on the hot path. With several API processes behind a balancer,
 *   each keeps its own lanes; the bound is then `perWorkspace` per process.
 */
export function createLanes(o: { perWorkspace: number; maxWaiting: number; sharedQueued?: number; contended?: () => boolean }) {
  const lanes = new Map<string, Lane>();
  /** When each workspace last asked to queue intake (kept for OTHERS_RECENT_MS). */
  const lastSeen = new Map<string, number>();

  /** Whether a workspace other than this one sent intake within OTHERS_RECENT_MS. */
  function othersActive(tenantId: string, now: number): boolean {
    let others = false;
    for (const [id, at] of lastSeen) {
      if (now - at > OTHERS_RECENT_MS) lastSeen.delete(id);
      else if (id !== tenantId) others = true;
    }
    return others;
  }

  /**
   * The share a workspace gets while others send: `sharedQueued` while the host is saturated; once it is
   * not, doubled every SHARE_RAMP_MS up to `perWorkspace`. Jumping straight back to the whole share let a
   * flood's parked requests (a hundred connections) in all at once the moment the host looked calm; the
   * burst resaturated the cores, and every quiet message in flight meanwhile waited about 100 ms, every few
   * seconds. One allowance per process: saturation is the host's, not a workspace's.
   */
  let allowance = o.sharedQueued ?? o.perWorkspace;
  let allowanceAt = 0;
  function sharedAllowance(now: number): number {
    if (o.contended?.()) {
      allowance = o.sharedQueued!;
      allowanceAt = now;
    } else if (allowance < o.perWorkspace && now - allowanceAt >= SHARE_RAMP_MS) {
      allowance = Math.min(o.perWorkspace, allowance * 2);
      allowanceAt = now;
    }
    return allowance;
  }

  /**
   * How many items the workspace may have queued right now. Only a backlog is squeezed to the shared share: a
   * workspace with nothing waiting in its lane may queue up to half its share (where its items turn bulk) on a
   * saturated host too. A steady sender (20 messages a second) squeezed to 2 along with the flood beside it could
   * take only 2 per round trip: once a round trip passed 100 ms its own lane grew for as long as it sent, and its
   * p50 went from 40 ms to 1.5–2.5 s while another workspace flooded files (bench/attachments.ts). A flood still
   * reaches half its share at once, then has a backlog, and stays at the shared share for as long as it keeps one.
   */
  function capOf(tenantId: string, lane: Lane): number {
    if (o.sharedQueued === undefined || o.sharedQueued >= o.perWorkspace) return o.perWorkspace;
    const now = Date.now();
    if (!othersActive(tenantId, now)) return o.perWorkspace;
    const shared = sharedAllowance(now);
    return lane.waiters.length > 0 ? shared : Math.max(shared, Math.floor(o.perWorkspace / 2));
  }

  function wake(tenantId: string, lane: Lane) {
    const cap = lane.waiters.length > 0 ? capOf(tenantId, lane) : o.perWorkspace;
    while (lane.waiters.length > 0) {
      const next = lane.waiters[0]!;
      if (lane.queued > 0 && lane.queued + next.n > cap) break;
      lane.waiters.shift();
      lane.waitingItems -= next.n;
      lane.queued += next.n;
      next.go();
    }
    if (lane.queued === 0 && lane.waiters.length === 0) lanes.delete(tenantId);
  }

  function releaser(tenantId: string, lane: Lane, n: number) {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      lane.queued -= n;
      wake(tenantId, lane);
    };
  }

  return {
    /**
     * Resolves when `n` items of the workspace may be queued (at once, unless its lane is full); `release`
     * hands them back once they are answered or given up on (call it exactly once). Throws `throttled` when
     * the lane already holds `maxWaiting` items.
     */
    async enter(tenantId: string, n: number): Promise<Entered> {
      let lane = lanes.get(tenantId);
      if (!lane) {
        lane = { queued: 0, waitingItems: 0, waiters: [] };
        lanes.set(tenantId, lane);
      }
      if (o.perWorkspace <= 0) {
        lane.queued += n;
        return { release: releaser(tenantId, lane, n), bulk: false };
      }
      lastSeen.set(tenantId, Date.now());
      if (lane.waiters.length === 0 && (lane.queued === 0 || lane.queued + n <= capOf(tenantId, lane))) {
        const bulk = lane.queued * 2 >= o.perWorkspace;
        lane.queued += n;
        return { release: releaser(tenantId, lane, n), bulk };
      }
      if (lane.waitingItems + n > o.maxWaiting) {
        throw new DomainError('throttled', 'This workspace is sending more intake than the service is taking from it; retry later.', { retryAfterSeconds: RETRY_AFTER_SECONDS });
      }
      const l = lane;
      l.waitingItems += n;
      await new Promise<void>((go) => l.waiters.push({ n, go }));
      return { release: releaser(tenantId, l, n), bulk: true };
    },
    /** Items queued and waiting per workspace with a lane (for tests and metrics). */
    lanes: () => new Map([...lanes].map(([id, l]) => [id, { queued: l.queued, waiting: l.waitingItems }])),
  };
}

export type Lanes = ReturnType<typeof createLanes>;
