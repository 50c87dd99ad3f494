/** The trigger scripts (`lua-trigger/`), called through TriggerStore and EventStore against a real Redis. */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type { StoredEvent } from '@tetraloop/core/domain';
import { EventStore, TriggerStore, eventKeys, keyHash, triggersKey } from '@tetraloop/core/state';

const prefix = `test-${randomUUID()}`;
const redis = new Redis(inject('redisUrl'));
const CAP = 3;
const triggers = new TriggerStore(redis, { prefix, maxPerTenant: CAP });
const events = new EventStore(redis, { prefix, dedupeMs: 60_000, batchPendingMax: 5 });
const tenantOf = (): string => `t-${randomUUID().slice(0, 8)}`;
const eventOf = (id: string, seq: number): StoredEvent => ({ id, name: 'e', receivedAt: 'now', seq });

afterAll(async () => {
  await redis.quit();
});

describe('add-trigger', () => {
  it('adds triggers up to the tenant’s cap however many are made at once, and none past it', async () => {
    const tenant = tenantOf();
    const added = await Promise.all([1, 2, 3, 4, 5].map((n) => triggers.add(tenant, `trg_${n}`, '{}')));
    expect(added.filter(Boolean)).toHaveLength(CAP);
    expect(await redis.hlen(triggersKey(prefix, tenant))).toBe(CAP);
    expect(await triggers.add(tenantOf(), 'trg_9', '{}')).toBe(true);
  });
});

describe('record-event', () => {
  it('records an id once per window, numbers the tenant’s events, and says whether it was handed on', async () => {
    const tenant = tenantOf();
    const first = await events.record(tenant, { id: 'a', name: 'e', receivedAt: 'now' });
    expect(first).toEqual({ outcome: 'new', seq: 1 });
    expect(await events.record(tenant, { id: 'a', name: 'other', receivedAt: 'later' })).toEqual({
      outcome: 'seen',
      seq: 1,
    });
    await events.markHanded(tenant, 'a');
    expect((await events.record(tenant, { id: 'a', name: 'e', receivedAt: 'now' })).outcome).toBe('handed');
    expect(await events.record(tenant, { id: 'b', name: 'e', receivedAt: 'now' })).toEqual({
      outcome: 'new',
      seq: 2,
    });
    expect(await events.read(tenant, 'a')).toMatchObject({ id: 'a', name: 'e', seq: 1 });
    const ttl = await redis.pttl(eventKeys(prefix, tenant).event(keyHash('a')));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });
});

describe('batch-add and batch-take', () => {
  const batch = { triggerId: 'trg_b', keyHash: 'k' };

  it('schedules a timer for the first event and a flush per maxSize, once per event, and drops past the bound', async () => {
    const tenant = tenantOf();
    const add = (n: number) => events.addToBatch(tenant, batch, eventOf(`e${n}`, n), 2, 1000);
    expect(await add(1)).toEqual({ dropped: false, flushes: [{ at: 'timer', n: 1 }] });
    // The same event again (a redelivered job): the same decision, not added twice.
    expect(await add(1)).toEqual({ dropped: false, flushes: [{ at: 'timer', n: 1 }] });
    expect(await add(2)).toEqual({ dropped: false, flushes: [{ at: 'now', n: 2 }] });
    expect(await add(3)).toEqual({ dropped: false, flushes: [] });
    expect(await add(4)).toEqual({ dropped: false, flushes: [{ at: 'now', n: 3 }] });
    expect(await add(5)).toEqual({ dropped: false, flushes: [] });
    expect(await add(6)).toEqual({ dropped: true });
    expect(await redis.zcard(eventKeys(prefix, tenant).batch(batch.triggerId, batch.keyHash))).toBe(5);
  });

  it('takes the oldest maxSize events once per flush: a retry takes the same, none once its run exists', async () => {
    const tenant = tenantOf();
    for (const n of [3, 1, 2]) await events.addToBatch(tenant, batch, eventOf(`e${n}`, n), 2, 1000);
    const taken = await events.takeBatch(tenant, batch, 7, 2);
    expect(taken.map((e) => e.id)).toEqual(['e1', 'e2']);
    expect((await events.takeBatch(tenant, batch, 7, 2)).map((e) => e.id)).toEqual(['e1', 'e2']);
    await events.finishBatch(tenant, batch, 7);
    expect(await events.takeBatch(tenant, batch, 7, 2)).toEqual([]);
    expect((await events.takeBatch(tenant, batch, 8, 2)).map((e) => e.id)).toEqual(['e3']);
    expect(await events.takeBatch(tenant, batch, 9, 2)).toEqual([]);
  });
});

describe('debounce-note and debounce-done', () => {
  const key = { triggerId: 'trg_d', keyHash: 'k' };

  it('keeps the latest event by seq, never an earlier one, and nothing a run consumed', async () => {
    const tenant = tenantOf();
    expect(await events.noteDebounce(tenant, key, eventOf('e2', 2), 1000)).toBe(true);
    // Handled out of order by another worker: the later event stands.
    expect(await events.noteDebounce(tenant, key, eventOf('e1', 1), 1000)).toBe(false);
    expect((await events.latestDebounce(tenant, key))?.id).toBe('e2');
    await events.finishDebounce(tenant, key, 2);
    expect(await events.latestDebounce(tenant, key)).toBeNull();
    // A redelivered consumed event is not noted again; a later one is.
    expect(await events.noteDebounce(tenant, key, eventOf('e2', 2), 1000)).toBe(false);
    expect(await events.noteDebounce(tenant, key, eventOf('e3', 3), 1000)).toBe(true);
    await events.finishDebounce(tenant, key, 1);
    expect((await events.latestDebounce(tenant, key))?.id).toBe('e3');
  });
});
