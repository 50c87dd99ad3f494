/**
 * A run's root job handed out again, as BullMQ does after a stall (its worker died, or lost its
 * lock in a Redis restart): it waits for the nodes still pending instead of settling the run
 * without them, and a root job that failed for good still gets its run settled. Both found by
 * `npm run chaos`: runs failed `node_lost` with every node still queued, and one run never settled.
 * And a run whose last node's completion decided it: settled by that node's job, or by the root job
 * when the node's worker stopped between the decision and the settle.
 */
import { Job, Queue } from 'bullmq';
import { runJobId } from '@tetraloop/core/queues';
import { type RedisClient, connectRedis } from '@tetraloop/core/runtime';
import { RunStore, runKeys } from '@tetraloop/core/state';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  followJobEvents,
  postRun,
  readEvents,
  rootJobFinished,
  startStack,
  waitFor,
  type Stack,
} from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let stack: Stack;
let tools: ToolServer;
let redis: RedisClient;

beforeAll(async () => {
  tools = await startToolServer();
  stack = await startStack();
  redis = connectRedis(stack.env.REDIS_URL!, 'worker', 'root-job-test');
});
afterAll(async () => {
  redis?.disconnect();
  await stack?.close();
  await tools?.close();
});

/** A run of one slow node, once its root job waits for it (in BullMQ's waiting-children). */
async function runWaitingForItsNode(node: string, ms: number): Promise<string> {
  const jobs = await followJobEvents(stack, ['plan']);
  try {
    const posted = await postRun(stack.url, {
      graph: {
        nodes: [
          { id: node, kind: 'tool', tool: 'http', args: { url: `${tools.url}/work?node=${node}&ms=${ms}` } },
        ],
      },
    });
    expect(posted.status).toBe(202);
    const runId = posted.body.runId as string;
    await jobs.next(
      (e) => e.event === 'waiting-children' && e.jobId === runJobId(runId),
      Date.now() + 20_000,
      `the root job of ${runId} to wait for its node`,
    );
    return runId;
  } finally {
    jobs.close();
  }
}

/** Hands the root job out again, as BullMQ's stalled check does: back to wait, its data as it was. */
async function handOutAgain(runId: string, deferredFailure?: string): Promise<void> {
  const plan = `${stack.prefix}:plan`;
  const jobId = runJobId(runId);
  const tx = redis.multi().zrem(`${plan}:waiting-children`, jobId);
  // Past the stall limit BullMQ marks the job so that the next worker to take it fails it.
  if (deferredFailure) tx.hset(`${plan}:${jobId}`, 'defa', deferredFailure);
  await tx.rpush(`${plan}:wait`, jobId).zadd(`${plan}:marker`, 0, '0').exec();
}

it('waits for the pending nodes when handed out again at its finalize step', async () => {
  const runId = await runWaitingForItsNode('slow-a', 1500);
  await handOutAgain(runId);
  const doc = await waitFor(stack.url, runId);
  expect(doc.status).toBe('succeeded');
  expect(doc.output).toEqual({ 'slow-a': expect.objectContaining({ status: 200 }) });
  expect(tools.hitsOf('slow-a')).toHaveLength(1);
});

it('settles the run of a root job that failed for good, from its snapshots', async () => {
  const runId = await runWaitingForItsNode('slow-b', 3000);
  await handOutAgain(runId, 'job stalled more than allowable limit');
  const doc = await waitFor(stack.url, runId);
  expect(doc.status).toBe('failed');
  expect(doc.error).toMatchObject({ code: 'node_lost', message: 'nodes never completed: slow-b' });
});

/** The root job of `runId`, as BullMQ holds it. */
async function rootJob(runId: string): Promise<Job> {
  const job = await Job.fromId(
    new Queue('plan', { connection: redis, prefix: stack.prefix }),
    runJobId(runId),
  );
  if (!job) throw new Error(`run ${runId} has no root job`);
  return job;
}

it('settles a run from its last node completion, before its root job comes back for its finalize pass', async () => {
  const plan = stack.pools!.workers.get('plan')!;
  const runId = await runWaitingForItsNode('last-a', 300);
  // No plan worker takes the root job from here on: whatever settles the run now is the node's job.
  await Promise.all(plan.map((w) => w.pause()));
  try {
    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('succeeded');
    expect(doc.output).toEqual({ 'last-a': expect.objectContaining({ status: 200 }) });
    // The node's job ends after the settle it made; then BullMQ moves the root job to `wait`.
    const root = await rootJob(runId);
    await expect.poll(() => root.getState(), { timeout: 10_000, interval: 20 }).toBe('waiting');
  } finally {
    await Promise.all(plan.map((w) => w.resume()));
  }
  // The root job's pass then finds the run settled and repeats only what is safe to repeat.
  await rootJobFinished(stack, runId);
  expect((await rootJob(runId)).returnvalue).toEqual({ status: 'succeeded' });
  // The node's job got through what follows the settle (slot, lane, webhooks): the root job's pass
  // found it marked and did not repeat it.
  expect(await redis.hget(runKeys(stack.prefix, runId).meta, 'followedUp')).toBe('1');
  const types = (await readEvents(stack.url, runId)).map((e) => e.data.type);
  expect(types.filter((t) => t === 'run.decided' || t === 'run.finished')).toEqual([
    'run.decided',
    'run.finished',
  ]);
});

it('settles a run its last node decided but did not settle (its worker stopped in between) in the root job', async () => {
  const runId = await runWaitingForItsNode('last-b', 1500);
  // As the node's completion would, had its worker stopped right after its script: the run is
  // decided `succeeded`, not settled. The node's own job then finds its snapshot written.
  const store = new RunStore(redis, { prefix: stack.prefix, retentionSeconds: 3600 });
  const written = {
    status: 'succeeded' as const,
    output: 'from the stopped worker',
    attempts: [],
    finishedAt: new Date().toISOString(),
    durationMs: 1,
  };
  const done = await store.completeNode(runId, 'last-b', written, {
    release: true,
    children: [],
    charge: {},
    planned: { nodes: 1, generation: 0 },
  });
  expect(done).toMatchObject({ written: true, decided: true });
  expect(await store.settledState(runId)).toBe(false);
  await rootJobFinished(stack, runId);
  const doc = await waitFor(stack.url, runId);
  expect(doc).toMatchObject({ status: 'succeeded', output: { 'last-b': 'from the stopped worker' } });
  expect((await rootJob(runId)).returnvalue).toEqual({ status: 'succeeded' });
});
