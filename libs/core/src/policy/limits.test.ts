import { describe, expect, it } from 'vitest';
import { callLimit } from './limits.js';

describe('callLimit', () => {
  const base = {
    nodeTimeoutMs: 10_000,
    now: 1_000,
    deadlineAt: null,
    toolTimeBudgetMs: undefined,
    toolTimeUsedMs: 0,
  };

  it('is the node timeout when nothing is tighter', () => {
    expect(callLimit(base)).toEqual({ ms: 10_000, kind: 'timeout' });
  });

  it('is the time left before the run deadline when that is tighter', () => {
    expect(callLimit({ ...base, deadlineAt: 4_000 })).toEqual({ ms: 3_000, kind: 'deadline' });
  });

  it('is the tool time left in the budget when that is tighter', () => {
    expect(
      callLimit({ ...base, deadlineAt: 60_000, toolTimeBudgetMs: 2_500, toolTimeUsedMs: 1_000 }),
    ).toEqual({
      ms: 1_500,
      kind: 'budget',
    });
  });
});
