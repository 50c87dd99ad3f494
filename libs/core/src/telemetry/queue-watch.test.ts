import { describe, expect, it } from 'vitest';
import { STALL_CHECKS, nextStall } from './queue-watch.js';

describe('the stall alarm', () => {
  it('turns on after 6 checks with the same pending count, and only while work is pending', () => {
    let state: { pending: number; unchanged: number } | undefined;
    const seen: boolean[] = [];
    for (let i = 0; i <= STALL_CHECKS; i++) {
      const next = nextStall(state, 4);
      seen.push(next.stalled);
      state = next;
    }
    expect(seen).toEqual([false, false, false, false, false, false, true]);
    expect(nextStall(state, 3).stalled).toBe(false);
    let idle: { pending: number; unchanged: number } | undefined;
    for (let i = 0; i < 10; i++) idle = nextStall(idle, 0);
    expect(idle).toMatchObject({ unchanged: 0 });
  });
});
