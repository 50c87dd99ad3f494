/**
 * A root job that failed for good while no plan process was left to see it: the plan pool's
 * `failed` listener settles such a run, but its retries live in that process. The reconciler's
 * pass (any plan worker, every TETRALOOP_RECONCILE_INTERVAL_MS) settles it instead.
 */
import { randomUUID } from 'node:crypto';
import { type Job, UnrecoverableError, Worker } from 'bullmq';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runJobId } from '@tetraloop/core/queues';
import { connectRedis, type RedisClient } from '@tetraloop/core/runtime';
import { parseWorkerEnv, startPools, type PoolsHandle } from '@tetraloop/workers';
import { followJobEvents, postRun, startStack, waitFor, type Stack } from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let stack: Stack;
let tools: ToolServer;
let redis: RedisClient;
let planOnly: PoolsHandle | undefined;

beforeAll(async () => {
  tools = await startToolServer();
  stack = await startStack({
    env: { TETRALOOP_RECONCILE_INTERVAL_MS: '300', TETRALOOP_SHUTDOWN_GRACE_MS: '200' },
  });
  redis = connectRedis(stack.env.REDIS_URL!, 'worker', 'root-job-reconcile-test');
});
afterAll(async () => {
  redis?.disconnect();
  await planOnly?.close();
  await stack?.close();
  await tools?.close();
});

it('settles the run of a root job that failed for good after its plan process stopped', async () => {
  const jobs = await followJobEvents(stack, ['plan']);
  let runId: string;
  try {
    const posted = await postRun(stack.url, {
      graph: {
        nodes: [
          { id: 'slow', kind: 'tool', tool: 'http', args: { url: `${tools.url}/work?node=slow&ms=30000` } },
        ],
      },
    });
    expect(posted.status).toBe(202);
    runId = posted.body.runId as string;
    await jobs.next(
      (e) => e.event === 'waiting-children' && e.jobId === runJobId(runId),
      Date.now() + 20_000,
      `the root job of ${runId} to wait for its node`,
    );
  } finally {
    jobs.close();
  }
  // Every pool of the stack stops (the node's call is left in flight), so no `failed` listener
  // sees what follows.
  await stack.pools?.close();

  // The root job fails for good, as BullMQ fails a job that stalled past its limit: handed out
  // again and failed by the worker that takes it.
  const plan = `${stack.prefix}:plan`;
  const jobId = runJobId(runId);
  await redis.multi().zrem(`${plan}:waiting-children`, jobId).rpush(`${plan}:wait`, jobId).exec();
  const taker = new Worker('plan', null, { connection: redis, prefix: stack.prefix });
  try {
    const token = randomUUID();
    const job = (await taker.getNextJob(token, { block: false })) as Job | undefined;
    expect(job?.id).toBe(jobId);
    await job!.moveToFailed(new UnrecoverableError('job stalled more than allowable limit'), token, false);
    expect(await job!.getState()).toBe('failed');
  } finally {
    await taker.close();
  }
  const before = (await (await fetch(`${stack.url}/v1/runs/${runId}`)).json()) as { status: string };
  expect(before.status).toBe('running');

  // A plan pool started afterwards never saw the failure: its reconciler settles the run.
  planOnly = await startPools(parseWorkerEnv(stack.env), { pools: ['plan'] });
  const doc = await waitFor(stack.url, runId, 20_000);
  expect(doc.status).toBe('failed');
  expect(doc.error).toMatchObject({ code: 'node_lost', message: 'nodes never completed: slow' });
});
