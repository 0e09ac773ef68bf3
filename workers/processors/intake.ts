import type { ConfigSection } from '../../src/config';
import { createClassedWrites } from '../../src/intake/priority';
import type { RedisClient } from '../../src/queue/connection';
import type { JobRun } from '../../src/queue/jobs';
import { answerBatch, type ItemResult } from '../../src/queue/results';

/**
 * The processor of an intake batch job (ingest, provider webhooks): every item is answered with one PUBLISH
 * to the API process waiting for it, and batches queued behind busy writes are written together (group
 * commit), so a transaction's size follows the backlog however many API processes formed the batches.
 * Live and bulk batches are written apart, live first (src/intake/priority/classes.ts).
 */
export function intakeBatchProcessor<I extends { id: string }>(config: ConfigSection<'workers'>, redis: RedisClient, write: (items: I[]) => Promise<ItemResult[]>) {
  const writeByClass = createClassedWrites<I>({ slots: config.INTAKE_WRITE_SLOTS, maxItems: config.INTAKE_WRITE_MAX_ITEMS, write });
  return (data: { reply_to: string; bulk?: boolean; items: I[] }, run: JobRun) => answerBatch(redis, data.reply_to, data.items, run, () => writeByClass(data.items, data.bulk));
}
