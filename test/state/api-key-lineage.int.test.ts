/**
 * A key's lineage in Redis, against a real Redis: what a key made is in a set of its own that
 * expires with it, is pruned of keys gone when a key is added, loses a key revoked alone and goes
 * with its key or its tenant; a key made by a key it no longer has is refused; a key recorded
 * before makers were (no `createdBy`) keeps working, listed by no maker.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, expect, inject, it } from 'vitest';
import {
  ApiKeyStore,
  KeyGrantError,
  KeyMakerGoneError,
  apiKeyChildrenKey,
  apiKeyKey,
  tenantApiKeysKey,
} from '@tetraloop/core/state';

const prefix = `test-${randomUUID()}`;
const redis = new Redis(inject('redisUrl'));
const keys = new ApiKeyStore(redis, { prefix, maxPerTenant: 10 });
const childrenOf = (keyId: string): Promise<string[]> => redis.smembers(apiKeyChildrenKey(prefix, keyId));

afterAll(async () => {
  let cursor = '0';
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    if (found.length > 0) await redis.unlink(...found);
  } while (cursor !== '0');
  await redis.quit();
});

it('gives the set of what a key made its expiry, and deletes it with the key', async () => {
  const expiresAt = new Date(Date.now() + 120_000).toISOString();
  const maker = await keys.create({ tenant: 'acme', scopes: ['admin', 'runs:read'], expiresAt });
  const child = await keys.create({
    tenant: 'acme',
    scopes: ['runs:read'],
    expiresAt,
    createdBy: maker.record.keyId,
  });
  expect(child.record.createdBy).toBe(maker.record.keyId);
  expect(await childrenOf(maker.record.keyId)).toEqual([child.record.keyId]);
  expect(await redis.pexpiretime(apiKeyChildrenKey(prefix, maker.record.keyId))).toBe(Date.parse(expiresAt));
  expect(await keys.revoke(maker.record.keyId)).toBe(true);
  expect(await keys.verify(child.key)).toBeNull();
  expect(await redis.exists(apiKeyChildrenKey(prefix, maker.record.keyId))).toBe(0);
  expect(await redis.smembers(tenantApiKeysKey(prefix, 'acme'))).toEqual([]);
});

it('prunes what a key made of keys gone when it makes another, and drops a key revoked alone', async () => {
  const maker = await keys.create({ tenant: 'beta', scopes: ['admin', 'runs:read'] });
  const brief = await keys.create({
    tenant: 'beta',
    scopes: ['runs:read'],
    expiresAt: new Date(Date.now() + 100).toISOString(),
    createdBy: maker.record.keyId,
  });
  await expect.poll(() => redis.exists(apiKeyKey(prefix, brief.record.keyId)), { interval: 20 }).toBe(0);
  expect(await childrenOf(maker.record.keyId)).toEqual([brief.record.keyId]);
  const [one, two] = [
    await keys.create({ tenant: 'beta', scopes: ['runs:read'], createdBy: maker.record.keyId }),
    await keys.create({ tenant: 'beta', scopes: ['runs:read'], createdBy: maker.record.keyId }),
  ];
  expect((await childrenOf(maker.record.keyId)).sort()).toEqual([one.record.keyId, two.record.keyId].sort());
  expect(await keys.revoke(one.record.keyId)).toBe(true);
  expect(await childrenOf(maker.record.keyId)).toEqual([two.record.keyId]);
  expect((await keys.list('beta', maker.record.keyId)).map((k) => k.keyId)).toEqual([two.record.keyId]);
  expect(await keys.verify(maker.key)).not.toBeNull();
});

it('refuses a key made by a key gone, or beyond its maker', async () => {
  const maker = await keys.create({ tenant: 'gamma', scopes: ['admin', 'runs:read'] });
  await expect(
    keys.create({ tenant: 'delta', scopes: ['runs:read'], createdBy: maker.record.keyId }),
  ).rejects.toMatchObject({ name: 'KeyGrantError', issues: [{ path: 'tenant' }] });
  await expect(
    keys.create({ tenant: 'gamma', scopes: ['runs:write'], createdBy: maker.record.keyId }),
  ).rejects.toBeInstanceOf(KeyGrantError);
  await keys.revoke(maker.record.keyId);
  await expect(
    keys.create({ tenant: 'gamma', scopes: ['runs:read'], createdBy: maker.record.keyId }),
  ).rejects.toBeInstanceOf(KeyMakerGoneError);
  expect(await keys.list('gamma')).toEqual([]);
  expect(await redis.exists(apiKeyChildrenKey(prefix, maker.record.keyId))).toBe(0);
});

it('keeps a key recorded before makers were: it works, and no maker lists it', async () => {
  const made = await keys.create({ tenant: 'epsilon', scopes: ['runs:read'] });
  expect(made.record.createdBy).toBe('root');
  // The record as an older Tetraloop wrote it: no createdBy.
  const { createdBy: _, ...old } = made.record;
  await redis.hset(apiKeyKey(prefix, made.record.keyId), 'record', JSON.stringify(old));
  expect(await keys.verify(made.key)).toEqual(old);
  expect(await keys.list('epsilon')).toEqual([old]);
  expect(await keys.list('epsilon', 'root')).toEqual([]);
  expect(await keys.revoke(made.record.keyId)).toBe(true);
  expect(await keys.verify(made.key)).toBeNull();
});

it("deletes each key's set of what it made with its tenant", async () => {
  const maker = await keys.create({ tenant: 'zeta', scopes: ['admin', 'runs:read'] });
  const child = await keys.create({ tenant: 'zeta', scopes: ['admin'], createdBy: maker.record.keyId });
  await keys.create({ tenant: 'zeta', scopes: ['admin'], createdBy: child.record.keyId });
  expect(await keys.revokeTenant('zeta')).toBe(3);
  for (const id of [maker.record.keyId, child.record.keyId]) {
    expect(await redis.exists(apiKeyChildrenKey(prefix, id))).toBe(0);
  }
});
