/**
 * Run deadlines: a run is among them from its start until it settles, and the plan pool's sweep
 * ends one past its deadline (`timed_out`) even when nothing else would, drops entries whose run is
 * gone or settled (only while still due), and adds no BullMQ job for a deadline.
 */
import { randomUUID } from 'node:crypto';
import type { ExecutableGraph } from '@tetraloop/core/nodes';
import { RunStore, runDeadlinesKey, runKeys } from '@tetraloop/core/state';
import { type RedisClient, connectRedis } from '@tetraloop/core/runtime';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { postRun, runToEnd, startStack, waitFor, type Stack } from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let stack: Stack;
let tools: ToolServer;
let redis: RedisClient;
let store: RunStore;

beforeAll(async () => {
  tools = await startToolServer();
  stack = await startStack();
  redis = connectRedis(stack.env.REDIS_URL!, 'worker', 'run-deadlines-test');
  store = new RunStore(redis, { prefix: stack.prefix, retentionSeconds: 3600 });
});
afterAll(async () => {
  redis?.disconnect();
  await stack?.close();
  await tools?.close();
});

const deadlines = (): string => runDeadlinesKey(stack.prefix);

/** Resolves once `check` holds, looking every 20 ms for up to 10 s. */
async function until(check: () => Promise<boolean>, what: string): Promise<void> {
  for (const end = Date.now() + 10_000; Date.now() < end; await new Promise((r) => setTimeout(r, 20))) {
    if (await check()) return;
  }
  throw new Error(`timed out waiting for ${what}`);
}

it('holds a running run at its deadline, ends it past it, and adds no deadline job', async () => {
  const posted = await postRun(stack.url, {
    timeoutSeconds: 1,
    graph: {
      nodes: [
        { id: 'slow', kind: 'tool', tool: 'http', args: { url: `${tools.url}/hang`, timeoutMs: 60_000 } },
      ],
    },
  });
  expect(posted.status).toBe(202);
  const runId = posted.body.runId as string;
  await until(async () => (await store.status(runId)) === 'running', 'the run to start');
  const deadlineAt = await redis.hget(runKeys(stack.prefix, runId).meta, 'deadlineAt');
  expect(deadlineAt).not.toBeNull();
  expect(await redis.zscore(deadlines(), runId)).toBe(deadlineAt);
  // No BullMQ job waits in the plan queue for its deadline (a run had one, delayed until then).
  expect(await redis.exists(`${stack.prefix}:plan:${runId}.deadline`)).toBe(0);
  const doc = await waitFor(stack.url, runId);
  expect(doc.status).toBe('timed_out');
  expect(doc.error).toMatchObject({ code: 'timed_out' });
  expect(doc.nodes.slow).toMatchObject({ status: 'cancelled', error: { code: 'aborted' } });
  expect(await redis.zscore(deadlines(), runId)).toBeNull();
});

it('takes a run off the deadlines when it settles', async () => {
  const doc = await runToEnd(stack.url, {
    graph: { nodes: [{ id: 'quick', kind: 'tool', tool: 'http', args: { url: `${tools.url}/work?ms=1` } }] },
  });
  expect(doc.status).toBe('succeeded');
  expect(await redis.zscore(deadlines(), doc.runId)).toBeNull();
});

it('drops a past entry whose run is gone, and leaves one not yet due', async () => {
  await redis.zadd(deadlines(), Date.now() - 1000, 'gone-run', Date.now() + 3_600_000, 'later-run');
  await until(
    async () => (await redis.zscore(deadlines(), 'gone-run')) === null,
    'the sweep to drop the entry',
  );
  expect(await redis.zscore(deadlines(), 'later-run')).not.toBeNull();
  await redis.zrem(deadlines(), 'later-run');
});

it('ends a running run past its deadline that nothing else would end: no node job, no call', async () => {
  // Started with a deadline already past and no node enqueued: no node begins to find the deadline,
  // no call is cut off by it; only the sweep can end the run.
  const runId = `sweep-only-${randomUUID()}`;
  const graph: ExecutableGraph = {
    nodes: [{ id: 'never', kind: 'tool', tool: 'json', args: { value: 1 } }],
    edges: [],
  };
  await store.create({
    runId,
    graph,
    plan: graph,
    input: null,
    timeoutSeconds: 1,
    budget: {},
    metadata: undefined,
    createdAt: new Date().toISOString(),
    pending: new Map([['never', 0]]),
  });
  const started = await store.start(runId, 0, [], Date.now() - 1, new Date().toISOString());
  expect(started.status).toBe('running');
  await until(async () => (await store.status(runId)) === 'timed_out', 'the sweep to end the run');
  expect(await store.error(runId)).toMatchObject({ code: 'timed_out' });
  expect(await redis.zscore(deadlines(), runId)).toBeNull();
});

it('takes off only an entry still due: a run started again since keeps its new one', async () => {
  const now = Date.now();
  await redis.zadd(deadlines(), now + 3_600_000, 'restarted-run');
  await store.dropDeadline('restarted-run', now);
  expect(await redis.zscore(deadlines(), 'restarted-run')).not.toBeNull();
  await store.dropDeadline('restarted-run', now + 3_600_000);
  expect(await redis.zscore(deadlines(), 'restarted-run')).toBeNull();
});
