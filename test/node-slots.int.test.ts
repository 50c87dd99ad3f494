/**
 * A node job at its run's `maxParallelNodes` cap, on a real Redis and real BullMQ jobs fetched by
 * hand: Redis's MONITOR shows which commands each take of a slot sends. Parking writes the job
 * once (its move to the delayed set), taking a slot after waiting is one script call, and a run
 * without a cap sends nothing. Only `Date` is faked, so the parks' times are exact.
 */
import { randomUUID } from 'node:crypto';
import { DelayedError, type Job, type Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { commandsWhile } from './support/monitor.js';
import { giveNodeSlot, takeNodeSlot, type ExecutorDeps } from '@tetraloop/core/executor';
import { createLogger } from '@tetraloop/core/logging';
import {
  closeQueues,
  DEFAULT_JOB_RETENTION,
  openQueues,
  runQueuesOf,
  type LoopQueues,
} from '@tetraloop/core/queues';
import { RunNodeSlots, runNodeSlotKeys } from '@tetraloop/core/state';

const prefix = `test-${randomUUID()}`;
let redis: Redis;
let loops: LoopQueues;
let node: Queue;
let worker: Worker;
let deps: Pick<ExecutorDeps, 'nodeSlots' | 'queues' | 'logger'>;

beforeAll(async () => {
  redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: null });
  loops = openQueues(redis, prefix, createLogger({ level: 'silent', layer: 'tool' }));
  node = loops.node;
  worker = new Worker(node.name, null, { connection: redis, prefix: node.opts.prefix! });
  await worker.waitUntilReady();
  deps = {
    nodeSlots: new RunNodeSlots(redis, prefix),
    // One shard: no run's shard is looked up.
    queues: runQueuesOf(loops.shards, DEFAULT_JOB_RETENTION, { queueShard: () => Promise.resolve(null) }),
    logger: createLogger({ level: 'silent', layer: 'tool' }),
  };
});
afterEach(() => {
  vi.useRealTimers();
});
afterAll(async () => {
  await worker?.close();
  await closeQueues(loops);
  await redis?.quit();
});

const clockAt = (at: number): void => {
  vi.useFakeTimers({ toFake: ['Date'], now: at });
};

/** Adds a node job and fetches it as a worker does: active, locked by the answered token. */
async function activeJob(runId: string, nodeId: string): Promise<{ job: Job; token: string }> {
  await node.add('node', { runId, nodeId, generation: 0 }, { jobId: `${runId}-${nodeId}` });
  return fetchJob(`${runId}-${nodeId}`);
}
async function fetchJob(jobId: string): Promise<{ job: Job; token: string }> {
  const token = randomUUID();
  const job = (await worker.getNextJob(token, { block: false })) as Job | undefined;
  expect(job?.id).toBe(jobId);
  return { job: job!, token };
}

/**
 * The commands of this suite that clients sent Redis while `act` ran (not those its scripts ran),
 * each as its words, and what `act` answered or threw.
 */
async function roundTrips<T>(act: () => Promise<T>): Promise<{ sent: string[][]; out: T | Error }> {
  const { commands, out } = await commandsWhile(inject('redisUrl'), act);
  const sent = commands
    .filter(({ args, source }) => source !== 'lua' && args.some((arg) => arg.includes(prefix)))
    .map(({ args }) => args);
  return { sent, out };
}

/** Those of `sent` that name the job's key: each a write of the job (a move, a data update). */
const jobWrites = (sent: string[][], job: Job): string[][] => {
  const key = node.toKey(job.id!);
  return sent.filter((args) => args.includes(key));
};

/** The delay BullMQ keeps on a parked job, read back from Redis. */
const delayOf = async (job: Job): Promise<number> => Number(await redis.hget(node.toKey(job.id!), 'delay'));

