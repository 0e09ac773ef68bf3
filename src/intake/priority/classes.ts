import { createGroupCommit } from '../group-commit';
import type { ItemResult } from '../../queue/results';

/**
 * The intake-priority room, live and bulk: an intake item is live, or bulk when its workspace is in a burst (the
 * lanes decide, see lanes.ts). The class travels twice: as the job's priority (Redis orders the queue by it) and
 * as `bulk` in the job's data (the worker writes the two classes apart, see `createClassedWrites`).
 */

/** BullMQ takes jobs without a priority before any with one: bulk batches carry this one. */
export const BULK_PRIORITY = 10;

/** What a batch of the class is queued with: its priority (bulk only) and its `bulk` mark. */
export const jobClass = (bulk: boolean): { priority?: number; bulk: boolean } => (bulk ? { priority: BULK_PRIORITY, bulk } : { bulk });

/** How long after a live write bulk writes stay one at a time. */
const LIVE_RECENT_MS = 1000;

/**
 * A worker's intake writes by class (group commit, issue 20): live batches have a group commit of their own, one
 * write at a time, so they never wait behind a burst's (bulk) writes, which can carry hundreds of items each.
 * And while live intake is being written, or was within LIVE_RECENT_MS, bulk writes go one at a time and none
 * starts during a live write: on a host whose cores are all busy, the live write's statements are not queued
 * behind two burst transactions of hundreds of items each. Otherwise bulk writes have `slots` in flight.
 */
export function createClassedWrites<I extends { id: string }>(o: { slots: number; maxItems: number; write: (items: I[]) => Promise<ItemResult[]> }) {
  let liveWrites = 0;
  let liveAt = -Infinity;
  const live = createGroupCommit<I>({
    slots: 1,
    maxItems: o.maxItems,
    write: async (items) => {
      liveWrites += 1;
      try {
        return await o.write(items);
      } finally {
        liveWrites -= 1;
        liveAt = Date.now();
        bulk.kick();
      }
    },
  });
  const bulk = createGroupCommit<I>({
    slots: o.slots,
    maxItems: o.maxItems,
    write: o.write,
    mayStart: (running) => liveWrites === 0 && (running === 0 || Date.now() - liveAt > LIVE_RECENT_MS),
  });
  /** Writes the items with their class's group commit. */
  return (items: I[], isBulk: boolean | undefined): Promise<ItemResult[]> => (isBulk ? bulk : live).submit(items);
}
