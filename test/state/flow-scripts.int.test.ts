/** Flow control's scripts (`lua-flow/`), called through FlowStore against a real Redis. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import {
  FlowStore,
  LimitsDocument,
  flowKeysFor,
  type FlowCall,
  type FlowKey,
  type HeldCall,
} from '@tetraloop/core';

const redis = new Redis(inject('redisUrl'));
const freshStore = (): FlowStore => new FlowStore(redis, `test-${randomUUID()}`);
const LEASE = 60_000;

afterAll(async () => {
  await redis.quit();
});

const call = (over: Partial<FlowCall> = {}): FlowCall => ({
  tool: 'http',
  host: 'api.test',
  tenant: 'acme',
  agent: 'main',
  metadata: null,
  tokens: 0,
  ...over,
});
const keysOf = (limits: unknown[], c: FlowCall = call()): FlowKey[] =>
  flowKeysFor(LimitsDocument.parse({ limits }), c);
/** What calls that went at once hold: Redis keeps no record of them, their release hands it in. */
const held = new Map<string, HeldCall>();
const take = async (store: FlowStore, member: string, keys: FlowKey[], priority = 5, tokens = 0) => {
  const decision = await store.acquire(member, keys, { priority, tokens, leaseMs: LEASE });
  if (decision.ok && decision.held) held.set(member, decision.held);
  return decision;
};
const end = (store: FlowStore, member: string, usedTokens?: number) => {
  const call = held.get(member);
  held.delete(member);
  return store.release(member, {
    succeeded: true,
    leaseMs: LEASE,
    ...(usedTokens !== undefined ? { usedTokens } : {}),
    ...(call ? { held: call } : {}),
  });
};

describe('flow limits (pure)', () => {
  it('matches calls by key expression and value, and names each counter by limit and value', () => {
    const limits = [
      { name: 'mini', key: 'model', match: 'gpt-4o-mini', rate: { tokens: 1000 } },
      { name: 'hosts', key: 'host', concurrency: 4 },
      { name: 'customers', key: 'run.metadata.customer', concurrency: 2, fairBy: 'run.metadata.customer' },
    ];
    expect(keysOf(limits).map((k) => k.id)).toEqual(['hosts=api.test']);
    const model = call({ tool: 'llm', model: 'gpt-4o-mini', metadata: { customer: 'c1' } });
    delete (model as { host?: string }).host;
    expect(keysOf(limits, model).map((k) => [k.id, k.group, k.service])).toEqual([
      ['mini=gpt-4o-mini', 'acme', true],
      ['customers=c1', 'c1', false],
    ]);
    expect(keysOf(limits, call({ tool: 'llm', model: 'gpt-4o' })).map((k) => k.limit)).toEqual(['hosts']);
  });

  it('refuses limits without a bound, with a bad key, or declared twice, naming the field', () => {
    const issues = (doc: unknown) => LimitsDocument.safeParse(doc).error?.issues.map((i) => i.path.join('.'));
    expect(issues({ limits: [{ name: 'a', key: 'host' }] })).toEqual(['limits.0']);
    expect(issues({ limits: [{ name: 'a', key: 'url', concurrency: 1 }] })).toEqual(['limits.0.key']);
    expect(issues({ limits: [{ name: 'a', key: 'host', rate: { intervalMs: 1000 } }] })).toEqual([
      'limits.0.rate',
    ]);
    expect(
      issues({
        limits: [
          { name: 'a', key: 'host', concurrency: 1 },
          { name: 'a', key: 'model', concurrency: 1 },
        ],
      }),
    ).toEqual(['limits.1.name']);
  });
});

