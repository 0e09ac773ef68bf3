/**
 * The minute buckets the time reports' percentiles are read from (issue 37). A percentile over any range of days
 * and any filter is exact only if the whole distribution is kept, so each day keeps a histogram of the minutes
 * measured, in fixed buckets:
 *
 * - 0 to 63 minutes: one bucket per minute (exact);
 * - from 64 minutes on: 32 buckets per doubling (64–65, 66–67, … 128–131, …), each at most 1/32 (3.1 %) of its own
 *   lower bound wide, up to 2^20 minutes (728 days); the last bucket holds everything longer.
 *
 * A percentile is the lower bound of the bucket holding the nearest-rank value (PostgreSQL's percentile_disc: the
 * first value whose cumulative count reaches ⌈p·n⌉), so it is exact below 64 minutes and at most 3.1 % below the
 * true minute above. The raw-SQL recomputation (reports:verify, the tests, the bench) buckets the same way, with
 * `width_bucket` over these same bounds, so "equal" means equal numbers, not close ones. Means are not bucketed:
 * each day also keeps the exact sum of minutes.
 */

const EXACT = 64;
const PER_DOUBLING = 32;
const LAST_EXPONENT = 19;

function bounds(): number[] {
  const out: number[] = [];
  for (let m = 0; m < EXACT; m++) out.push(m);
  for (let e = 6; e <= LAST_EXPONENT; e++) {
    const step = 2 ** (e - 5);
    for (let i = 0; i < PER_DOUBLING; i++) out.push(2 ** e + i * step);
  }
  return out;
}

/** Every bucket's lower bound in minutes, ascending; a bucket's number is its index here. */
export const BUCKET_BOUNDS: readonly number[] = bounds();

/** The bounds as a PostgreSQL int[] literal, for `width_bucket(minutes, bounds) - 1` in the raw recomputation. */
export const BUCKET_BOUNDS_LITERAL = `{${BUCKET_BOUNDS.join(',')}}`;

/** The bucket of a whole number of minutes (negative counts as 0). */
export function bucketOf(minutes: number): number {
  if (minutes < EXACT) return Math.max(0, Math.floor(minutes));
  let lo = EXACT;
  let hi = BUCKET_BOUNDS.length - 1;
  // The last bound at or below `minutes`.
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (BUCKET_BOUNDS[mid]! <= minutes) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** A histogram: bucket number → count (counts may be negative in a journal delta, never in a total). */
export type Histogram = Map<number, number>;

/** Adds `from` into `into` (a stored day's jsonb histogram, or another histogram). */
export function addInto(into: Histogram, from: Histogram | Record<string, number> | null | undefined): Histogram {
  if (!from) return into;
  const entries = from instanceof Map ? from.entries() : Object.entries(from).map(([k, v]) => [Number(k), v] as [number, number]);
  for (const [b, n] of entries) {
    const sum = (into.get(b) ?? 0) + n;
    if (sum === 0) into.delete(b);
    else into.set(b, sum);
  }
  return into;
}

/**
 * The nearest-rank percentile, as PostgreSQL's percentile_disc computes it: the first bucket whose cumulative
 * count reaches ⌈p·n⌉ (at least 1), reported as the bucket's lower bound. Null for an empty histogram.
 */
export function percentile(h: Histogram, p: number): number | null {
  let n = 0;
  for (const c of h.values()) n += c;
  if (n <= 0) return null;
  const rank = Math.max(1, Math.ceil(p * n));
  let seen = 0;
  for (const b of [...h.keys()].sort((x, y) => x - y)) {
    seen += h.get(b)!;
    if (seen >= rank) return BUCKET_BOUNDS[b]!;
  }
  return BUCKET_BOUNDS[BUCKET_BOUNDS.length - 1]!;
}
