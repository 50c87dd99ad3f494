/**
 * A run's nodes in one process share one abort signal: published on the abort channel, the abort
 * reaches every node tracking the run then, and none tracking it later.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RunAborts } from '@tetraloop/core/executor';

const channel = `test-aborts-${randomUUID()}`;
let publisher: Redis;
let aborts: RunAborts;
beforeAll(async () => {
  publisher = new Redis(inject('redisUrl'));
  aborts = await RunAborts.listen(new Redis(inject('redisUrl')), channel);
});
afterAll(async () => {
  await aborts?.close();
  publisher?.disconnect();
});

/** Publishes an abort of `runId` and resolves once `signal` has it. */
const abortHeard = async (runId: string, signal: AbortSignal): Promise<void> => {
  const heard = new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
  await publisher.publish(channel, runId);
  await heard;
};

describe('run aborts in one process', () => {
  it('give the nodes of a run one signal, aborted for all of them at once', async () => {
    const runId = randomUUID();
    const other = aborts.track(randomUUID());
    const first = aborts.track(runId);
    const second = aborts.track(runId);
    expect(second.signal).toBe(first.signal);
    await abortHeard(runId, first.signal);
    expect(second.signal.aborted).toBe(true);
    expect(String(first.signal.reason)).toContain(runId);
    expect(other.signal.aborted).toBe(false);
    for (const t of [first, second, other]) t.release();
  });

  it('give what tracks a run after its abort a new signal, not aborted', async () => {
    const runId = randomUUID();
    const before = aborts.track(runId);
    await abortHeard(runId, before.signal);
    const after = aborts.track(runId);
    expect(after.signal.aborted).toBe(false);
    // The aborted node letting go does not drop the signal the new one holds.
    before.release();
    before.release();
    expect(aborts.track(runId).signal).toBe(after.signal);
  });

  it('make a new signal once every holder has let go', () => {
    const runId = randomUUID();
    const held = aborts.track(runId);
    const { signal } = held;
    held.release();
    const next = aborts.track(runId);
    expect(next.signal).not.toBe(signal);
    next.release();
  });

  it('keep one signal for a chain whose next node is tracked before the last one lets go', () => {
    const runId = randomUUID();
    let current = aborts.track(runId);
    const { signal } = current;
    for (let hop = 0; hop < 5; hop++) {
      const next = aborts.track(runId);
      current.release();
      current = next;
      expect(current.signal).toBe(signal);
    }
    current.release();
  });
});
