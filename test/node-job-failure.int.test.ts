/**
 * A node job that fails for good (it stalled too often, or threw on every attempt in a Redis
 * outage) must not wedge its run's root job when the node is added again — as a crashed carrier's
 * redelivery does for a node it had begun. BullMQ puts a job id it still holds back among the
 * parent's dependencies when it is added again, and a failed job never runs: the root would wait
 * forever. Node jobs are therefore removed when they fail, so the same id is a new job that runs.
 */
import { randomUUID } from 'node:crypto';
import { type Job, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { createLogger } from '@tetraloop/core/logging';
import {
  closeQueues,
  DEFAULT_JOB_RETENTION,
  enqueueNodes,
  enqueueRunRoot,
  nodeJobId,
  openQueues,
  runJobId,
  runQueuesOf,
  type LoopQueues,
  type RunQueues,
} from '@tetraloop/core/queues';

const prefix = `test-${randomUUID()}`;
let redis: Redis;
let loops: LoopQueues;
let queues: RunQueues;
let planWorker: Worker;
let nodeWorker: Worker;

beforeAll(async () => {
  redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: null });
  loops = openQueues(redis, prefix, createLogger({ level: 'silent', layer: 'tool' }));
  // One shard: no run's shard is looked up.
  queues = runQueuesOf(loops.shards, DEFAULT_JOB_RETENTION, { queueShard: () => Promise.resolve(null) });
  // Workers without a processor: the test takes each job and decides how it ends, as a worker would.
  planWorker = new Worker(loops.plan.name, null, { connection: redis, prefix: loops.plan.opts.prefix! });
  nodeWorker = new Worker(loops.node.name, null, { connection: redis, prefix: loops.node.opts.prefix! });
  await Promise.all([planWorker.waitUntilReady(), nodeWorker.waitUntilReady()]);
});
afterAll(async () => {
  await Promise.all([planWorker?.close(), nodeWorker?.close()]);
  await closeQueues(loops);
  await redis?.quit();
});

interface Taken {
  readonly job: Job;
  readonly token: string;
}

/** Takes the next job of `worker`'s queue, which must be `jobId`: active, locked by the answered token. */
async function take(worker: Worker, jobId: string): Promise<Taken> {
  const [taken] = await takeAll(worker, 1);
  expect(taken?.job.id).toBe(jobId);
  return taken!;
}

/** Takes the next `count` jobs of `worker`'s queue, by job id. */
async function takeAll(worker: Worker, count: number): Promise<Taken[]> {
  const taken: Taken[] = [];
  for (let i = 0; i < count; i++) {
    const token = randomUUID();
    const job = (await worker.getNextJob(token, { block: false })) as Job | undefined;
    if (job) taken.push({ job, token });
  }
  return taken.sort((a, b) => a.job.id!.localeCompare(b.job.id!));
}

it('a node added again after its job failed for good runs in a new job, and its root is released', async () => {
  const runId = randomUUID();
  await enqueueRunRoot(queues, runId, 0);
  // The start pass: two nodes, then the root waits for them.
  const root = await take(planWorker, runJobId(runId));
  await enqueueNodes(queues, runId, 0, [
    { id: 'x', attempts: 1 },
    { id: 'hold', attempts: 1 },
  ]);
  expect(await root.job.moveToWaitingChildren(root.token)).toBe(true);

  // x's job fails on its only attempt: failed for good.
  const first = await take(nodeWorker, nodeJobId(runId, 'x'));
  await first.job.moveToFailed(new Error('Connection is closed.'), first.token, false);
  // Removed as it failed: its id is free for a new job.
  expect(await loops.node.getJobState(nodeJobId(runId, 'x'))).toBe('unknown');
  // The root still waits for `hold`.
  expect(await loops.plan.getJobState(runJobId(runId))).toBe('waiting-children');

  // x is added again (a crashed carrier's redelivery finds it begun and not finished).
  await enqueueNodes(queues, runId, 0, [{ id: 'x', attempts: 1 }]);
  const [hold, again] = await takeAll(nodeWorker, 2);
  expect([hold?.job.id, again?.job.id]).toEqual([nodeJobId(runId, 'hold'), nodeJobId(runId, 'x')]);
  if (!hold || !again) return;
  await again.job.moveToCompleted('ok', again.token, false);
  expect(await loops.plan.getJobState(runJobId(runId))).toBe('waiting-children');
  await hold.job.moveToCompleted('ok', hold.token, false);

  // Every node job ended: the root goes on to its finalize pass.
  expect(await loops.plan.getJobState(runJobId(runId))).toBe('waiting');
});
