import type { Logger } from 'pino';

/**
 * Work a request causes that its caller does not wait for (after commit: the triggered macros lookup): it
 * starts at once, the answer goes out without it, and a failure is logged, never answered. Shutdown waits
 * for what is still running (`settle`), so stopping a process does not drop a trigger that was committed.
 */
export function createAfterAnswer(logger: Logger) {
  const running = new Set<Promise<void>>();
  return {
    run(what: string, work: () => Promise<void>): void {
      const p: Promise<void> = work()
        .catch((err: unknown) => logger.warn({ err_code: 'after_answer_failed', what, cause: (err as Error)?.message }, 'work after the answer failed'))
        .finally(() => running.delete(p));
      running.add(p);
    },
    /** Resolves once nothing started by `run` is still running (what they start meanwhile included). */
    async settle(): Promise<void> {
      while (running.size > 0) await Promise.all([...running]);
    },
  };
}

export type AfterAnswer = ReturnType<typeof createAfterAnswer>;
