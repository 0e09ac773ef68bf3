import { DomainError } from '../lib/errors';

/** What a refused sender is told to wait: a lane moves many items a second even at saturation. */
const RETRY_AFTER_SECONDS = 1;
/** How long a workspace counts as sending intake after its last request (for `sharedQueued`). */
const OTHERS_RECENT_MS = 1000;

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
 * Fair sharing of live intake between workspaces (issue 21), per API process: one lane per workspace.
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
 *   second, a workspace may have only `sharedQueued` items queued. Its further requests wait in its lane,
 *   which costs nothing while they wait; the burst is slowed to what leaves the host room for the others'
 *   messages, instead of taking every core and making each of theirs wait its turn for one. Alone, or with
 *   CPU to spare, a burst gets `perWorkspace` again.
 * - Counting is in memory, with no round trip on the hot path. With several API processes behind a balancer,
 *   each keeps its own lanes; the bound is then `perWorkspace` per process.
 */
export function createFairShare(o: { perWorkspace: number; maxWaiting: number; sharedQueued?: number; contended?: () => boolean }) {
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

  /** How many items the workspace may have queued right now. */
  const capOf = (tenantId: string) =>
    o.sharedQueued !== undefined && o.sharedQueued < o.perWorkspace && o.contended?.() && othersActive(tenantId, Date.now()) ? o.sharedQueued : o.perWorkspace;

  function wake(tenantId: string, lane: Lane) {
    const cap = lane.waiters.length > 0 ? capOf(tenantId) : o.perWorkspace;
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
      if (lane.waiters.length === 0 && (lane.queued === 0 || lane.queued + n <= capOf(tenantId))) {
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

export type FairShare = ReturnType<typeof createFairShare>;
