/**
 * The API's cache of verified keys (`TETRALOOP_KEY_CACHE_MS`) against a real Redis: a key verified
 * once is reused without Redis for the cache's time; a revoke through the same store is refused at
 * once, through another process within the cache's time; a wrong secret never matches a cached key.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, expect, inject, it } from 'vitest';
import { ApiKeyStore } from '@tetraloop/core';

const prefix = `test-${randomUUID()}`;
const redis = new Redis(inject('redisUrl'));
const CACHE_MS = 300;
const cached = new ApiKeyStore(redis, { prefix, maxPerTenant: 10, cacheMs: CACHE_MS });
/** Another process: no cache of its own that matters here. */
const other = new ApiKeyStore(redis, { prefix, maxPerTenant: 10 });

afterAll(async () => {
  await redis.quit();
});

it('reuses a verified key for cacheMs, and a revoke elsewhere is refused once it runs out', async () => {
  const { key, record } = await other.create({ tenant: 'acme', scopes: ['runs:read'] });
  expect((await cached.verify(key))?.keyId).toBe(record.keyId);
  // A wrong secret for the cached key id is refused without a look at the cache's record.
  const wrong = `${key.slice(0, -1)}${key.endsWith('A') ? 'B' : 'A'}`;
  expect(await cached.verify(wrong)).toBeNull();
  expect(await other.revoke(record.keyId)).toBe(true);
  expect(await other.verify(key)).toBeNull();
  // Within the cache's time this process still knows the key; after it, Redis says it is gone.
  expect((await cached.verify(key))?.keyId).toBe(record.keyId);
  await new Promise((r) => setTimeout(r, CACHE_MS + 50));
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
  const expiresAt = new Date(Date.now() + 150).toISOString();
  const { key } = await cached.create({ tenant: 'gamma', scopes: ['runs:read'], expiresAt });
  expect(await cached.verify(key)).not.toBeNull();
  await new Promise((r) => setTimeout(r, 200));
  expect(await cached.verify(key)).toBeNull();
});
