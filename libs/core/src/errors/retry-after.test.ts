import { describe, expect, it } from 'vitest';
import { parseRetryAfter, RETRY_AFTER_CEILING_MS } from './retry-after.js';

describe('Retry-After', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');

  it('reads seconds and dates', () => {
    expect(parseRetryAfter('2', now)).toEqual({ retryAfterMs: 2000 });
    expect(parseRetryAfter('0.5', now)).toEqual({ retryAfterMs: 500 });
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:10 GMT', now)).toEqual({ retryAfterMs: 10_000 });
    expect(parseRetryAfter('Wed, 31 Dec 2025 00:00:00 GMT', now)).toEqual({ retryAfterMs: 0 });
  });

  it('clamps what no timer or date could hold to the ceiling', () => {
    for (const value of ['1e300', 'Infinity', '99999999999', 'Fri, 31 Dec 9999 23:59:59 GMT'])
      expect(parseRetryAfter(value, now), value).toEqual({ retryAfterMs: RETRY_AFTER_CEILING_MS });
    const at = new Date(now + RETRY_AFTER_CEILING_MS);
    expect(at.toISOString()).toBe('2026-01-02T00:00:00.000Z');
  });

  it('ignores what is not a delay', () => {
    for (const value of [undefined, null, '', ' ', '-1', 'soon', 'NaN'])
      expect(parseRetryAfter(value, now), String(value)).toEqual({});
  });
});
