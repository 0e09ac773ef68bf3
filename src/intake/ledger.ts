import type { Executor } from '../db';

/**
 * The delivery ledger both intakes (channel ingest and helpdesk webhooks) write through: one row per distinct
 * delivery, claimed before anything else is written, so a redelivery, a retried job or a burst of copies
 * writes its effects once. The tables differ per intake; the algorithm is here, once.
 */
export interface LedgerStore<K, First> {
  /** The row's identity as one string (for maps and the key order). */
  id(key: K): string;
  /** Inserts the rows not there yet, in the order given; the correlation ids whose claim won. */
  claim(tx: Executor, tenantId: string, claims: (K & { correlationId: string })[]): Promise<Set<string>>;
  /** The rows already there, with the answer their first delivery got, by `id`. */
  get(tx: Executor, tenantId: string, keys: K[]): Promise<Map<string, First & { first_correlation_id: string }>>;
  /** Counts copies, each (key, correlation id) once however often a retried job presents it. */
  countCopies(tx: Executor, tenantId: string, copies: (K & { correlationId: string })[]): Promise<void>;
}

/** A delivery that was not the first of its key: answered with the first's result. */
export interface Copy<I, First> {
  item: I;
  first: First;
  /** The same job run again after a crash presents its own first delivery again: not a redelivery. */
  rerun: boolean;
}

/**
 * One workspace's deliveries inside the caller's transaction: claims ledger rows in key order (the only lock
 * taken before the writes, always in one order, so two batches never wait on each other in a cycle), writes
 * the fresh ones with `writeFresh` (which completes their rows and returns each one's answer by item id),
 * then answers every copy, of a delivery claimed in this batch or one already in the ledger, and counts the
 * copies that are redeliveries.
 */
export async function recordOnce<I extends { id: string }, K, First>(
  tx: Executor,
  tenantId: string,
  items: I[],
  o: { ledger: LedgerStore<K, First>; keyOf(item: I): K; writeFresh(fresh: I[]): Promise<Map<string, First>> },
): Promise<Copy<I, First>[]> {
  const { ledger, keyOf } = o;
  const idOf = (i: I) => ledger.id(keyOf(i));
  const byKey = [...items].sort((a, b) => idOf(a).localeCompare(idOf(b)));
  const won = await ledger.claim(tx, tenantId, byKey.map((i) => ({ ...keyOf(i), correlationId: i.id })));
  const fresh = items.filter((i) => won.has(i.id));
  const answers = await o.writeFresh(fresh);

  const claimedHere = new Map(fresh.map((i) => [idOf(i), i.id]));
  const copies = items.filter((i) => !won.has(i.id));
  const earlier = await ledger.get(tx, tenantId, copies.filter((c) => !claimedHere.has(idOf(c))).map(keyOf));
  const out: Copy<I, First>[] = [];
  const counted: (K & { correlationId: string })[] = [];
  for (const item of copies) {
    const here = claimedHere.get(idOf(item));
    const first = here ? { ...answers.get(here)!, first_correlation_id: here } : earlier.get(idOf(item))!;
    const rerun = first.first_correlation_id === item.id;
    if (!rerun) counted.push({ ...keyOf(item), correlationId: item.id });
    out.push({ item, first, rerun });
  }
  await ledger.countCopies(tx, tenantId, counted);
  return out;
}
