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
export function intakeBatchProcessor<I extends { id: string }>(config: ConfigSection<'workers'>, redis: RedisClient, write: (items: I[]) => Promise<ItemResult[]>) {
  // Live batches have a group commit of their own, one write at a time: they never wait behind a burst's
  // (bulk) writes, which can carry hundreds of items each.
  const live = createGroupCommit({ slots: 1, maxItems: config.INTAKE_WRITE_MAX_ITEMS, write });
  const bulk = createGroupCommit({ slots: config.INTAKE_WRITE_SLOTS, maxItems: config.INTAKE_WRITE_MAX_ITEMS, write });
  return (data: { reply_to: string; bulk?: boolean; items: I[] }, run: JobRun) =>
    answerBatch(redis, data.reply_to, data.items, run, () => (data.bulk ? bulk : live).submit(data.items));
}
