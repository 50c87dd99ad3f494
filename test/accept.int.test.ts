/**
 * The accept path is atomic: a run with an Idempotency-Key is created once however often (and
 * however concurrently) it is asked for, and a run that was stored but never got its root job is
 * found by the reconciler and runs.
 */
import { createHash, randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseApiEnv, startApi, type ApiHandle } from '@tetraloop/api';
import { QUEUE_NAMES, runJobId, type RunQueues, runQueuesOf } from '@tetraloop/core/queues';
import { RunRequest, reconcileQueuedRuns } from '@tetraloop/core/runs';
import {
  connectRedis,
  startRedisServer,
  whenReady,
  type RedisClient,
  type RedisServer,
} from '@tetraloop/core/runtime';
import { RunStore, SessionStore, scriptShas } from '@tetraloop/core/state';
import { commandsWhile, type MonitoredCommand } from './support/monitor.js';
import { postRun, readEvents, startStack, testEnv, waitFor, type Stack } from './support/stack.js';

const graph = (value: unknown) =>
  RunRequest.parse({ graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value } }] } });

describe('Idempotency-Key', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('answers the same run to the same key, sequentially and ten at once', async () => {
    const key = `order-${randomUUID()}`;
    const first = await postRun(stack.url, graph(1), { 'idempotency-key': key });
    const again = await postRun(stack.url, graph(1), { 'idempotency-key': key });
    expect(first.status).toBe(202);
    expect(again.status).toBe(202);
    expect(again.body.runId).toBe(first.body.runId);
    expect(again.body.acceptedAt).toBe(first.body.acceptedAt);

    const concurrent = `order-${randomUUID()}`;
    const answers = await Promise.all(
      Array.from({ length: 10 }, () => postRun(stack.url, graph(2), { 'idempotency-key': concurrent })),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(202));
    const ids = new Set(answers.map((a) => a.body.runId));
    expect(ids.size).toBe(1);
    const runId = [...ids][0] as string;
    expect((await waitFor(stack.url, runId)).status).toBe('succeeded');
    // Created once and started once.
    const types = (await readEvents(stack.url, runId)).map((e) => e.data.type);
    expect(types.filter((t) => t === 'run.queued' || t === 'run.started')).toEqual([
      'run.queued',
      'run.started',
    ]);
  });

  it('answers a repeated create with the run, never a conflict (a command re-sent after a reconnect)', async () => {
    // ioredis re-sends a command whose connection dropped before the reply. With a claim key
    // (`SET NX`) the re-sent claim failed and the API took its own claim for someone else's: 409
    // for the key's whole life, and no run. Now the run id derives from tenant and key, and the
    // create script makes the run only if it does not exist: whether the first create ran once or
    // twice, and whether the answer that comes back is the first or the repeat, the request finds
    // its run. Here the repeat is the API's own second submit of the same key.
    const key = `resent-${randomUUID()}`;
    const first = await stack.api.runs.submit(graph(3), key);
    const resent = await stack.api.runs.submit(graph(3), key);
    expect(first.created).toBe(true);
    expect(resent).toMatchObject({ runId: first.runId, created: false, acceptedAt: first.acceptedAt });
    expect((await waitFor(stack.url, first.runId)).status).toBe('succeeded');
    // After the run has settled, the key still answers it, with its final status.
    expect(await stack.api.runs.submit(graph(3), key)).toMatchObject({
      runId: first.runId,
      status: 'succeeded',
      created: false,
    });
  });

  it('keeps the first body of a key: a different body with the same key gets the first run', async () => {
    const key = `body-${randomUUID()}`;
    const first = await postRun(stack.url, graph('first'), { 'idempotency-key': key });
    const other = await postRun(stack.url, graph('second'), { 'idempotency-key': key });
    expect(other.body.runId).toBe(first.body.runId);
    const doc = await waitFor(stack.url, first.body.runId as string);
    expect(doc.output).toEqual({ a: 'first' });
  });
});

describe('a new run', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ pools: [] });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('reaches Redis before its root job: the create, then the add, on one connection', async () => {
    // The API sends both without waiting for the create's answer: a root job run before its run
    // exists would find nothing and end, and the run would wait for the reconciler (which replaces
    // a root job that ended while its run is queued).
    await expectCreateBeforeAdd(stack.env.REDIS_URL!, stack.url, stack.prefix);
  });
});

describe('a new run on a restarted Redis', () => {
  let redis: RedisServer;
  let api: ApiHandle;
  const prefix = `accept-restart-${randomUUID().slice(0, 8)}`;
  beforeAll(async () => {
    // A Redis of its own: restarting it empties its script cache, which the rest of the suite shares.
    redis = await startRedisServer();
    api = await startApi(parseApiEnv(testEnv({ REDIS_URL: redis.url, TETRALOOP_PREFIX: prefix })));
  });
  afterAll(async () => {
    await api?.close();
    await redis?.stop();
  });

  it('sends the create in full on the new connection, so it still runs once, before the add', async () => {
    // Redis forgot its scripts: an EVALSHA of the create would answer NOSCRIPT and be sent again,
    // behind its root job's add.
    expect((await postRun(api.url, graph('before'))).status).toBe(202);
    const port = Number(new URL(redis.url).port);
    await redis.stop();
    redis = await startRedisServer({ port });
    await vi.waitFor(async () => expect((await fetch(`${api.url}/readyz`)).status).toBe(200), {
      timeout: 15_000,
      interval: 100,
    });
    const create = await expectCreateBeforeAdd(redis.url, api.url, prefix);
    expect(create.args[0]!.toLowerCase()).toBe('eval');
  });
});

