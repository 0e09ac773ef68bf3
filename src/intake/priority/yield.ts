import type { IntakePressure } from './pressure';

/** How often background work that makes way for intake looks again. */
const YIELD_CHECK_MS = 100;

/**
 * Background work (outbound webhook sends, rollup folds, sweeps, prunes) waits here while live intake saturates
 * the host, up to `maxMs`, so intake keeps the cores; bounded, so sustained saturation slows background work but
 * never stops it. Resolves with how long it waited.
 */
export async function makeWayForIntake(pressure: IntakePressure, maxMs: number): Promise<number> {
  const started = Date.now();
  const until = started + maxMs;
  while (Date.now() < until && (await pressure.saturated())) await new Promise((r) => setTimeout(r, YIELD_CHECK_MS));
  return Date.now() - started;
}

/** How background work yields to live intake: one bound (BACKGROUND_INTAKE_YIELD_MS) for every kind of it. */
export interface BackgroundYield {
  /** Waits, at most the bound, while live intake saturates the host; resolves with how long it waited. */
  makeWay(): Promise<number>;
  /** Runs background work after making way (the maintenance and rollup jobs wrap theirs in it). */
  run<T>(work: () => Promise<T>): Promise<T>;
}

/**
 * The one yield of background work: the webhook sender makes way before each round, rollup folds and sweeps, the
 * SLA sweep and prunes before they run, all up to the same `maxMs`. `pressure` is read when asked (a test may
 * replace its `saturated`).
 */
export function createBackgroundYield(pressure: IntakePressure, maxMs: number): BackgroundYield {
  const makeWay = () => makeWayForIntake(pressure, maxMs);
  return {
    makeWay,
    async run(work) {
      await makeWay();
      return work();
    },
  };
}
