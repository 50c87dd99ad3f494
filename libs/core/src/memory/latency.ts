/**
 * Call latencies kept as counts in fixed buckets, so a service's statistics stay the same size
 * however many calls it gets; percentiles are read as the upper bound of the bucket they fall in.
 * Pure.
 */

/** Upper bounds of the buckets, in ms; a last, open bucket holds everything slower. */
export const LATENCY_BUCKETS_MS = [
  10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 30_000, 60_000,
] as const;

/** The index of the bucket `ms` falls in (`LATENCY_BUCKETS_MS.length` for the open one). */
export function bucketOf(ms: number): number {
  const i = LATENCY_BUCKETS_MS.findIndex((bound) => ms <= bound);
  return i === -1 ? LATENCY_BUCKETS_MS.length : i;
}

/**
 * The `q` quantile (0–1) of the counts per bucket, as the upper bound of its bucket in ms; the
 * open bucket reads as twice the last bound. Undefined when there are no counts.
 */
export function quantile(counts: readonly number[], q: number): number | undefined {
  const total = counts.reduce((a, b) => a + b, 0);
  if (total === 0) return undefined;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    seen += counts[i] ?? 0;
    if (seen >= rank) return LATENCY_BUCKETS_MS[i] ?? LATENCY_BUCKETS_MS.at(-1)! * 2;
  }
  return undefined;
}
