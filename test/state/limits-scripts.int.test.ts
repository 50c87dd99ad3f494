/** The rate-bucket and tenant-slot scripts, called through their stores against a real Redis. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, inject, it, vi } from 'vitest';
import { RateLimitStore, RunStore, SlotSets, TenantSlots, tenantSlotKeys } from '@tetraloop/core/state';

const prefix = `test-${randomUUID()}`;
const redis = new Redis(inject('redisUrl'));
const rates = new RateLimitStore(redis, prefix);
const slots = new TenantSlots(redis, prefix);
const store = new RunStore(redis, { prefix, retentionSeconds: 60 });

afterAll(async () => {
  await redis.quit();
});
afterEach(() => {
  vi.useRealTimers();
});

const newTenant = (): string => `t-${randomUUID().slice(0, 8)}`;
/** The time `TenantSlots` hands the slot scripts (`Date` only is faked: sockets keep real time). */
const clockAt = (at: number): void => {
  vi.useFakeTimers({ toFake: ['Date'], now: at });
};
/** Redis's clock, epoch ms: the slot scripts' time. */
const redisMs = async (): Promise<number> => {
  const [seconds, micros] = await redis.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
};
/** Resolves once Redis's clock has passed `ms`, so the next slot script scores a later time. */
const nextRedisMs = async (ms: number): Promise<void> => {
  while ((await redisMs()) <= ms);
};
/** A tenant's running or waiting set, with each run's score. */
const scores = async (tenant: string, set: 'running' | 'waiting'): Promise<Record<string, number>> => {
  const flat = await redis.zrange(tenantSlotKeys(prefix, tenant)[set], '0', '-1', 'WITHSCORES');
  const out: Record<string, number> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i]!] = Number(flat[i + 1]);
  return out;
};
/** A run in the run store, running or settled (`cancelled` before it started). */
async function storedRun(settled: boolean): Promise<string> {
  const runId = randomUUID();
  await store.create({
    runId,
    input: null,
    timeoutSeconds: 60,
    budget: {},
    metadata: undefined,
    createdAt: new Date().toISOString(),
    pending: new Map(),
  });
  if (settled) await store.endUnstarted(runId, { code: 'cancelled', message: 'x' }, new Date().toISOString());
  return runId;
}

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

describe('acquire-slot', () => {
  it('holds runs up to the cap, answers a holder that asks again that it holds, and lists the rest as waiting', async () => {
    const tenant = newTenant();
    expect(await slots.acquire(tenant, 'a', 1)).toBe(true);
    expect(await slots.acquire(tenant, 'a', 1)).toBe(true);
    expect(await slots.acquire(tenant, 'b', 1)).toBe(false);
    expect(await slots.holders(tenant)).toEqual(['a']);
    expect(Object.keys(await scores(tenant, 'waiting'))).toEqual(['b']);
    // A raised cap lets the waiting run in, and takes it off the waiting list in the same step.
    expect(await slots.acquire(tenant, 'b', 2)).toBe(true);
    expect(await scores(tenant, 'waiting')).toEqual({});
    expect(await slots.holders(tenant)).toEqual(['a', 'b']);
  });

  it('keeps a waiting run at the time it first waited (by Redis’s clock), so asking again keeps its place', async () => {
    const tenant = newTenant();
    // The callers' clocks play no part: this one is a day off.
    clockAt(Date.now() + 86_400_000);
    const before = await redisMs();
    expect(await slots.acquire(tenant, 'holder', 1)).toBe(true);
    expect(await slots.acquire(tenant, 'z-first', 1)).toBe(false);
    const first = (await scores(tenant, 'waiting'))['z-first']!;
    expect(first).toBeGreaterThanOrEqual(before);
    expect(first).toBeLessThanOrEqual(await redisMs());
    await nextRedisMs(first);
    expect(await slots.acquire(tenant, 'a-second', 1)).toBe(false);
    await nextRedisMs((await scores(tenant, 'waiting'))['a-second']!);
    expect(await slots.acquire(tenant, 'z-first', 1)).toBe(false);
    const waiting = await scores(tenant, 'waiting');
    expect(waiting['z-first']).toBe(first);
    expect(waiting['a-second']).toBeGreaterThan(first);
    expect(await slots.release(tenant, 'holder', 1)).toEqual({ free: 1, waiting: ['z-first', 'a-second'] });
  });

  it('answers a waiting member how long it has waited, by Redis’s clock', async () => {
    const sets = new SlotSets(redis);
    const keys = tenantSlotKeys(prefix, newTenant());
    await sets.acquire(keys, 'holder', 1, 60);
    const take = await sets.acquire(keys, 'w', 1, 60);
    expect(take).toMatchObject({ held: false });
    // It first waited 7 s ago; the caller's clock, an hour behind, plays no part.
    await redis.zadd(keys.waiting, 'XX', Number(await redis.zscore(keys.waiting, 'w')) - 7_000, 'w');
    clockAt(Date.now() - 3_600_000);
    const later = await sets.acquire(keys, 'w', 1, 60);
    expect(later.held).toBe(false);
    const waitedMs = later.held ? 0 : later.waitedMs;
    expect(waitedMs).toBeGreaterThanOrEqual(7_000);
    expect(waitedMs).toBeLessThan(8_000);
  });

  it('gives both sets the TTL on every change', async () => {
    const tenant = newTenant();
    const k = tenantSlotKeys(prefix, tenant);
    await slots.acquire(tenant, 'a', 1);
    await slots.acquire(tenant, 'b', 1);
    for (const key of [k.running, k.waiting]) {
      const ttl = await redis.ttl(key);
      expect(ttl).toBeGreaterThan(2 * 86_400 - 60);
      expect(ttl).toBeLessThanOrEqual(2 * 86_400);
    }
  });
});

