import { describe, expect, it } from 'vitest';
import type { WebhookSubscription } from '../domain/webhook.js';
import { SubscriptionCache } from './subscription-cache.js';

const sub = (id: string): WebhookSubscription => ({
  id,
  url: `https://example.test/${id}`,
  events: ['run.finished'],
  createdAt: '2026-12-03T00:00:00.000Z',
});

/** A read that answers `answer` and counts its calls. */
function reader(answer: () => WebhookSubscription[]): {
  read: () => Promise<WebhookSubscription[]>;
  calls: number;
} {
  const r = {
    calls: 0,
    read: () => {
      r.calls++;
      return Promise.resolve(answer());
    },
  };
  return r;
}

describe('SubscriptionCache', () => {
  it('reads a tenant once until its copy is dropped or lapses', async () => {
    let now = 0;
    const cache = new SubscriptionCache({ ttlMs: 1000 });
    const r = reader(() => []);
    await cache.get('acme', r.read, () => now);
    await cache.get('acme', r.read, () => now);
    expect(r.calls).toBe(1);
    cache.drop('acme');
    await cache.get('acme', r.read, () => now);
    expect(r.calls).toBe(2);
    now = 1000;
    await cache.get('acme', r.read, () => now);
    expect(r.calls).toBe(3);
    cache.dropAll();
    await cache.get('acme', r.read, () => now);
    expect(r.calls).toBe(4);
  });

  it('does not keep a read that a drop overtook: it may predate the change', async () => {
    const cache = new SubscriptionCache();
    let release: (v: WebhookSubscription[]) => void = () => undefined;
    const slow = new Promise<WebhookSubscription[]>((resolve) => (release = resolve));
    const inFlight = cache.get('acme', () => slow);
    cache.drop('acme');
    release([]);
    expect(await inFlight).toEqual([]);
    const r = reader(() => [sub('w1')]);
    expect(await cache.get('acme', r.read)).toEqual([sub('w1')]);
    expect(r.calls).toBe(1);
  });

  it('keeps at most maxTenants copies, the least recently read going first', async () => {
    const cache = new SubscriptionCache({ maxTenants: 2 });
    const r = reader(() => []);
    await cache.get('a', r.read);
    await cache.get('b', r.read);
    await cache.get('a', r.read);
    await cache.get('c', r.read);
    expect(r.calls).toBe(3);
    await cache.get('a', r.read);
    expect(r.calls).toBe(3);
    await cache.get('b', r.read);
    expect(r.calls).toBe(4);
  });
});