describe('flow-acquire / flow-release', () => {
  it('holds calls in flight to the concurrency and grants the next waiter when one ends', async () => {
    const store = freshStore();
    const keys = keysOf([{ name: 'hosts', key: 'host', concurrency: 2 }]);
    expect(await take(store, 'a', keys)).toMatchObject({ ok: true, waitedMs: 0 });
    expect(await take(store, 'b', keys)).toMatchObject({ ok: true });
    const c = await take(store, 'c', keys);
    expect(c).toMatchObject({ ok: false, key: 'hosts=api.test', waitMs: null });
    // Asking again keeps the place and is not granted while both are in flight.
    expect(await take(store, 'c', keys)).toMatchObject({ ok: false });
    expect(await end(store, 'a')).toEqual(['c']);
    const granted = await take(store, 'c', keys);
    expect(granted.ok).toBe(true);
    if (granted.ok) expect(granted.waitedMs).toBeGreaterThanOrEqual(0);
    // A redelivered job of a call in flight carries on.
    expect(await take(store, 'b', keys)).toMatchObject({ ok: true });
  });

  it('serves waiters by priority first, then round-robin across groups, oldest first in a group', async () => {
    const store = freshStore();
    const limits = [{ name: 'hosts', key: 'host', concurrency: 1 }];
    const as = (tenant: string) => keysOf(limits, call({ tenant }));
    expect((await take(store, 'hold', as('big'))).ok).toBe(true);
    // A burst of tenant big, then two calls of small, then a high-priority one of big.
    for (const m of ['b1', 'b2', 'b3', 'b4']) expect((await take(store, m, as('big'))).ok).toBe(false);
    for (const m of ['s1', 's2']) expect((await take(store, m, as('small'))).ok).toBe(false);
    expect((await take(store, 'urgent', as('big'), 9)).ok).toBe(false);
    const order: string[] = [];
    let holder = 'hold';
    for (let i = 0; i < 7; i++) {
      const [next] = await end(store, holder);
      order.push(next!);
      expect((await take(store, next!, as(next!.startsWith('s') ? 'small' : 'big'))).ok).toBe(true);
      holder = next!;
    }
    expect(order).toEqual(['urgent', 'b1', 's1', 'b2', 's2', 'b3', 'b4']);
  });

  it('keeps calls per interval and tokens per interval within the rate, settling tokens to use', async () => {
    const store = freshStore();
    const keys = keysOf(
      [{ name: 'mini', key: 'model', rate: { requests: 3, tokens: 1000, intervalMs: 60_000 } }],
      call({ tool: 'llm', model: 'm' }),
    );
    expect((await take(store, 'a', keys, 5, 400)).ok).toBe(true);
    expect((await take(store, 'b', keys, 5, 400)).ok).toBe(true);
    // 800 of 1000 tokens reserved: a third call of 400 waits. Both calls still run, and each stays
    // in the interval until an interval after it ends: when it may go is not known yet.
    const c = await take(store, 'c', keys, 5, 400);
    expect(c).toMatchObject({ ok: false, key: 'mini=m', waitMs: null });
    // The first call used 100 tokens, not 400: the third now fits (500 + 400 ≤ 1000).
    expect(await end(store, 'a', 100)).toEqual(['c']);
    expect((await take(store, 'c', keys, 5, 400)).ok).toBe(true);
    // Three calls in the interval: a fourth waits, however few tokens it needs.
    await end(store, 'b', 10);
    await end(store, 'c', 10);
    const d = await take(store, 'd', keys, 5, 1);
    expect(d).toMatchObject({ ok: false });
    // All three ended: the fourth may go an interval after the first of them ended.
    if (!d.ok) expect(d.waitMs).toBeGreaterThan(50_000);
    const [counter] = await store.counters();
    expect(counter).toMatchObject({ key: 'mini=m', requests: 3, tokens: 120, inFlight: 0 });
  });

  it('takes capacity on every counter of a call or none, and moves a waiter to the counter that holds it', async () => {
    const store = freshStore();
    const limits = [
      { name: 'hosts', key: 'host', concurrency: 5 },
      { name: 'tenants', key: 'tenant', concurrency: 1 },
    ];
    expect((await take(store, 'a', keysOf(limits))).ok).toBe(true);
    const b = await take(store, 'b', keysOf(limits));
    expect(b).toMatchObject({ ok: false, key: 'tenants=acme' });
    // Nothing taken on hosts for the waiting call.
    const hosts = (await store.counters()).find((c) => c.key === 'hosts=api.test');
    expect(hosts?.inFlight).toBe(1);
    expect(await end(store, 'a')).toEqual(['b']);
  });

  it('pauses a counter for everyone on a Retry-After and cuts it, then climbs back on success', async () => {
    const store = freshStore();
    const keys = keysOf([{ name: 'hosts', key: 'host', concurrency: 4 }]);
    expect((await take(store, 'a', keys)).ok).toBe(true);
    expect(await store.penalize(['hosts=api.test'], 300)).toEqual([0.5]);
    const waiting = await take(store, 'b', keys);
    expect(waiting).toMatchObject({ ok: false });
    if (!waiting.ok) expect(waiting.waitMs).toBeGreaterThan(200);
    // A second 429 within the cooldown pauses again but does not cut twice.
    expect(await store.penalize(['hosts=api.test'], 300)).toEqual([0.5]);
    // Once the pause is over, the tick grants the waiter (the cut limit, 2, has room for it).
    await new Promise((r) => setTimeout(r, 350));
    expect(await store.tick({ leaseMs: LEASE, rewakeMs: 1000, perKey: 10 })).toEqual(['b']);
    await end(store, 'a');
    const [counter] = await store.counters();
    expect(counter!.factor).toBeCloseTo(0.55);
  });

  it('revokes a grant nobody takes up and gives it to the next waiter', async () => {
    const store = freshStore();
    const keys = keysOf([{ name: 'hosts', key: 'host', concurrency: 1 }]);
    expect((await take(store, 'a', keys)).ok).toBe(true);
    expect((await take(store, 'b', keys)).ok).toBe(false);
    expect((await take(store, 'c', keys)).ok).toBe(false);
    expect(await end(store, 'a')).toEqual(['b']);
    // b never comes: with a lease of 0 its grant is revoked at the next tick and c gets the slot.
    await new Promise((r) => setTimeout(r, 5));
    expect(await store.tick({ leaseMs: 1, rewakeMs: 0, perKey: 10 })).toEqual(['c']);
  });

  it('keeps the limits set through the API over the configured ones, versioned', async () => {
    const store = freshStore();
    expect(await store.storedLimits()).toBeNull();
    const doc = LimitsDocument.parse({ limits: [{ name: 'h', key: 'host', concurrency: 1 }] });
    expect(await store.putLimits(doc)).toMatchObject({ version: 1, document: doc });
    expect((await store.putLimits(doc)).version).toBe(2);
    expect(await store.clearLimits()).toBe(true);
    expect(await store.storedLimits()).toBeNull();
  });
});
