/**
 * Workers assigned to shards (`TETRALOOP_WORKER_SHARDS`): with the run queues in two shards, a tool
 * worker process that consumes shard 0 runs shard 0's nodes only; shard 1's wait in their queue
 * until a worker for shard 1 starts. The API and the plan pool (every shard) run in this process.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import {
  DEFAULT_TENANT,
  QUEUE_NAMES,
  idempotentRunId,
  nodeJobId,
  queueLayout,
  shardOfRunId,
} from '@tetraloop/core';
import { spawnTetraloop, stderrMatches, type Spawned } from './support/processes.js';
import { postRun, startStack, waitFor, type Stack } from './support/stack.js';
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

/** Resolves once BullMQ has announced each of `jobIds` added to shard `shard`'s tool queue (its event stream, from the start). */
async function untilAdded(shard: number, jobIds: readonly string[]): Promise<void> {
  const redis = new Redis(stack.env.REDIS_URL!);
  const left = new Set(jobIds);
  try {
    for (let cursor = '0-0'; left.size > 0;) {
      const reply = await redis.xread(
        'COUNT',
        1000,
        'BLOCK',
        20_000,
        'STREAMS',
        `${shardPrefix(shard)}:${QUEUE_NAMES.tool}:events`,
        cursor,
      );
      if (!reply) throw new Error(`jobs ${[...left].join(', ')} not added to shard ${shard} within 20 s`);
      for (const [id, fields] of reply[0]![1]) {
        cursor = id;
        const event = Object.fromEntries(fields.flatMap((f, i) => (i % 2 === 0 ? [[f, fields[i + 1]]] : [])));
        if (event.event === 'added') left.delete(event.jobId ?? '');
      }
    }
  } finally {
    redis.disconnect();
  }
}

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
    const byShard = await Promise.all(
      ([0, 1] as const).map((shard) =>
        Promise.all(keys[shard].map((key, i) => submit(key, `s${shard}n${i}`))),
      ),
    );

    for (const run of byShard[0]!) expect((await waitFor(stack.url, run.runId)).status).toBe('succeeded');
    // Shard 1's runs started (the plan pool serves every shard) and their node jobs are in shard
    // 1's queue, but no worker takes them: their nodes were never called.
    await untilAdded(
      1,
      byShard[1]!.map((r) => nodeJobId(r.runId, r.node)),
    );
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
