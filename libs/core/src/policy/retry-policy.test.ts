import { describe, expect, it } from 'vitest';
import { DEFAULT_RETRIES, RETRY_FLOOR_MS, maxRetries, retriesFor, retryDelay } from './retry-policy.js';

describe('retry policy', () => {
  it('retries by error class, with per-node overrides', () => {
    expect(retriesFor('server', DEFAULT_RETRIES)).toBe(2);
    expect(retriesFor('validation', DEFAULT_RETRIES)).toBe(0);
    expect(retriesFor('server', DEFAULT_RETRIES, { server: 5 })).toBe(5);
    expect(maxRetries(DEFAULT_RETRIES, { server: 5 })).toBe(5);
    expect(maxRetries(DEFAULT_RETRIES)).toBe(3);
  });

  it('retries a validation error only with other arguments: one retry per override', () => {
    const table = { ...DEFAULT_RETRIES, validation: 3 };
    expect(retriesFor('validation', table)).toBe(0);
    expect(retriesFor('validation', table, { vary: [{ args: {} }] })).toBe(1);
    expect(retriesFor('validation', DEFAULT_RETRIES, { validation: 2, vary: [{}, {}] })).toBe(2);
  });

  it('backs off exponentially within ±20 % jitter', () => {
    for (const [retry, base] of [
      [1, 1000],
      [2, 2000],
      [3, 4000],
    ] as const) {
      expect(retryDelay(retry, {}, undefined, () => 0)).toBe(base * 0.8);
      expect(retryDelay(retry, {}, undefined, () => 1)).toBe(base * 1.2);
    }
  });

  it('caps, floors and honours Retry-After', () => {
    expect(retryDelay(10, {}, undefined, () => 0.5)).toBe(30_000);
    expect(retryDelay(1, {}, { baseMs: 100, maxMs: 30_000, minMs: 500, jitter: 0.2 }, () => 0.5)).toBe(500);
    expect(retryDelay(1, { retryAfterMs: 2000 }, undefined, () => 0.5)).toBe(2000);
  });

  it('never waits less than the 0.5 s floor, whatever the policy or the server says', () => {
    const eager = { baseMs: 10, maxMs: 100, minMs: 10, jitter: 0 };
    expect(retryDelay(1, {}, eager)).toBe(RETRY_FLOOR_MS);
    expect(retryDelay(1, { retryAfterMs: 50 }, eager)).toBe(500);
  });

  it('cuts a Retry-After to the deployment ceiling, whatever it says', () => {
    const policy = { baseMs: 100, maxMs: 1000, minMs: 100, jitter: 0, retryAfterMaxMs: 5000 };
    expect(retryDelay(1, { retryAfterMs: 60_000 }, policy)).toBe(5000);
    expect(retryDelay(1, { retryAfterMs: 1e303 }, policy)).toBe(5000);
    expect(retryDelay(1, { retryAfterMs: Infinity }, policy)).toBe(5000);
    expect(retryDelay(1, { retryAfterMs: 1e303 }, undefined, () => 0.5)).toBe(600_000);
  });
});
