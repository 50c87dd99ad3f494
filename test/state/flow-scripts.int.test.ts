/** Flow control's scripts (`lua-flow/`), called through FlowStore against a real Redis. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it, vi } from 'vitest';
import { LimitsDocument, flowKeysFor, type FlowCall, type FlowKey } from '@tetraloop/core/flow';
import { DEFAULT_ADAPTIVE, FlowStore, type HeldCall } from '@tetraloop/core/state';

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

/**
 * Ticks until a tick answers what `expected` accepts, and answers every tick's answer: how a test
 * waits for a pause or a lease to run out on Redis's clock (`TIME`, which a test cannot move).
 */
async function tickUntil(
  store: FlowStore,
  options: { leaseMs: number; rewakeMs: number; perKey: number },
  expected: (woken: string[]) => boolean,
): Promise<string[][]> {
  const answers: string[][] = [];
  await vi.waitFor(
    async () => {
      answers.push(await store.tick(options));
      if (!expected(answers.at(-1)!))
        throw new Error(`no tick woke the expected yet: ${JSON.stringify(answers)}`);
    },
    { timeout: 10_000, interval: 20 },
  );
  return answers;
}

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
    // Once the pause is over, a tick grants the waiter (the cut limit, 2, has room for it); the
    // ticks before it grant nothing.
    const ticks = await tickUntil(store, { leaseMs: LEASE, rewakeMs: 1000, perKey: 10 }, (w) => w.length > 0);
    expect(ticks.at(-1)).toEqual(['b']);
    expect(ticks.slice(0, -1).flat()).toEqual([]);
    await end(store, 'a');
    const [counter] = await store.counters();
    expect(counter!.factor).toBeCloseTo(0.55);
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

describe('flow-tick', () => {
  const hosts = (concurrency: number, adaptive = true) =>
    keysOf([{ name: 'hosts', key: 'host', concurrency, adaptive }]);

  it('grants nothing while a counter is paused, then its waiters, at most perKey a tick, oldest first', async () => {
    const store = freshStore();
    const keys = hosts(10);
    expect((await take(store, 'a', keys)).ok).toBe(true);
    // A limit used up: a pause, no cut. Every call waits for it, with room on the counter.
    expect(await store.penalize(['hosts=api.test'], 60_000, false)).toEqual([1]);
    for (const m of ['w1', 'w2', 'w3']) expect((await take(store, m, keys)).ok).toBe(false);
    expect(await store.tick({ leaseMs: LEASE, rewakeMs: 60_000, perKey: 2 })).toEqual([]);

    const short = freshStore();
    expect((await take(short, 'a', keys)).ok).toBe(true);
    expect(await short.penalize(['hosts=api.test'], 200, false)).toEqual([1]);
    for (const m of ['w1', 'w2', 'w3']) expect((await take(short, m, keys)).ok).toBe(false);
    const options = { leaseMs: LEASE, rewakeMs: 60_000, perKey: 2 };
    const ticks = await tickUntil(short, options, (w) => w.length > 0);
    expect(ticks.at(-1)).toEqual(['w1', 'w2']);
    expect(await short.tick(options)).toEqual(['w3']);
    expect(await short.tick(options)).toEqual([]);
  });

  it('wakes a granted call again once rewakeMs has passed, until it starts', async () => {
    const store = freshStore();
    const keys = hosts(1);
    expect((await take(store, 'a', keys)).ok).toBe(true);
    expect((await take(store, 'b', keys)).ok).toBe(false);
    expect(await end(store, 'a')).toEqual(['b']);
    // Woken at its grant just now: not again within rewakeMs; with 0, again at once (its job may
    // not have been parked yet when it was first woken). Its lease is not over: the grant stays.
    expect(await store.tick({ leaseMs: LEASE, rewakeMs: 60_000, perKey: 10 })).toEqual([]);
    expect(await store.tick({ leaseMs: LEASE, rewakeMs: 0, perKey: 10 })).toEqual(['b']);
    expect(await store.tick({ leaseMs: LEASE, rewakeMs: 0, perKey: 10 })).toEqual(['b']);
    // Once it has started it is nobody to wake.
    expect((await take(store, 'b', keys)).ok).toBe(true);
    expect(await store.tick({ leaseMs: LEASE, rewakeMs: 0, perKey: 10 })).toEqual([]);
    expect(await end(store, 'b')).toEqual([]);
  });

  it('revokes a grant nobody takes up within leaseMs and gives it to the next waiter', async () => {
    const store = freshStore();
    const keys = hosts(1);
    expect((await take(store, 'a', keys)).ok).toBe(true);
    expect((await take(store, 'b', keys)).ok).toBe(false);
    expect((await take(store, 'c', keys)).ok).toBe(false);
    expect(await end(store, 'a')).toEqual(['b']);
    // b never comes: with a lease of 1 ms its grant is revoked by a tick and c gets the slot; the
    // ticks before that (within the millisecond) only woke b again.
    const ticks = await tickUntil(store, { leaseMs: 1, rewakeMs: 0, perKey: 10 }, (w) => w.includes('c'));
    expect(ticks.at(-1)).toEqual(['c']);
    expect(ticks.slice(0, -1).every((w) => w.length === 1 && w[0] === 'b')).toBe(true);
  });
});

