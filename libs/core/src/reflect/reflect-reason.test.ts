import { describe, expect, it } from 'vitest';
import { DEFAULT_TRIGGERS, reflectReason } from './memory-service.js';

const quiet = { sinceReflection: 1, failStreak: 0, worstService: 0 };
const small = { status: 'succeeded', nodes: 3, durationMs: 2000 };

describe('what asks for a reflection', () => {
  it('is the record first: runs since the last one, a failure streak, a failing service', () => {
    expect(reflectReason(DEFAULT_TRIGGERS, { ...quiet, sinceReflection: 50 }, small)).toBe('runs');
    expect(reflectReason(DEFAULT_TRIGGERS, { ...quiet, failStreak: 3 }, small)).toBe('failure-streak');
    expect(reflectReason(DEFAULT_TRIGGERS, { ...quiet, worstService: 5 }, small)).toBe('service-failures');
    expect(reflectReason(DEFAULT_TRIGGERS, quiet, small)).toBeUndefined();
  });

  it('is a large task completed: many nodes or a long run, that succeeded', () => {
    expect(reflectReason(DEFAULT_TRIGGERS, quiet, { ...small, nodes: 50 })).toBe('large-run');
    expect(reflectReason(DEFAULT_TRIGGERS, quiet, { ...small, durationMs: 600_000 })).toBe('large-run');
    expect(
      reflectReason(DEFAULT_TRIGGERS, quiet, { ...small, nodes: 49, durationMs: 599_999 }),
    ).toBeUndefined();
    // A large run that failed is the failure triggers' business, not this one's.
    expect(reflectReason(DEFAULT_TRIGGERS, quiet, { ...small, status: 'failed', nodes: 80 })).toBeUndefined();
    const tuned = { ...DEFAULT_TRIGGERS, largeRunNodes: 3 };
    expect(reflectReason(tuned, quiet, small)).toBe('large-run');
  });
});
