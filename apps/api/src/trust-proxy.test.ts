import { describe, expect, it } from 'vitest';
import { parseApiEnv } from './env.js';
import { parseTrustProxy } from './trust-proxy.js';

describe('TETRALOOP_TRUST_PROXY', () => {
  it('reads what Express reads: true, false, a hop count, a list of addresses and subnets', () => {
    expect(parseTrustProxy('true')).toBe(true);
    expect(parseTrustProxy('false')).toBe(false);
    expect(parseTrustProxy('')).toBe(false);
    expect(parseTrustProxy('2')).toBe(2);
    expect(parseTrustProxy('loopback')).toBe('loopback');
    expect(parseTrustProxy('loopback, 10.0.0.0/8, fd00::/8')).toBe('loopback, 10.0.0.0/8, fd00::/8');
  });

  it('refuses an entry that is neither an address, a subnet nor a name', () => {
    expect(() => parseTrustProxy('yes')).toThrow(/yes/);
    expect(() => parseTrustProxy('loopback, 10.0.0.0/99')).toThrow();
  });
});

describe('TETRALOOP_TRUST_PROXY in the API environment', () => {
  const env = (more: Record<string, string> = {}) => ({ REDIS_URL: 'redis://127.0.0.1:6379', ...more });

  it('defaults to trusting no proxy, and a bad value stops the API naming the variable', () => {
    expect(parseApiEnv(env()).TETRALOOP_TRUST_PROXY).toBe(false);
    expect(parseApiEnv(env({ TETRALOOP_TRUST_PROXY: '1' })).TETRALOOP_TRUST_PROXY).toBe(1);
    expect(() => parseApiEnv(env({ TETRALOOP_TRUST_PROXY: 'yes' }))).toThrow(/TETRALOOP_TRUST_PROXY: .*yes/);
  });
});
