/** The plan cache's script (`lua-plan/`), called through PlanCacheStore against a real Redis. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { PlanCacheStore } from '@tetraloop/core/state';

const redis = new Redis(inject('redisUrl'));
const cache = new PlanCacheStore(redis, { prefix: `test-${randomUUID()}`, enabled: true, ttlSeconds: 60 });

afterAll(async () => {
  await redis.quit();
});

const entry = (runId: string) => ({ graph: { nodes: [] }, createdAt: '2026-01-01T00:00:00.000Z', runId });
const freshKey = (): string => cache.keyOf('agent', randomUUID());

describe('forget-cached-plan', () => {
  it('deletes the entry only while it names the run it was planned for', async () => {
    const key = freshKey();
    await cache.put(key, entry('r1'));
    // Another run wrote the entry since: it stays.
    expect(await cache.forget(key, 'r0')).toBe(false);
    expect(await cache.get(key)).toEqual(entry('r1'));
    expect(await cache.forget(key, 'r1')).toBe(true);
    expect(await cache.get(key)).toBeNull();
    // Nothing there: nothing deleted, whichever run asks.
    expect(await cache.forget(key, 'r1')).toBe(false);
    expect(await cache.forget(key)).toBe(false);
  });

  it('deletes whatever is there when no run is named, an unreadable entry too', async () => {
    const named = freshKey();
    await cache.put(named, entry('r1'));
    expect(await cache.forget(named)).toBe(true);
    expect(await redis.exists(named)).toBe(0);
    // An entry that is not JSON (or names no run) goes, named run or not: it cannot be checked.
    const corrupt = freshKey();
    await redis.set(corrupt, 'not json', 'EX', 60);
    expect(await cache.get(corrupt)).toBe('corrupt');
    expect(await cache.forget(corrupt, 'r1')).toBe(true);
    expect(await redis.exists(corrupt)).toBe(0);
  });
});
