/**
 * Workers assigned to shards (`TETRALOOP_WORKER_SHARDS`): with the run queues in two shards, a tool
 * worker process that consumes shard 0 runs shard 0's nodes only; shard 1's wait in their queue
 * until a worker for shard 1 starts. The API and the plan pool (every shard) run in this process.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { DEFAULT_TENANT, idempotentRunId } from '@tetraloop/core/domain';
import { QUEUE_NAMES, nodeJobId, queueLayout, shardOfRunId } from '@tetraloop/core/queues';
import { spawnTetraloop, stderrMatches, type Spawned } from './support/processes.js';
import { followJobEvents, postRun, startStack, waitFor, type Stack } from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

const SHARDS = 2;
let stack: Stack;
let tools: ToolServer;
const workers: Spawned[] = [];

beforeAll(async () => {
  tools = await startToolServer();
  stack = await startStack({ pools: ['sense', 'plan'], env: { TETRALOOP_QUEUE_SHARDS: String(SHARDS) } });
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.kill('SIGKILL')));
  await stack?.close();
  await tools?.close();
});

async function startToolWorker(shards: string): Promise<string> {
  const worker = spawnTetraloop(['worker', '--pool', 'tool'], {
    ...stack.env,
    TETRALOOP_WORKER_SHARDS: shards,
  });
  workers.push(worker);
  const [line] = await stderrMatches(worker, /worker ready: pools tool, shards [\d, ]+ \(pid \d+\)/);
  return line;
}

const shardPrefix = (shard: number): string =>
  queueLayout(stack.prefix, { clustered: false, shards: SHARDS }).shards[shard]!;

/** The number of jobs waiting in shard `shard`'s tool queue. */
async function waitingIn(shard: number): Promise<number> {
  const connection = new Redis(stack.env.REDIS_URL!, { maxRetriesPerRequest: null });
  const queue = new Queue(QUEUE_NAMES.tool, { connection, prefix: shardPrefix(shard) });
  try {
    return await queue.getWaitingCount();
  } finally {
    await queue.close();
    connection.disconnect();
  }
}

describe('TETRALOOP_WORKER_SHARDS', () => {
  it('runs only its shards’ nodes; another shard’s wait for a worker of their own', async () => {
    expect(await startToolWorker('0')).toContain('shards 0 (pid');
    // Three runs on each shard: Idempotency-Keys chosen for where their run ids hash.
    const keys = { 0: [] as string[], 1: [] as string[] };
    for (let n = 0; keys[0].length < 3 || keys[1].length < 3; n++) {
      const key = `shards-${n}-${stack.prefix}`;
      const shard = shardOfRunId(idempotentRunId(DEFAULT_TENANT, key), SHARDS) as 0 | 1;
      if (keys[shard].length < 3) keys[shard].push(key);
    }
    const submit = async (key: string, node: string) => {
      const url = `${tools.url}/work?node=${node}&ms=10`;
      const posted = await postRun(
        stack.url,
        { graph: { nodes: [{ id: node, kind: 'tool', tool: 'http', args: { url } }] } },
        { 'idempotency-key': key },
      );
      expect(posted.status).toBe(202);
      return { runId: posted.body.runId as string, node };
    };
    // Followed from before the submits, so no announcement of shard 1's node jobs is missed.
    const shard1 = await followJobEvents(stack, ['tool'], shardPrefix(1));
    const byShard = await Promise.all(
      ([0, 1] as const).map((shard) =>
        Promise.all(keys[shard].map((key, i) => submit(key, `s${shard}n${i}`))),
      ),
    );

    for (const run of byShard[0]!) expect((await waitFor(stack.url, run.runId)).status).toBe('succeeded');
    // Shard 1's runs started (the plan pool serves every shard) and their node jobs are in shard
    // 1's queue, but no worker takes them: their nodes were never called.
    try {
      const deadline = Date.now() + 20_000;
      const left = new Set(byShard[1]!.map((r) => nodeJobId(r.runId, r.node)));
      while (left.size > 0) {
        const added = await shard1.next(
          (e) => e.event === 'added' && left.has(e.jobId),
          deadline,
          'shard 1’s node jobs added',
        );
        left.delete(added.jobId);
      }
    } finally {
      shard1.close();
    }
    for (const run of byShard[1]!) {
      const doc = await (await fetch(`${stack.url}/v1/runs/${run.runId}`)).json();
      expect(doc).toMatchObject({ status: 'running', nodes: { [run.node]: { status: 'queued' } } });
      expect(tools.hitsOf(run.node)).toEqual([]);
    }
    expect(await waitingIn(1)).toBe(byShard[1]!.length);

    await startToolWorker('1');
    for (const run of byShard[1]!) {
      expect((await waitFor(stack.url, run.runId)).status).toBe('succeeded');
      expect(tools.hitsOf(run.node)).toHaveLength(1);
    }
  }, 60_000);
});
