import { describe, expect, it } from 'vitest';
import { MAX_RECHECK_MS, RECHECK_MS, recheckDelayMs } from './node-slots.js';

describe('the safety recheck of a node job parked at its run’s cap', () => {
  it('doubles with each park in a row, from the shortest up to the longest', () => {
    expect([0, 1, 2, 3, 4, 5].map(recheckDelayMs)).toEqual([
      RECHECK_MS,
      2 * RECHECK_MS,
      4 * RECHECK_MS,
      8 * RECHECK_MS,
      MAX_RECHECK_MS,
      MAX_RECHECK_MS,
    ]);
    expect(RECHECK_MS).toBe(5_000);
    expect(MAX_RECHECK_MS).toBe(60_000);
  });

  it('stays at the longest however long the job waits', () => {
    expect(recheckDelayMs(10_000)).toBe(MAX_RECHECK_MS);
  });
});
