import { describe, expect, it } from 'vitest';
import {
  DEFAULT_ACCEPT_DURABILITY,
  durabilityRefusal,
  parseRedisVersion,
  shortfallOf,
  waitsForDurability,
} from './accept-durability.js';

const replicas = { ...DEFAULT_ACCEPT_DURABILITY, replicas: 2 };
const aof = { ...DEFAULT_ACCEPT_DURABILITY, waitAof: 'local' as const };

describe('accept durability', () => {
  it('waits for nothing by default', () => {
    expect(waitsForDurability(DEFAULT_ACCEPT_DURABILITY)).toBe(false);
    expect(waitsForDurability(replicas)).toBe(true);
    expect(waitsForDurability(aof)).toBe(true);
  });

  it('reads Redis versions', () => {
    expect(parseRedisVersion('7.0.15')).toEqual([7, 0, 15]);
    expect(parseRedisVersion('7.2.4-rc1')).toEqual([7, 2, 4]);
    expect(parseRedisVersion('unknown')).toBeUndefined();
  });

  it('refuses WAITAOF before Redis 7.2, naming the version, and without the AOF', () => {
    expect(durabilityRefusal(aof, { version: '7.0.15', aofEnabled: true })).toMatch(
      /^TETRALOOP_ACCEPT_WAITAOF=local needs Redis 7\.2\.0 or later \(WAITAOF\); the Redis at REDIS_URL is 7\.0\.15\./,
    );
    expect(durabilityRefusal(aof, { version: '6.2.14', aofEnabled: true })).toContain('is 6.2.14');
    expect(durabilityRefusal(aof, { version: 'unknown', aofEnabled: true })).toContain('is unknown');
    expect(durabilityRefusal(aof, { version: '7.2.0', aofEnabled: true })).toBeUndefined();
    expect(durabilityRefusal(aof, { version: '8.0.1', aofEnabled: true })).toBeUndefined();
    expect(durabilityRefusal(aof, { version: '7.4.1', aofEnabled: false })).toMatch(/appendonly yes/);
    // WAIT exists on every version, and replicas come and go: never refused at boot.
    expect(durabilityRefusal(replicas, { version: '5.0.0', aofEnabled: false })).toBeUndefined();
  });

  it('says what an accept left unconfirmed', () => {
    expect(shortfallOf(replicas, { replicas: 2, aofLocal: null })).toBeUndefined();
    expect(shortfallOf(replicas, { replicas: 3, aofLocal: null })).toBeUndefined();
    expect(shortfallOf(replicas, { replicas: 1, aofLocal: null })).toEqual({
      code: 'not_replicated',
      wanted: 2,
      acknowledged: 1,
    });
    expect(shortfallOf(aof, { replicas: null, aofLocal: true })).toBeUndefined();
    expect(shortfallOf(aof, { replicas: null, aofLocal: false })).toEqual({ code: 'not_persisted' });
    expect(shortfallOf({ ...aof, replicas: 1 }, { replicas: 0, aofLocal: false })).toMatchObject({
      code: 'not_replicated',
    });
  });
});
