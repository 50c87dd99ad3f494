/**
 * The API's cache of verified keys (`TETRALOOP_KEY_CACHE_MS`) against a real Redis: a key verified
 * once is reused without Redis for the cache's time; a revoke through the same store is refused at
 * once, through another process within the cache's time; a wrong secret never matches a cached key.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, expect, inject, it, vi } from 'vitest';
import { ApiKeyStore } from '@tetraloop/core/state';

const prefix = `test-${randomUUID()}`;
const redis = new Redis(inject('redisUrl'));
const CACHE_MS = 60_000;
const cached = new ApiKeyStore(redis, { prefix, maxPerTenant: 10, cacheMs: CACHE_MS });
/** Another process: no cache of its own that matters here. */
const other = new ApiKeyStore(redis, { prefix, maxPerTenant: 10 });

afterAll(async () => {
  await redis.quit();
});
afterEach(() => {
  vi.useRealTimers();
});

/**
 * Sets this process's clock to `at` (`Date` only: timers and sockets keep real time). The cache's
 * time and a key's expiry are read from it, so each runs out at once and for certain, while Redis
 * (on its own clock) still has the key: a refusal can only come from the cache's own checks.
 */
function clockAt(at: number): void {
  vi.useFakeTimers({ toFake: ['Date'], now: at });
}

it('reuses a verified key for cacheMs, and a revoke elsewhere is refused once it runs out', async () => {
  const { key, record } = await other.create({ tenant: 'acme', scopes: ['runs:read'] });
  expect((await cached.verify(key))?.keyId).toBe(record.keyId);
  const verifiedBy = Date.now();
  // A wrong secret for the cached key id is refused without a look at the cache's record.
  const wrong = `${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}`;
  expect(await cached.verify(wrong)).toBeNull();
  expect(await other.revoke(record.keyId)).toBe(true);
  expect(await other.verify(key)).toBeNull();
  // Within the cache's time this process still knows the key; after it, Redis says it is gone.
  expect((await cached.verify(key))?.keyId).toBe(record.keyId);
  clockAt(verifiedBy + CACHE_MS);
  expect(await cached.verify(key)).toBeNull();
});

it('refuses at once a key revoked through the same store, or its whole tenant', async () => {
  const one = await cached.create({ tenant: 'beta', scopes: ['runs:read'] });
  const two = await cached.create({ tenant: 'beta', scopes: ['runs:read'] });
  expect(await cached.verify(one.key)).not.toBeNull();
  expect(await cached.verify(two.key)).not.toBeNull();
  await cached.revoke(one.record.keyId);
  expect(await cached.verify(one.key)).toBeNull();
  expect(await cached.verify(two.key)).not.toBeNull();
  await cached.revokeTenant('beta');
  expect(await cached.verify(two.key)).toBeNull();
});

it('refuses a cached key once it expires', async () => {
  // It expires within the cache's time: the cached record is refused by its own expiry, while
  // Redis (its PEXPIREAT on Redis's clock, 30 s away) still holds the key.
  const expiresAt = Date.now() + CACHE_MS / 2;
  const { key } = await cached.create({
    tenant: 'gamma',
    scopes: ['runs:read'],
    expiresAt: new Date(expiresAt).toISOString(),
  });
  expect(await cached.verify(key)).not.toBeNull();
  clockAt(expiresAt - 1);
  expect(await cached.verify(key)).not.toBeNull();
  clockAt(expiresAt);
  expect(await cached.verify(key)).toBeNull();
});