describe('release-slot', () => {
  it('gives a slot back and names the oldest waiting runs: as many as are free, and extra more', async () => {
    const tenant = newTenant();
    const t0 = Date.now();
    clockAt(t0);
    expect(await slots.acquire(tenant, 'a', 1)).toBe(true);
    for (const [i, run] of ['w1', 'w2', 'w3', 'w4', 'w5'].entries()) {
      clockAt(t0 + 1 + i);
      expect(await slots.acquire(tenant, run, 1)).toBe(false);
    }
    expect(await slots.release(tenant, 'a', 1, 2)).toEqual({ free: 1, waiting: ['w1', 'w2', 'w3'] });
    // Safe to repeat: the same answer, nothing else freed.
    expect(await slots.release(tenant, 'a', 1, 2)).toEqual({ free: 1, waiting: ['w1', 'w2', 'w3'] });
    // A waiting run that goes away (settled before it got a slot) leaves the list.
    expect(await slots.release(tenant, 'w1', 1, 0)).toEqual({ free: 1, waiting: ['w2'] });
    expect(Object.keys(await scores(tenant, 'waiting'))).toEqual(['w2', 'w3', 'w4', 'w5']);
  });

  it('only looks when given no run, and names nobody while no slot is free', async () => {
    const tenant = newTenant();
    await slots.acquire(tenant, 'a', 2);
    await slots.acquire(tenant, 'b', 2);
    await slots.acquire(tenant, 'c', 2);
    expect(await slots.release(tenant, null, 2)).toEqual({ free: 0, waiting: [] });
    // The cap lowered under the holders: still none free, none named.
    expect(await slots.release(tenant, null, 1)).toEqual({ free: 0, waiting: [] });
    expect(await slots.holders(tenant)).toEqual(['a', 'b']);
    expect(await slots.release(tenant, null, 3)).toEqual({ free: 1, waiting: ['c'] });
  });
});

describe('forget-slots', () => {
  it('frees the slots of runs that settled or are gone without giving them back, and only those', async () => {
    const tenant = newTenant();
    const running = await storedRun(false);
    const settled = await storedRun(true);
    for (const runId of [running, settled, 'gone']) await slots.acquire(tenant, runId, 10);
    expect(await slots.reconcile(tenant)).toBe(2);
    expect(await slots.holders(tenant)).toEqual([running]);
    expect(await slots.reconcile(tenant)).toBe(0);
  });

  it('leaves a slot taken again between the read and the script (another score) with its holder', async () => {
    const tenant = newTenant();
    const settled = await storedRun(true);
    const gone = 'gone';
    for (const runId of [settled, gone]) await slots.acquire(tenant, runId, 10);
    const took = (await scores(tenant, 'running'))[settled]!;
    // Between reconcile's read of the holders and its script, the settled run's slot is given
    // back and taken again (a resumed run), at a later time: the script finds another score.
    const retake = async (): Promise<void> => {
      await nextRedisMs(took);
      await slots.release(tenant, settled, 10);
      expect(await slots.acquire(tenant, settled, 10)).toBe(true);
    };
    const racing = new TenantSlots(interleaved(redis, 'zrange', retake), prefix);
    expect(await racing.reconcile(tenant)).toBe(1);
    const running = await scores(tenant, 'running');
    expect(Object.keys(running)).toEqual([settled]);
    expect(running[settled]).toBeGreaterThan(took);
  });
});

/**
 * `client` with `after` run once right after the first call of its method `name` answers: a real
 * Redis, with another process's change landing between two steps of the code under test.
 */
function interleaved(client: Redis, name: keyof Redis, after: () => Promise<void>): Redis {
  let done = false;
  return new Proxy(client, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (typeof value !== 'function') return value;
      const method = value as (...args: unknown[]) => unknown;
      if (property !== name || done) return method.bind(target);
      return async (...args: unknown[]): Promise<unknown> => {
        const answer = await method.apply(target, args);
        done = true;
        await after();
        return answer;
      };
    },
  });
}
