/**
 * The bounds of each process's copy of a tenant's webhook subscriptions, as configured: they reach
 * the options the webhook store builds its copy with, and a bad value stops the process naming
 * the variable.
 */
import { describe, expect, it } from 'vitest';
import type { WebhookSubscription } from '../domain/webhook.js';
import { SubscriptionCache } from '../webhooks/subscription-cache.js';
import { BaseEnv, parseEnv, webhookStoreOptionsOf } from './env-schema.js';

// Parsed, not connected to: the URL only has to be one.
const cacheOf = (env: Record<string, string>) =>
  webhookStoreOptionsOf(parseEnv(BaseEnv, { REDIS_URL: 'redis://127.0.0.1:1', ...env })).cache;

describe('the webhook subscription copy settings', () => {
  it('keep a copy a minute, of at most 10,000 tenants, when unset', () => {
    expect(cacheOf({})).toEqual({ ttlMs: 60_000, maxTenants: 10_000 });
  });

  it('reach the copy the webhook store keeps: its lapse and its bound', async () => {
    const options = cacheOf({
      TETRALOOP_WEBHOOK_CACHE_TTL_MS: '5000',
      TETRALOOP_WEBHOOK_CACHE_MAX_TENANTS: '1',
    });
    expect(options).toEqual({ ttlMs: 5000, maxTenants: 1 });
    const cache = new SubscriptionCache(options);
    let reads = 0;
    const read = (): Promise<WebhookSubscription[]> => {
      reads++;
      return Promise.resolve([]);
    };
    let now = 0;
    await cache.get('a', read, () => now);
    now = 4999;
    await cache.get('a', read, () => now);
    expect(reads).toBe(1);
    now = 5000;
    await cache.get('a', read, () => now);
    expect(reads).toBe(2);
    // One tenant kept: reading another lets a's copy go.
    await cache.get('b', read, () => now);
    await cache.get('a', read, () => now);
    expect(reads).toBe(4);
  });

  it('take 0 for the lapse: no copy', () => {
    expect(cacheOf({ TETRALOOP_WEBHOOK_CACHE_TTL_MS: '0' })).toMatchObject({ ttlMs: 0 });
  });

  it('refuse a value out of bounds or not a whole number, naming the variable', () => {
    for (const bad of ['-1', '1.5', 'soon', '3600001']) {
      expect(() => cacheOf({ TETRALOOP_WEBHOOK_CACHE_TTL_MS: bad }), bad).toThrow(
        /TETRALOOP_WEBHOOK_CACHE_TTL_MS/,
      );
    }
    for (const bad of ['0', '-5', '2.5', 'many', '1000001']) {
      expect(() => cacheOf({ TETRALOOP_WEBHOOK_CACHE_MAX_TENANTS: bad }), bad).toThrow(
        /TETRALOOP_WEBHOOK_CACHE_MAX_TENANTS/,
      );
    }
  });
});