/**
 * Posts a run under MONITOR: its create runs once (no NOSCRIPT answer sent again), before its root
 * job's add, both from one connection. Answers the create.
 */
async function expectCreateBeforeAdd(
  redisUrl: string,
  apiUrl: string,
  prefix: string,
): Promise<MonitoredCommand> {
  const createSha = scriptShas().get('create-run-6');
  const { commands, out } = await commandsWhile(redisUrl, () => postRun(apiUrl, graph(1)));
  if (out instanceof Error) throw out;
  expect(out.status).toBe(202);
  const runId = out.body.runId as string;
  // Other suites share the suite's Redis: each command is this run's by its run id.
  const ofRun = commands.filter((c) => c.args.some((a) => a.includes(runId)));
  const creates = ofRun.filter((c) => scriptOf(c) === createSha);
  const add = ofRun.findIndex(
    (c) => scriptOf(c) !== undefined && c.args.includes(`${prefix}:${QUEUE_NAMES.plan}:wait`),
  );
  expect(creates).toHaveLength(1);
  const create = ofRun.indexOf(creates[0]!);
  expect(add).toBeGreaterThan(create);
  expect(ofRun[add]!.source).toBe(ofRun[create]!.source);
  return creates[0]!;
}

/** The SHA-1 of the script a command ran (EVALSHA names it; an EVAL carries its text), if it ran one. */
function scriptOf(c: MonitoredCommand): string | undefined {
  const name = c.args[0]?.toLowerCase();
  if (name === 'evalsha') return c.args[1];
  if (name === 'eval') return createHash('sha1').update(c.args[1]!).digest('hex');
  return undefined;
}
describe('reconciler', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      env: { TETRALOOP_RECONCILE_GRACE_MS: '0', TETRALOOP_RECONCILE_INTERVAL_MS: '200' },
    });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it('enqueues a run that was stored but never got its root job, and it settles', async () => {
    // Stored without its root job, as when the API dies between the create and the enqueue.
    const stored = await stack.api.runs.submit(graph('late'), undefined, { start: false });
    const doc = await waitFor(stack.url, stored.runId);
    expect(doc.status).toBe('succeeded');
    expect(doc.output).toEqual({ a: 'late' });
  });
});

describe('reconciler pass', () => {
  let stack: Stack;
  let redis: RedisClient;
  let queues: RunQueues;
  let plan: Queue;
  let node: Queue;
  let store: RunStore;
  let sessions: SessionStore;
  beforeAll(async () => {
    // No worker pools: jobs stay where the reconciler leaves them.
    stack = await startStack({ pools: [] });
    redis = connectRedis(stack.env.REDIS_URL!, 'client', 'accept-test');
    // A client connection has no offline queue: used before it is ready, a command fails.
    await whenReady(redis);
    const open = (name: string) => new Queue(name, { connection: redis, prefix: stack.prefix });
    store = new RunStore(redis, { prefix: stack.prefix, retentionSeconds: 3600 });
    plan = open(QUEUE_NAMES.plan);
    node = open(QUEUE_NAMES.tool);
    queues = runQueuesOf(
      [{ plan, node, toolQueue: () => node, toolQueues: new Map() }],
      { completedAgeSeconds: 3600, completedCount: 1000, failedAgeSeconds: 3600, nodeCompletedCount: 0 },
      store,
    );
    sessions = new SessionStore(redis, stack.prefix);
  });
  afterAll(async () => {
    await plan?.close();
    await node?.close();
    await redis?.quit();
    await stack?.close();
  });

  const pass = () =>
    reconcileQueuedRuns(
      { store, queues, laneHolder: (sessionKey) => sessions.running(sessionKey) },
      { graceMs: 0, now: Date.now() + 1 },
    );

  it('re-adds a deleted root job, leaves a job that exists and a lane that is not the run’s turn', async () => {
    const { runId } = await stack.api.runs.submit(graph(1));
    expect(await pass()).toMatchObject({ wait: 1, enqueue: 0 });

    await plan.remove(runJobId(runId));
    expect(await plan.getJob(runJobId(runId))).toBeUndefined();
    expect(await pass()).toMatchObject({ enqueue: 1 });
    expect(await plan.getJob(runJobId(runId))).toBeDefined();

    // A session run held back waits for its lane; the reconciler does not start it.
    const held = await stack.api.runs.submit(graph(2), undefined, { sessionKey: 'lane-x', start: false });
    const report = await pass();
    expect(report.enqueue).toBe(0);
    expect(await plan.getJob(runJobId(held.runId))).toBeUndefined();

    // An index entry whose run is gone is dropped.
    await store.delete(held.runId);
    await redis.zadd(`${stack.prefix}:runs:queued`, 1, 'no-such-run');
    expect(await pass()).toMatchObject({ drop: 1 });
    expect(await redis.zscore(`${stack.prefix}:runs:queued`, 'no-such-run')).toBeNull();
  });
});
