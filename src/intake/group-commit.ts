import type { ItemResult } from '../queue/results';

/**
 * Group commit for intake batches in a worker process (issue 20): at most `slots` writes (transactions) run at
 * once; batches that arrive while every slot is busy wait, and the next free slot writes all of them together
 * (up to `maxItems`). So the size of a write follows the backlog where it forms, in the worker: a quiet
 * system writes each batch at once, a busy one writes many queued batches per transaction, however many API
 * processes (each coalescing only the requests it holds) produced them.
 *
 * Each batch still belongs to its own job: it gets its own items' answers, and when a merged write fails for
 * a reason no item caused (a lost database) every batch in it fails, so BullMQ retries each; the intake
 * ledger makes those retries safe.
 */
export function createGroupCommit<I extends { id: string }>(o: {
  slots: number;
  maxItems: number;
  write(items: I[]): Promise<ItemResult[]>;
  /** Asked before each write starts: false holds the queue until the next `kick` or a write of its own ends. */
  mayStart?: (running: number) => boolean;
}) {
  interface Waiting {
    items: I[];
    resolve(results: ItemResult[]): void;
    reject(err: unknown): void;
  }
  const queue: Waiting[] = [];
  let running = 0;
  const stats = { writes: 0, batches: 0, items: 0 };

  /**
   * Takes queued batches, oldest first, while they fit (the first always goes, whatever its size). A write
   * answers by item id, so a batch sharing an id with one already taken waits for the next write.
   */
  function take(): Waiting[] {
    const out: Waiting[] = [];
    const ids = new Set<string>();
    let n = 0;
    while (queue.length > 0) {
      const next = queue[0]!;
      if (out.length > 0 && (n + next.items.length > o.maxItems || next.items.some((i) => ids.has(i.id)))) break;
      queue.shift();
      for (const i of next.items) ids.add(i.id);
      n += next.items.length;
      out.push(next);
    }
    return out;
  }

  async function drain(): Promise<void> {
    while (queue.length > 0 && running < o.slots && (o.mayStart?.(running) ?? true)) {
      const group = take();
      running += 1;
      void writeGroup(group).finally(() => {
        running -= 1;
        void drain();
      });
    }
  }

  async function writeGroup(group: Waiting[]) {
    const items = group.flatMap((w) => w.items);
    stats.writes += 1;
    stats.batches += group.length;
    stats.items += items.length;
    try {
      // The write answers in item order: each batch gets its own stretch back.
      const results = await o.write(items);
      let at = 0;
      for (const w of group) {
        w.resolve(results.slice(at, at + w.items.length));
        at += w.items.length;
      }
    } catch (err) {
      for (const w of group) w.reject(err);
    }
  }

  return {
    /** The batch's answers, one per item in its order, once the write that carried it committed. */
    submit(items: I[]): Promise<ItemResult[]> {
      return new Promise((resolve, reject) => {
        queue.push({ items, resolve, reject });
        void drain();
      });
    },
    /** Looks again whether a held write may start (`mayStart` changed its mind). */
    kick: () => void drain(),
    /** Writes so far, and the batches and items they carried (what merging saved). */
    stats: () => ({ ...stats }),
  };
}

export type GroupCommit<I extends { id: string }> = ReturnType<typeof createGroupCommit<I>>;
