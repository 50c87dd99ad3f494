import { describe, expect, it } from 'vitest';
import { hashTagOf, keySlot } from './key-slot.js';

describe('keySlot', () => {
  it('matches the slots Redis Cluster documents', () => {
    // CLUSTER KEYSLOT answers these on any Redis 7.
    expect(keySlot('123456789')).toBe(12_739);
    expect(keySlot('foo')).toBe(12_182);
    expect(keySlot('somekey')).toBe(11_058);
  });

  it('hashes only the first non-empty hash tag', () => {
    expect(hashTagOf('t:run:{abc}:events')).toBe('abc');
    expect(keySlot('a{user1000}.following')).toBe(keySlot('b{user1000}.followers'));
    expect(hashTagOf('foo{}{bar}')).toBe('foo{}{bar}');
    expect(hashTagOf('foo{{bar}}zap')).toBe('{bar');
  });
});
