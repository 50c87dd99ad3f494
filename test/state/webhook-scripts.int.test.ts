/** The webhook script (`lua-webhook/`), called through WebhookStore against a real Redis. */
import { randomBytes, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { WebhookStore, webhookKeys } from '@tetraloop/core/state';

const prefix = `test-${randomUUID()}`;
const redis = new Redis(inject('redisUrl'));
const CAP = 3;
const webhooks = new WebhookStore(redis, {
  prefix,
  key: randomBytes(32),
  maxPerTenant: CAP,
  deliveriesKept: 10,
  deliveriesTtlSeconds: 60,
});

afterAll(async () => {
  await redis.quit();
});

const request = (n: number) => ({ url: `https://hooks.test/${n}`, events: ['run.finished' as const] });
const settle = (promise: Promise<unknown>): Promise<string> =>
  promise.then(
    () => 'added',
    (err: { code?: string; message?: string }) => err.code ?? `${err.message}`,
  );

describe('add-webhook', () => {
  it('adds subscriptions up to the tenant’s cap, however many are created at once, and none past it', async () => {
    const tenant = `t-${randomUUID().slice(0, 8)}`;
    await webhooks.create(tenant, request(0));
    // Four creations at once for the two places left: the count check and the write are one step.
    const outcomes = await Promise.all([1, 2, 3, 4].map((n) => settle(webhooks.create(tenant, request(n)))));
    expect(outcomes.filter((o) => o === 'added')).toHaveLength(CAP - 1);
    expect(outcomes.filter((o) => o === 'too_many_webhooks')).toHaveLength(2);
    expect(await redis.hlen(webhookKeys(prefix, tenant).subscriptions)).toBe(CAP);
    // Another tenant has a cap of its own.
    expect(await settle(webhooks.create(`${tenant}-other`, request(9)))).toBe('added');
  });

  it('stores the record with its secret encrypted, and frees a place when one is deleted', async () => {
    const tenant = `t-${randomUUID().slice(0, 8)}`;
    const { subscription, secret } = await webhooks.create(tenant, request(0));
    const raw = await redis.hget(webhookKeys(prefix, tenant).subscriptions, subscription.id);
    expect(JSON.parse(raw!)).toMatchObject({ ...subscription, secret: expect.any(String) });
    expect(raw).not.toContain(secret);
    expect(await webhooks.forDelivery(tenant, subscription.id)).toEqual({ url: subscription.url, secret });
    for (const n of [1, 2]) await webhooks.create(tenant, request(n));
    expect(await settle(webhooks.create(tenant, request(3)))).toBe('too_many_webhooks');
    expect(await webhooks.delete(tenant, subscription.id)).toBe(true);
    expect(await settle(webhooks.create(tenant, request(3)))).toBe('added');
  });
});