describe('flow-penalize', () => {
  it('cuts an adaptive counter by the decrease down to the floor, once per cooldown, and the cut limit holds calls', async () => {
    // No cooldown: every 429 cuts, 1 → 0.5 → 0.25 → the floor, 0.2.
    const eager = new FlowStore(redis, `test-${randomUUID()}`, {
      ...DEFAULT_ADAPTIVE,
      floor: 0.2,
      cooldownMs: 0,
    });
    const keys = keysOf([{ name: 'hosts', key: 'host', concurrency: 10 }]);
    expect((await take(eager, 'a', keys)).ok).toBe(true);
    const cuts: number[] = [];
    for (let i = 0; i < 4; i++) cuts.push(...(await eager.penalize(['hosts=api.test'], undefined)));
    expect(cuts).toEqual([0.5, 0.25, 0.2, 0.2]);
    // 10 × 0.2 = 2 calls at once: a and b go, c waits; no Retry-After was given, so no pause.
    expect((await take(eager, 'b', keys)).ok).toBe(true);
    expect(await take(eager, 'c', keys)).toMatchObject({ ok: false, waitMs: null });
    expect((await eager.counters())[0]).toMatchObject({ factor: 0.2, pausedUntil: null, inFlight: 2 });

    // The default cooldown (1 s): a burst of 429s from calls already in flight cuts once.
    const store = freshStore();
    expect((await take(store, 'a', keys)).ok).toBe(true);
    expect(await store.penalize(['hosts=api.test'], undefined)).toEqual([0.5]);
    expect(await store.penalize(['hosts=api.test'], undefined)).toEqual([0.5]);
  });

  it('pauses every call for a Retry-After without a cut when told so; a shorter one never shortens the pause', async () => {
    const store = freshStore();
    const keys = keysOf([{ name: 'hosts', key: 'host', concurrency: 10 }]);
    expect((await take(store, 'a', keys)).ok).toBe(true);
    expect(await store.penalize(['hosts=api.test'], 60_000, false)).toEqual([1]);
    const paused = (await store.counters())[0]!.pausedUntil;
    expect(Date.parse(paused!) - Date.now()).toBeGreaterThan(50_000);
    const waiting = await take(store, 'b', keys);
    expect(waiting).toMatchObject({ ok: false, key: 'hosts=api.test' });
    if (!waiting.ok) expect(waiting.waitMs).toBeGreaterThan(50_000);
    expect(await store.penalize(['hosts=api.test'], 1000, false)).toEqual([1]);
    expect((await store.counters())[0]!.pausedUntil).toBe(paused);
    await store.penalize(['hosts=api.test'], 120_000, false);
    expect(Date.parse((await store.counters())[0]!.pausedUntil!)).toBeGreaterThan(Date.parse(paused!));
  });

  it('leaves counters declared adaptive: false alone, answering one factor per counter in order', async () => {
    const store = freshStore();
    const keys = keysOf([
      { name: 'fixed', key: 'host', concurrency: 1, adaptive: false },
      { name: 'tenants', key: 'tenant', concurrency: 4 },
    ]);
    expect((await take(store, 'a', keys)).ok).toBe(true);
    expect(await store.penalize(['fixed=api.test', 'tenants=acme'], 60_000)).toEqual([1, 0.5]);
    const byKey = new Map((await store.counters()).map((c) => [c.key, c]));
    expect(byKey.get('fixed=api.test')).toMatchObject({ factor: 1, pausedUntil: null });
    expect(byKey.get('tenants=acme')).toMatchObject({ factor: 0.5, pausedUntil: expect.any(String) });
    // No counters, no script: nothing to answer.
    expect(await store.penalize([], 1000)).toEqual([]);
  });
});
