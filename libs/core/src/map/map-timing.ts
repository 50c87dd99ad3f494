/**
 * How long a map's items took against how long the map took (pure), for `explain`.
 *
 * A map runs its items in lanes, not waves: with concurrency c, lane l holds items l, l + c,
 * l + 2c, … and an item's completion starts the next item of its lane (state/lua/map-start-6.lua,
 * complete-item-6.lua). So the items' critical path is the longest lane: the sum of its items'
 * durations, one after another. Nothing waits for a wave to finish, so "the longest item of each
 * wave, summed" would overstate it, and "the longest item × ceil(total ÷ c)" more so. The map's
 * wall time over this path is the cost of running items as jobs (enqueueing the next item of a
 * lane, picking it up, recording it) plus the map's own start and settle.
 */

/** An item's span, epoch ms; undefined for an item that has not run in the map's execution. */
export interface ItemSpan {
  readonly start: number;
  readonly end: number;
}

export interface MapTiming {
  /** Items in the list. */
  readonly total: number;
  readonly concurrency: number;
  /** Items that ran in the map's execution and finished (succeeded or failed). */
  readonly ran: number;
  /** Their durations, summed. */
  readonly itemTimeMs: number;
  readonly longestItemMs: number;
  /** The longest lane: its items' durations, summed. */
  readonly itemsCriticalPathMs: number;
  /** The lane it is (0 … concurrency − 1); null when no item ran. */
  readonly criticalLane: number | null;
}

/** The timing of a map's items; `spans[i]` is item i's, in item order. */
export function mapTiming(spans: readonly (ItemSpan | undefined)[], concurrency: number): MapTiming {
  const c = Math.max(1, Math.floor(concurrency));
  const lanes = new Array<number>(Math.min(c, spans.length)).fill(0);
  let ran = 0;
  let itemTimeMs = 0;
  let longestItemMs = 0;
  spans.forEach((span, i) => {
    if (!span) return;
    const ms = Math.max(0, span.end - span.start);
    ran += 1;
    itemTimeMs += ms;
    longestItemMs = Math.max(longestItemMs, ms);
    lanes[i % c]! += ms;
  });
  let criticalLane: number | null = null;
  lanes.forEach((ms, lane) => {
    if (ms > 0 && (criticalLane === null || ms > lanes[criticalLane]!)) criticalLane = lane;
  });
  return {
    total: spans.length,
    concurrency: c,
    ran,
    itemTimeMs,
    longestItemMs,
    itemsCriticalPathMs: criticalLane === null ? 0 : lanes[criticalLane]!,
    criticalLane,
  };
}
