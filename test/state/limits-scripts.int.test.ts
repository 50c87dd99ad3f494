/** The rate-bucket and tenant-slot scripts, called through their stores against a real Redis. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { RateLimitStore, RunStore, TenantSlots } from '@tetraloop/core';

const prefix = `test-${randomUUID()}`;
const redis = new Redis(inject('redisUrl'));
const rates = new RateLimitStore(redis, prefix);
const slots = new TenantSlots(redis, prefix);
const store = new RunStore(redis, { prefix, retentionSeconds: 60 });

afterAll(async () => {
  await redis.quit();
});

describe('take-tokens-2', () => {
  it("takes from the key's and the tenant's bucket together, or from neither", async () => {
    const tenant = `t-${randomUUID().slice(0, 8)}`;
    // The key allows 2 a minute, the tenant 3: the third request of the key is refused by its own
    // bucket and takes nothing from the tenant's, which still has one for another key.
    expect(await rates.take(tenant, 'k1', { perKey: 2, perTenant: 3 })).toEqual({ ok: true });
    expect(await rates.take(tenant, 'k1', { perKey: 2, perTenant: 3 })).toEqual({ ok: true });
    const refused = await rates.take(tenant, 'k1', { perKey: 2, perTenant: 3 });
    expect(refused).toMatchObject({ ok: false, bucket: 'key' });
    // One request a minute at 2 a minute: a token comes back within 30 s.
    if (!refused.ok) expect(refused.retryAfterMs).toBeGreaterThan(25_000);
    if (!refused.ok) expect(refused.retryAfterMs).toBeLessThanOrEqual(30_000);
    expect(await rates.take(tenant, 'k2', { perKey: 2, perTenant: 3 })).toEqual({ ok: true });
    expect(await rates.take(tenant, 'k3', { perKey: 2, perTenant: 3 })).toMatchObject({
      ok: false,
      bucket: 'tenant',
    });
  });

  it('gives each bucket a TTL, and touches nothing when both rates are off', async () => {
    const tenant = `t-${randomUUID().slice(0, 8)}`;
    await rates.take(tenant, null, { perKey: 0, perTenant: 5 });
    const ttl = await redis.pttl(`${prefix}:rate:{t:${tenant}}:tenant`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
    expect(await rates.take(`${tenant}-x`, 'k', { perKey: 0, perTenant: 0 })).toEqual({ ok: true });
    expect(await redis.keys(`${prefix}:rate:{t:${tenant}-x}*`)).toEqual([]);
  });
});

describe('tenant slots', () => {
  it('holds runs up to the cap, keeps a holder on repeat, and names the oldest waiting run on release', async () => {
    const tenant = `t-${randomUUID().slice(0, 8)}`;
    expect(await slots.acquire(tenant, 'a', 1)).toBe(true);
    expect(await slots.acquire(tenant, 'a', 1)).toBe(true);
    expect(await slots.acquire(tenant, 'b', 1)).toBe(false);
    expect(await slots.acquire(tenant, 'c', 1)).toBe(false);
    expect(await slots.release(tenant, 'a', 1)).toEqual({ free: 1, waiting: ['b', 'c'] });
    expect(await slots.acquire(tenant, 'c', 1)).toBe(true);
    expect(await slots.release(tenant, null, 1)).toEqual({ free: 0, waiting: [] });
    expect(await slots.holders(tenant)).toEqual(['c']);
  });

  it('frees the slots of runs that settled or are gone without giving them back, and only those', async () => {
    const tenant = `t-${randomUUID().slice(0, 8)}`;
    const running = randomUUID();
    const settled = randomUUID();
    for (const runId of [running, settled]) {
      await store.create({
        runId,
        input: null,
        timeoutSeconds: 60,
        budget: {},
        metadata: undefined,
        createdAt: new Date().toISOString(),
        pending: new Map(),
      });
    }
    await store.endUnstarted(settled, { code: 'cancelled', message: 'x' }, new Date().toISOString());
    for (const runId of [running, settled, 'gone']) await slots.acquire(tenant, runId, 10);
    expect(await slots.reconcile(tenant)).toBe(2);
    expect(await slots.holders(tenant)).toEqual([running]);
  });
});
