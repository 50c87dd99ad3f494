import { describe, expect, it } from 'vitest';
import { mapTiming, type ItemSpan } from './map-timing.js';

/** Spans of these durations, each starting at 0 (only durations count). */
const spans = (...ms: (number | undefined)[]): (ItemSpan | undefined)[] =>
  ms.map((d) => (d === undefined ? undefined : { start: 0, end: d }));

describe('mapTiming', () => {
  it('takes the longest lane (items i, i + c, …) as the items’ critical path, not waves', () => {
    // c = 2: lane 0 runs 0, 2, 4 (10 + 10 + 10), lane 1 runs 1, 3 (50 + 5). Waves would say
    // max(10,50) + max(10,5) + 10 = 70; the lanes run on without waiting: 55.
    const timing = mapTiming(spans(10, 50, 10, 5, 10), 2);
    expect(timing).toEqual({
      total: 5,
      concurrency: 2,
      ran: 5,
      itemTimeMs: 85,
      longestItemMs: 50,
      itemsCriticalPathMs: 55,
      criticalLane: 1,
    });
  });

  it('counts nothing for an item that did not run, and has no lane when none did', () => {
    expect(mapTiming(spans(10, undefined, 30), 1)).toMatchObject({
      ran: 2,
      itemTimeMs: 40,
      itemsCriticalPathMs: 40,
      criticalLane: 0,
    });
    expect(mapTiming(spans(undefined, undefined), 4)).toMatchObject({
      total: 2,
      ran: 0,
      itemsCriticalPathMs: 0,
      criticalLane: null,
    });
    expect(mapTiming([], 10)).toMatchObject({ total: 0, itemsCriticalPathMs: 0, criticalLane: null });
  });

  it('with concurrency at least the list, is the longest item', () => {
    expect(mapTiming(spans(3, 9, 4), 10)).toMatchObject({ itemsCriticalPathMs: 9, criticalLane: 1 });
  });
});
