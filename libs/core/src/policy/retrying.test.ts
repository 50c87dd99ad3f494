import { describe, expect, it } from 'vitest';
import { retrying } from './retrying.js';

/** The smallest backoff: every retry waits the 0.5 s floor (`RETRY_FLOOR_MS`). */
const fast = { baseMs: 1, maxMs: 2, minMs: 1, jitter: 0 };

/** An operation that throws its first `failures` tries, then answers how many tries it took. */
const failing = (failures: number) => {
  let tries = 0;
  return {
    tries: () => tries,
    run: () => {
      tries += 1;
      return tries <= failures ? Promise.reject(new Error(`try ${tries}`)) : Promise.resolve(tries);
    },
  };
};

describe('retrying', () => {
  it('tries again after each failure until the operation succeeds, telling each retry', async () => {
    const op = failing(3);
    const retries: number[] = [];
    const answer = await retrying(op.run, {
      forMs: 60_000,
      backoff: fast,
      onRetry: (_err, retry, delayMs) => {
        expect(delayMs).toBeGreaterThanOrEqual(500);
        retries.push(retry);
      },
    });
    expect(answer).toBe(4);
    expect(retries).toEqual([1, 2, 3]);
  });

  it('answers the last error once the next delay would pass its time', async () => {
    const op = failing(Infinity);
    // Every retry waits at least 0.5 s: within 0.7 s, one retry fits and a second would not.
    await expect(retrying(op.run, { forMs: 700, backoff: fast })).rejects.toThrow('try 2');
    expect(op.tries()).toBe(2);
  });

  it('answers at once an error it is told not to retry', async () => {
    const op = failing(Infinity);
    await expect(
      retrying(op.run, { forMs: 60_000, backoff: fast, retryIf: (err) => !String(err).includes('try 1') }),
    ).rejects.toThrow('try 1');
    expect(op.tries()).toBe(1);
  });

  it('stops at once when its signal is aborted', async () => {
    const op = failing(Infinity);
    const stop = new AbortController();
    stop.abort();
    await expect(retrying(op.run, { forMs: 60_000, signal: stop.signal })).rejects.toThrow('try 1');
    expect(op.tries()).toBe(1);
  });
});
