import { isDataError } from '../db';
import { DomainError, type ErrorCode } from '../lib/errors';
import type { ItemResult } from '../queue/results';

export interface Refusal {
  code: ErrorCode;
  detail: string;
}

/**
 * Errors one item can cause that roll a whole batch back: a refusal found in the transaction, a value
 * PostgreSQL cannot store, a parent deleted meanwhile (foreign key), a lost insert race, a deadlock or a
 * serialization failure. After one of these each item runs alone, so it cannot fail the others.
 */
const ITEM_SQLSTATES = new Set(['23503', '23505', '40P01', '40001']);
const oneItemCould = (err: unknown) =>
  err instanceof DomainError || isDataError(err) || ITEM_SQLSTATES.has(String((err as { code?: unknown })?.code));

/**
 * One batch job of an intake: every item in one transaction (one commit, one WAL flush); when that fails for
 * a reason one item could cause, each item alone, where an item's refusal (`refusalOf`: a domain refusal, or
 * what the intake calls an unstorable value or a vanished parent) is its answer. Anything else (a lost
 * database) fails the job, so BullMQ retries it whole; the ledger makes the retry safe.
 */
export async function runBatch<I extends { id: string }>(
  items: I[],
  o: { write(items: I[]): Promise<Map<string, ItemResult>>; refusalOf(err: unknown): Refusal | null },
): Promise<ItemResult[]> {
  if (items.length > 1) {
    try {
      const results = await o.write(items);
      return items.map((i) => results.get(i.id)!);
    } catch (err) {
      if (!oneItemCould(err)) throw err;
    }
  }
  const results: ItemResult[] = [];
  for (const item of items) {
    try {
      results.push((await o.write([item])).get(item.id)!);
    } catch (err) {
      const refusal = err instanceof DomainError ? { code: err.code, detail: err.detail } : o.refusalOf(err);
      if (!refusal) throw err;
      results.push({ id: item.id, ok: false, error: refusal });
    }
  }
  return results;
}
