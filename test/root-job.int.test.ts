/**
 * A run's root job handed out again, as BullMQ does after a stall (its worker died, or lost its
 * lock in a Redis restart): it waits for the nodes still pending instead of settling the run
 * without them, and a root job that failed for good still gets its run settled. Both found by
 * `npm run chaos`: runs failed `node_lost` with every node still queued, and one run never settled.
 */
import { runJobId } from '@tetraloop/core/queues';
import { type RedisClient, connectRedis } from '@tetraloop/core/runtime';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { followJobEvents, postRun, startStack, waitFor, type Stack } from './support/stack.js';
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