describe('a node job at its run’s cap', () => {
  it('parks with one write of the job, longer the longer it waits, wakes when a slot frees, and takes it in one call', async () => {
    const runId = randomUUID();
    const plan = { runId, maxParallelNodes: 1, timeoutSeconds: 60 };
    const waiting = runNodeSlotKeys(prefix, runId).waiting;
    const t0 = Date.now();
    clockAt(t0);
    const a = await activeJob(runId, 'a');
    const heldA = await takeNodeSlot(deps, plan, a.job, a.token);
    expect(heldA).toEqual({ runId, cap: 1, jobId: a.job.id });

    // b finds the cap each time it looks: its recheck doubles from 5 s up to 60 s, each park one
    // write of the job (its move to the delayed set) and no write of its data.
    const b = await activeJob(runId, 'b');
    let { token } = b;
    const due = [0, 5_000, 15_000, 35_000, 75_000, 135_000];
    const delays: number[] = [];
    let firstWait = 0;
    for (const at of due) {
      if (at > 0) {
        // The safety recheck: the delayed job falls due at the (faked) time and is fetched again.
        clockAt(t0 + at);
        ({ token } = await fetchJob(b.job.id!));
        // The time b has waited is Redis's to measure (the worker's clock plays no part): its
        // first wait moves back as far.
        await redis.zadd(waiting, 'XX', firstWait - at, b.job.id!);
      }
      const park = await roundTrips(() => takeNodeSlot(deps, plan, b.job, token));
      expect(park.out).toBeInstanceOf(DelayedError);
      if (at === 0) firstWait = Number(await redis.zscore(waiting, b.job.id!));
      expect(jobWrites(park.sent, b.job)).toHaveLength(1);
      expect(await b.job.getState()).toBe('delayed');
      delays.push(await delayOf(b.job));
    }
    expect(delays).toEqual([5_000, 10_000, 20_000, 40_000, 60_000, 60_000]);
    expect(await redis.hget(node.toKey(b.job.id!), 'data')).toBe(
      JSON.stringify({ runId, nodeId: 'b', generation: 0 }),
    );
    // It is on the run's waiting list since its first park (by Redis's clock), never moved on.
    expect(Number(await redis.zscore(waiting, b.job.id!))).toBe(firstWait - 135_000);

    // a gives its slot back: b is woken at once, not at its recheck 60 s on.
    await giveNodeSlot(deps, heldA!);
    expect(await b.job.getState()).toBe('waiting');
    ({ token } = await fetchJob(b.job.id!));
    const take = await roundTrips(() => takeNodeSlot(deps, plan, b.job, token));
    expect(take.out).toEqual({ runId, cap: 1, jobId: b.job.id });
    // One call: the slot script, which also took b off the waiting list.
    expect(take.sent).toHaveLength(1);
    expect(take.sent[0]![0]!.toLowerCase()).toMatch(/^eval/);
    expect(await redis.zscore(waiting, b.job.id!)).toBeNull();

    // A later wait of b (a continuation's, a retry's) starts again from the shortest recheck.
    await giveNodeSlot(deps, take.out as NonNullable<typeof heldA>);
    const c = await activeJob(runId, 'c');
    expect(await takeNodeSlot(deps, plan, c.job, c.token)).toEqual({ runId, cap: 1, jobId: c.job.id });
    await expect(takeNodeSlot(deps, plan, b.job, token)).rejects.toBeInstanceOf(DelayedError);
    expect(await delayOf(b.job)).toBe(5_000);
  });

  it('frees a slot its holder never gave back, once held 5 s by Redis’s clock, whatever the workers’ clocks say', async () => {
    const runId = randomUUID();
    const plan = { runId, maxParallelNodes: 1, timeoutSeconds: 60 };
    const keys = runNodeSlotKeys(prefix, runId);
    const a = await activeJob(runId, 'a');
    expect(await takeNodeSlot(deps, plan, a.job, a.token)).toEqual({ runId, cap: 1, jobId: a.job.id });
    // a's job ends without giving its slot back (its process died between the two).
    await a.job.moveToCompleted('done', a.token, false);

    // A worker whose clock runs a minute ahead finds the cap: a took its slot just now by Redis's
    // clock, so it keeps it, and b parks.
    clockAt(Date.now() + 60_000);
    const b = await activeJob(runId, 'b');
    await expect(takeNodeSlot(deps, plan, b.job, b.token)).rejects.toBeInstanceOf(DelayedError);
    expect(await redis.zscore(keys.running, a.job.id!)).not.toBeNull();

    // Five seconds on, by Redis's clock (a's score moved back; the one-sweep-per-5-s key gone).
    const took = Number(await redis.zscore(keys.running, a.job.id!));
    await redis.zadd(keys.running, 'XX', took - 5_000, a.job.id!);
    await redis.del(`${keys.running}:sweep`);
    vi.useRealTimers();
    await b.job.promote();
    const again = await fetchJob(b.job.id!);
    expect(await takeNodeSlot(deps, plan, b.job, again.token)).toEqual({ runId, cap: 1, jobId: b.job.id });
    expect(await redis.zrange(keys.running, '0', '-1')).toEqual([b.job.id]);
  });

  it('sends nothing when its run has no cap', async () => {
    const runId = randomUUID();
    const { job, token } = await activeJob(runId, 'free');
    for (const plan of [{ runId, maxParallelNodes: null, timeoutSeconds: 60 }, null]) {
      const take = await roundTrips(() => takeNodeSlot(deps, plan, job, token));
      expect(take.out).toBeUndefined();
      expect(take.sent).toEqual([]);
    }
    const keys = runNodeSlotKeys(prefix, runId);
    expect(await redis.exists(keys.running, keys.waiting)).toBe(0);
  });
});
