/**
 * A process's copy of each tenant's webhook subscriptions, bounded by the deployment's settings
 * (`TETRALOOP_WEBHOOK_CACHE_TTL_MS`, `TETRALOOP_WEBHOOK_CACHE_MAX_TENANTS`) through the options the
 * webhook store is built with, against a real Redis. A subscription written into Redis behind the
 * store's back (nothing published) shows whether an answer came from the copy or from Redis.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, inject, it, vi } from 'vitest';
import { BaseEnv, parseEnv, webhookStoreOptionsOf } from '@tetraloop/core/config';
import { channels, WebhookStore, webhookKeys } from '@tetraloop/core/state';

const redis = new Redis(inject('redisUrl'));
const subscribers: Redis[] = [];
afterEach(() => {
  vi.useRealTimers();
});
afterAll(async () => {
  for (const s of subscribers) s.disconnect();
  await redis.quit();
});

/** A store built as the processes build theirs, from `env`, following changes on a subscriber. */
async function following(env: Record<string, string>): Promise<{ store: WebhookStore; prefix: string }> {
  const prefix = `test-${randomUUID()}`;
  const options = webhookStoreOptionsOf(
    parseEnv(BaseEnv, { REDIS_URL: inject('redisUrl'), TETRALOOP_PREFIX: prefix, ...env }),
  );
  const store = new WebhookStore(redis, { ...options, key: randomBytes(32) });
  const subscriber = new Redis(inject('redisUrl'));
  subscribers.push(subscriber);
  await store.followChanges(subscriber);
  return { store, prefix };
}

/** Writes a subscription of `tenant` straight into Redis: no process hears of it. */
async function behindItsBack(prefix: string, tenant: string): Promise<string> {
  const id = `whk_${randomBytes(12).toString('hex')}`;
  const stored = {
    id,
    url: 'https://hooks.test/',
    events: ['run.finished'],
    createdAt: '2026-12-03T00:00:00.000Z',
  };
  await redis.hset(webhookKeys(prefix, tenant).subscriptions, id, JSON.stringify({ ...stored, secret: 'x' }));
  return id;
}

const idsOf = async (store: WebhookStore, tenant: string): Promise<string[]> =>
  (await store.subscribersOf(tenant, 'run.finished')).map((s) => s.id);

describe("a process's copy of a tenant's webhook subscriptions", () => {
  it('is used until it lapses after TETRALOOP_WEBHOOK_CACHE_TTL_MS', async () => {
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
    const { store, prefix } = await following({ TETRALOOP_WEBHOOK_CACHE_TTL_MS: '1000' });
    expect(await idsOf(store, 'acme')).toEqual([]);
    const id = await behindItsBack(prefix, 'acme');
    vi.setSystemTime(Date.now() + 999);
    expect(await idsOf(store, 'acme')).toEqual([]);
    vi.setSystemTime(Date.now() + 1);
    expect(await idsOf(store, 'acme')).toEqual([id]);
  });

  it('is kept for at most TETRALOOP_WEBHOOK_CACHE_MAX_TENANTS tenants', async () => {
    const { store, prefix } = await following({ TETRALOOP_WEBHOOK_CACHE_MAX_TENANTS: '1' });
    expect(await idsOf(store, 'acme')).toEqual([]);
    const id = await behindItsBack(prefix, 'acme');
    expect(await idsOf(store, 'acme')).toEqual([]);
    // Another tenant's copy takes the one place: acme's is read again.
    expect(await idsOf(store, 'globex')).toEqual([]);
    expect(await idsOf(store, 'acme')).toEqual([id]);
  });

  it('is not kept with a TTL of 0: every read goes to Redis, and no change is followed', async () => {
    const { store, prefix } = await following({ TETRALOOP_WEBHOOK_CACHE_TTL_MS: '0' });
    expect(await redis.pubsub('NUMSUB', channels(prefix).webhooks)).toEqual([channels(prefix).webhooks, 0]);
    expect(await idsOf(store, 'acme')).toEqual([]);
    const id = await behindItsBack(prefix, 'acme');
    expect(await idsOf(store, 'acme')).toEqual([id]);
  });
});
