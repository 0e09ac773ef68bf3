import type { ConfigSection } from '../../src/config';
import { createGroupCommit } from '../../src/intake/group-commit';
import type { RedisClient } from '../../src/queue/connection';
import type { JobRun } from '../../src/queue/jobs';
import { answerBatch, type ItemResult } from '../../src/queue/results';

/**
 * The processor of an intake batch job (ingest, provider webhooks): every item is answered with one PUBLISH
 * to the API process waiting for it, and batches queued behind busy writes are written together (group
 * commit), so a transaction's size follows the backlog however many API processes formed the batches.
 * Live and bulk batches (see src/intake/fair-share.ts) are written apart.
 */
/** How long after a live write bulk writes stay one at a time. */
const LIVE_RECENT_MS = 1000;

export function intakeBatchProcessor<I extends { id: string }>(config: ConfigSection<'workers'>, redis: RedisClient, write: (items: I[]) => Promise<ItemResult[]>) {
  // Live batches have a group commit of their own, one write at a time: they never wait behind a burst's
  // (bulk) writes, which can carry hundreds of items each.
  // And while live intake is being written, or was within LIVE_RECENT_MS, bulk writes go one at a time and
  // none starts during a live write: on a host whose cores are all busy, the live write's statements are
  // not queued behind two burst transactions of hundreds of items each.
  let liveWrites = 0;
  let liveAt = -Infinity;
  const live = createGroupCommit<I>({
    slots: 1,
    maxItems: config.INTAKE_WRITE_MAX_ITEMS,
    write: async (items) => {
      liveWrites += 1;
      try {
        return await write(items);
      } finally {
        liveWrites -= 1;
        liveAt = Date.now();
        bulk.kick();
      }
    },
  });
  const bulk = createGroupCommit<I>({
    slots: config.INTAKE_WRITE_SLOTS,
    maxItems: config.INTAKE_WRITE_MAX_ITEMS,
    write,
    mayStart: (running) => liveWrites === 0 && (running === 0 || Date.now() - liveAt > LIVE_RECENT_MS),
  });
  return (data: { reply_to: string; bulk?: boolean; items: I[] }, run: JobRun) =>
    answerBatch(redis, data.reply_to, data.items, run, () => (data.bulk ? bulk : live).submit(data.items));
}
