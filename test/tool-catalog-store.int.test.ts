/**
 * The custom tool catalog on a real Redis: each tool keeps its newest versions only, a worker
 * whose heartbeat ran out is no longer live (and is pruned by the next beat), a worker stopping
 * leaves at once, a tool stays known for the catalog TTL after its last worker and goes after it,
 * and the keys expire a TTL after the last beat. The clock is set (Date only), never waited on.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { connectRedis, whenReady, type RedisClient } from '@tetraloop/core/runtime';
import { MAX_VERSIONS, ToolCatalogStore } from '@tetraloop/core/state';
import type { CustomToolInfo } from '@tetraloop/core/tools';

const TTL_MS = 3_600_000;
const WORKER_TTL_MS = 30_000;
const T0 = Date.UTC(2026, 0, 1);

let redis: RedisClient;
beforeAll(async () => {
  redis = connectRedis(inject('redisUrl'), 'client', 'tool-catalog-test');
  await whenReady(redis);
});
afterAll(() => redis?.disconnect());
afterEach(() => vi.useRealTimers());

const at = (ms: number): void => {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime(ms);
};

const storeOf = (): ToolCatalogStore =>
  new ToolCatalogStore(redis, {
    prefix: `test-${randomUUID()}`,
    catalogTtlMs: TTL_MS,
    workerTtlMs: WORKER_TTL_MS,
  });

const info = (name: string, version = '1', queue = 'crm'): CustomToolInfo => ({
  name,
  description: `${name} v${version}`,
  inputSchema: { type: 'object', properties: { v: { const: version } } },
  outputSchema: { type: 'object' },
  queue,
  version,
  schemaHash: `hash-${version}`,
  secrets: [],
});

describe('the tool catalog store', () => {
  it(`keeps the newest ${MAX_VERSIONS} versions of a tool, the one served last first`, async () => {
    const store = storeOf();
    for (let v = 1; v <= MAX_VERSIONS + 3; v++) {
      at(T0 + v * 1000);
      expect(await store.beat(`w-${v}`, ['crm'], [info('crm.lookup', String(v))])).toBe(true);
    }
    // The same version again is no change.
    expect(await store.beat('w-11', ['crm'], [info('crm.lookup', '11')])).toBe(false);
    const entry = (await store.read()).tools.get('crm.lookup');
    expect(entry?.versions.map((v) => v.version)).toEqual(['11', '10', '9', '8', '7', '6', '5', '4']);
    expect(entry?.tool.description).toBe('crm.lookup v11');
  });

  it('counts a worker live until its heartbeat runs out; the next beat prunes it; leave is at once', async () => {
    const store = storeOf();
    at(T0);
    await store.beat('w-a', ['crm'], [info('crm.lookup')]);
    await store.beat('w-b', ['gpu'], [info('gpu.render', '1', 'gpu')]);
    expect((await store.read()).workers.map((w) => w.workerId).sort()).toEqual(['w-a', 'w-b']);
    // w-a beats again; w-b falls silent past its heartbeat TTL.
    at(T0 + WORKER_TTL_MS - 1);
    await store.beat('w-a', ['crm'], [info('crm.lookup')]);
    at(T0 + WORKER_TTL_MS + 1);
    expect((await store.read()).workers.map((w) => w.workerId)).toEqual(['w-a']);
    expect(await redis.hexists(store.keys.workers, 'w-b')).toBe(1);
    await store.beat('w-a', ['crm'], [info('crm.lookup')]);
    expect(await redis.hexists(store.keys.workers, 'w-b')).toBe(0);
    expect(await redis.zscore(store.keys.beats, 'w-b')).toBeNull();
    // Its tool stays known, without a worker.
    expect((await store.read()).tools.has('gpu.render')).toBe(true);
    await store.leave('w-a');
    expect((await store.read()).workers).toEqual([]);
  });

  it('keeps a tool known for the TTL after its last worker, prunes it after; the keys expire a TTL after the last beat', async () => {
    const store = storeOf();
    at(T0);
    await store.beat('w-old', ['crm'], [info('crm.retired')]);
    await store.leave('w-old');
    at(T0 + TTL_MS - 1);
    expect((await store.read()).tools.has('crm.retired')).toBe(true);
    at(T0 + TTL_MS + 1);
    // Past the TTL a read no longer knows it; the next beat (of any worker) deletes it.
    expect((await store.read()).tools.has('crm.retired')).toBe(false);
    expect(await redis.hexists(store.keys.tools, 'crm.retired')).toBe(1);
    await store.beat('w-new', ['crm'], [info('crm.lookup')]);
    expect(await redis.hexists(store.keys.tools, 'crm.retired')).toBe(0);
    expect([...(await store.read()).tools.keys()]).toEqual(['crm.lookup']);
    for (const key of [store.keys.tools, store.keys.workers, store.keys.beats]) {
      const ttl = await redis.pttl(key);
      expect(ttl, key).toBeGreaterThan(0);
      expect(ttl, key).toBeLessThanOrEqual(TTL_MS);
    }
  });
});
