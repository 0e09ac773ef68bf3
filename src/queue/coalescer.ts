import type { ResultBus, ItemResult } from './results';
import { TIMED_OUT } from './results';

/**
 * Coalesces concurrent requests into one queued job and hands each caller its own answer from the
 * process's result channel. A batch leaves when it holds `max` items or `windowMs` after its first; one
 * enqueue and one PUBLISH then serve the whole batch instead of a job and a wait per request.
 */
export function createCoalescer<T extends { id: string }>(deps: {
  bus: ResultBus;
  max: number;
  windowMs: number;
  waitMs: number;
  send(items: T[], replyTo: string): Promise<unknown>;
}) {
  const { bus } = deps;
  let pending: { item: T; fail: (err: unknown) => void }[] = [];
  let timer: NodeJS.Timeout | null = null;

  async function flush() {
    const batch = pending;
    pending = [];
    if (timer) clearTimeout(timer);
    timer = null;
    if (batch.length === 0) return;
    try {
      await deps.send(batch.map((b) => b.item), bus.channel);
    } catch (err) {
      for (const b of batch) b.fail(err);
    }
  }

  return {
    newId: () => bus.newId(),
    /** Resolves with the item's result, or TIMED_OUT when no answer came within `waitMs` (still processed once). */
    submit(item: T): Promise<ItemResult | typeof TIMED_OUT> {
      const answer = bus.expect(item.id, deps.waitMs);
      return new Promise((resolve, reject) => {
        answer.then(resolve, reject);
        pending.push({ item, fail: reject });
        if (pending.length >= deps.max) void flush();
        else if (!timer) timer = setTimeout(() => void flush(), deps.windowMs);
      });
    },
  };
}
