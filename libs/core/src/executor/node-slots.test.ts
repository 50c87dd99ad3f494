import { describe, expect, it } from 'vitest';
import { MAX_RECHECK_MS, parksWithin, RECHECK_MS, recheckDelayMs } from './node-slots.js';

/** The rechecks of a job that finds the cap each time it looks: doubling, then the longest. */
const LADDER = [RECHECK_MS, 2 * RECHECK_MS, 4 * RECHECK_MS, 8 * RECHECK_MS, MAX_RECHECK_MS, MAX_RECHECK_MS];

describe('the safety recheck of a node job parked at its run’s cap', () => {
  it('doubles with each park in a row, from the shortest up to the longest', () => {
    expect([0, 1, 2, 3, 4, 5].map(recheckDelayMs)).toEqual(LADDER);
    expect(RECHECK_MS).toBe(5_000);
    expect(MAX_RECHECK_MS).toBe(60_000);
  });

  it('stays at the longest however long the job waits', () => {
    expect(recheckDelayMs(10_000)).toBe(MAX_RECHECK_MS);
    expect(recheckDelayMs(parksWithin(86_400_000))).toBe(MAX_RECHECK_MS);
  });

  it('counts the parks from the time on the waiting list: each recheck that fell due in it', () => {
    // Rechecks fall due 5, 15, 35 and 75 s after the first park; from then on every 60 s.
    const due = [0, 5_000, 15_000, 35_000, 75_000, 135_000];
    expect(due.map(parksWithin)).toEqual([0, 1, 2, 3, 4, 4]);
    expect(due.map((waited) => recheckDelayMs(parksWithin(waited)))).toEqual(LADDER);
  });

  it('counts a recheck made a little early, by another worker’s clock, and not a wake well before it', () => {
    expect(parksWithin(15_000 - RECHECK_MS / 2)).toBe(2);
    expect(parksWithin(15_000 - RECHECK_MS / 2 - 1)).toBe(1);
    // Woken 1 s after it parked, it lost the slot to another job: it parks the shortest time again.
    expect(parksWithin(1_000)).toBe(0);
  });
});
