/**
 * Each run script, called through RunStore against a real Redis: the arguments it takes, the keys
 * it writes (read back with a plain client), the events it appends, what it answers and the guards
 * its header promises.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, inject, it } from 'vitest';
import type {
  AttemptRecord,
  Budget,
  LiveNodeState,
  NodeSnapshot,
  OnBudget,
  PlanningRecord,
  RunEvent,
  SignalDecision,
  TaskSpec,
} from '@tetraloop/core/domain';
import type { RunError } from '@tetraloop/core/errors';
import type { ExecutableGraph, Graph, ToolNode } from '@tetraloop/core/nodes';
import {
  RunStore,
  queuedRunsKey,
  runDeadlinesKey,
  runKeyList,
  runKeys,
  runSearchKeys,
  type RunKeys,
} from '@tetraloop/core/state';

const prefix = `test-${randomUUID()}`;
const RETENTION = 1000;
const TIMEOUT = 500;
const DEADLINE = 4_000_000_000_000;
const T = '2024-01-01T00:00:00.000Z';

const redis = new Redis(inject('redisUrl'));
const subscriber = new Redis(inject('redisUrl'));
const store = new RunStore(redis, { prefix, retentionSeconds: RETENTION });

afterAll(async () => {
  await subscriber.quit();
  await redis.quit();
});

const tool = (id: string): ToolNode => ({ id, kind: 'tool', tool: 'echo', args: {} });
/** a and b feed c. */
const graph: Graph = {
  nodes: [tool('a'), tool('b'), tool('c')],
  edges: [
    ['a', 'c'],
    ['b', 'c'],
  ],
};
/** A graph without nested graphs executes as it is. */
const planOf = (g: Graph): ExecutableGraph => ({ nodes: g.nodes as ToolNode[], edges: g.edges });
const plan = planOf(graph);
const planning: PlanningRecord = {
  plannerModel: 'planner',
  promptVersion: 'p1',
  toolCatalogVersion: 't1',
  planVersion: 1,
  environmentVersion: 0,
};
const failure: RunError = { code: 'node_failed', message: 'node "b" failed', nodeId: 'b' };

const attempt = (n: number, durationMs = 12.4): AttemptRecord => ({
  attempt: n,
  startedAt: T,
  finishedAt: T,
  durationMs,
  worker: 'w1',
});
const snapshot = (status: NodeSnapshot['status'], output?: unknown): NodeSnapshot => ({
  status,
  ...(output === undefined ? {} : { output }),
  attempts: status === 'succeeded' || status === 'failed' ? [attempt(1)] : [],
  finishedAt: T,
  durationMs: 12,
});
const notRun = (status: 'skipped' | 'cancelled'): NodeSnapshot => ({
  status,
  attempts: [],
  finishedAt: T,
  durationMs: 0,
});

const keysOf = (runId: string): RunKeys => runKeys(prefix, runId);
const allKeys = (runId: string): string[] => runKeyList(keysOf(runId));

async function createRun(
  options: { runId?: string; task?: TaskSpec; input?: unknown; budget?: Budget; onBudget?: OnBudget } = {},
): Promise<string> {
  const runId = options.runId ?? randomUUID();
  await store.create({
    runId,
    ...(options.task ? { task: options.task } : { graph, plan }),
    input: options.input ?? { q: 1 },
    timeoutSeconds: TIMEOUT,
    budget: options.budget ?? { toolCalls: 10 },
    ...(options.onBudget ? { onBudget: options.onBudget } : {}),
    metadata: { m: 1 },
    createdAt: T,
    pending: options.task
      ? new Map()
      : new Map([
          ['a', 0],
          ['b', 0],
          ['c', 2],
        ]),
  });
  return runId;
}

/** A run of `executable` as given, no input or budget, with its nodes' readiness counters. */
async function createGraphRun(
  runId: string,
  executable: ExecutableGraph,
  pending: [string, number][],
): Promise<void> {
  await store.create({
    runId,
    graph: executable,
    plan: executable,
    input: null,
    timeoutSeconds: TIMEOUT,
    budget: {},
    metadata: undefined,
    createdAt: T,
    pending: new Map(pending),
  });
}

/** A fixed-graph run, started: a and b queued. */
async function runningRun(options: { budget?: Budget; onBudget?: OnBudget } = {}): Promise<string> {
  const runId = await createRun(options);
  await store.start(runId, 0, ['a', 'b'], DEADLINE, T);
  return runId;
}

const task = (spec: Partial<TaskSpec> = {}): TaskSpec => ({
  task: 'do it',
  agentId: 'main',
  maxReplans: 1,
  ...spec,
});

/** A task run, planned (a and b feed c) and started. */
async function runningTaskRun(spec: Partial<TaskSpec> = {}): Promise<string> {
  const runId = await createRun({ task: task(spec) });
  await store.setPlan(runId, { graph, plan, pending: new Map([['c', 2]]) }, planning, {});
  await store.start(runId, 0, ['a', 'b'], DEADLINE, T);
  return runId;
}

/** A settled run of generation 0 that failed: a succeeded, b failed (after a retry), c skipped. */
async function settledFailedRun(status: 'failed' | 'timed_out' = 'failed'): Promise<string> {
  const runId = await runningRun();
  const live = { status: 'running' as const, startedAt: T, attempt: 1 };
  const begin = { generation: 0, live, countExecution: true, chargeCall: true, reads: [] };
  await store.beginNode(runId, 'a', begin);
  await store.completeNode(runId, 'a', snapshot('succeeded', { x: 1 }), {
    release: true,
    children: ['c'],
    charge: { toolTimeMs: 7 },
  });
  await store.beginNode(runId, 'b', begin);
  await store.recordAttempt(runId, 'b', attempt(1), { status: 'retrying', attempt: 1 });
  await store.completeNode(runId, 'b', snapshot('failed'), { release: false, children: ['c'], charge: {} });
  await store.decide(runId, status, failure, T);
  await store.settle(
    runId,
    0,
    new Map([['c', notRun('skipped')]]),
    null,
    { status, error: failure, generation: 0 },
    T,
  );
  return runId;
}

/** A run resumed once: its generation is 1. */
async function resumedRun(): Promise<string> {
  const runId = await settledFailedRun();
  await store.resume(runId, ['b', 'c'], new Map([['c', 1]]), TIMEOUT);
  return runId;
}

async function lastSeq(runId: string): Promise<number> {
  return (await store.events(runId, 0)).at(-1)?.seq ?? 0;
}

/** Runs `action` and answers its result with the events it appended. */
async function withEvents<R>(
  runId: string,
  action: () => Promise<R>,
): Promise<{ result: R; events: RunEvent[] }> {
  const seq = await lastSeq(runId);
  const result = await action();
  return { result, events: await store.events(runId, seq) };
}

const brief = (events: RunEvent[]): { type: string; nodeId?: string; data?: unknown }[] =>
  events.map((e) => ({
    type: e.type,
    ...(e.nodeId === undefined ? {} : { nodeId: e.nodeId }),
    ...(e.data === undefined ? {} : { data: e.data }),
  }));

async function ttls(keys: string[]): Promise<number[]> {
  return Promise.all(keys.map((k) => redis.ttl(k)));
}

/** Subscribes to `channel` and answers the first message published on it from now on. */
async function nextMessage(channel: string): Promise<{ message: Promise<string> }> {
  const message = new Promise<string>((resolve) => {
    const onMessage = (from: string, text: string): void => {
      if (from !== channel) return;
      subscriber.off('message', onMessage);
      resolve(text);
    };
    subscriber.on('message', onMessage);
  });
  await subscriber.subscribe(channel);
  return { message };
}

const running = { status: 'running' as const, startedAt: T, attempt: 1 };

describe('create-run', () => {
  it('stores the run queued at generation 0 with its counters and a run.queued event', async () => {
    const runId = await createRun();
    const k = keysOf(runId);
    const meta = await redis.hgetall(k.meta);
    expect(meta).toMatchObject({
      status: 'queued',
      generation: '0',
      createdAt: T,
      agentId: 'main',
      timeoutSeconds: String(TIMEOUT),
    });
    // The seq is the event stream's own (XADD 0-*), not a field of the run's hash.
    expect(meta.seq).toBeUndefined();
    expect(JSON.parse(meta.input!)).toEqual({ q: 1 });
    expect(JSON.parse(meta.plan!)).toEqual(plan);
    expect(JSON.parse(meta.budget!)).toEqual({ toolCalls: 10 });
    // Counters of 0 are left out.
    expect(await redis.hgetall(k.pending)).toEqual({ c: '2' });
    expect(await redis.hgetall(k.live)).toEqual({ _: '{}' });
    expect(await redis.hgetall(k.aux)).toEqual({ createdAt: T });
    const events = await store.events(runId, 0);
    expect(events).toEqual([
      { seq: 1, type: 'run.queued', family: 'lifecycle', phase: 'start', ts: expect.any(Number), runId },
    ]);
  });

  it('stores a task run with its task fields and no plan', async () => {
    const runId = await createRun({ task: task({ mode: 'loop', overrides: 'be brief', maxReplans: 2 }) });
    const meta = await redis.hgetall(keysOf(runId).meta);
    expect(meta).toMatchObject({ task: 'do it', mode: 'loop', overrides: 'be brief', maxReplans: '2' });
    expect(meta.plan).toBeUndefined();
    expect(await store.plan(runId)).toBeNull();
  });

  it('leaves an existing run untouched', async () => {
    const runId = await createRun();
    await createRun({ runId, input: { q: 2 } });
    expect(JSON.parse((await redis.hget(keysOf(runId).meta, 'input'))!)).toEqual({ q: 1 });
    expect(await store.events(runId, 0)).toHaveLength(1);
  });

  it('gives the keys it creates the safety TTL (retention plus timeout)', async () => {
    const runId = await createRun();
    const k = keysOf(runId);
    for (const ttl of await ttls([k.meta, k.pending, k.live, k.events, k.aux])) {
      expect(ttl).toBeGreaterThan(RETENTION);
      expect(ttl).toBeLessThanOrEqual(RETENTION + TIMEOUT);
    }
  });
});

describe('start-run', () => {
  it('moves a queued run to running, sets its deadline and queues the ready nodes', async () => {
    const runId = await createRun();
    expect(await redis.zscore(queuedRunsKey(prefix), runId)).not.toBeNull();
    const { result, events } = await withEvents(runId, () => store.start(runId, 0, ['a', 'b'], DEADLINE, T));
    expect(result).toEqual({ status: 'running', deadlineAt: DEADLINE, carryWidth: 0 });
    // Off the index of queued runs the reconciler reads, in the same step.
    expect(await redis.zscore(queuedRunsKey(prefix), runId)).toBeNull();
    // Among the run deadlines the plan pool sweeps, at its deadline.
    expect(await redis.zscore(runDeadlinesKey(prefix), runId)).toBe(String(DEADLINE));
    const meta = await redis.hgetall(keysOf(runId).meta);
    expect(meta).toMatchObject({ status: 'running', deadlineAt: String(DEADLINE), startedAt: T });
    expect(await redis.hgetall(keysOf(runId).live)).toEqual({
      _: '{}',
      a: '{"status":"queued"}',
      b: '{"status":"queued"}',
    });
    expect(brief(events)).toEqual([
      { type: 'run.started', data: { generation: 0 } },
      { type: 'node.queued', nodeId: 'a' },
      { type: 'node.queued', nodeId: 'b' },
    ]);
  });

  it('leaves a run that is no longer queued as it is', async () => {
    const runId = await runningRun();
    const { result, events } = await withEvents(runId, () =>
      store.start(runId, 0, ['c'], DEADLINE + 1, 'later'),
    );
    // It answers the deadline the run was given, not the one proposed.
    expect(result).toEqual({ status: 'running', deadlineAt: DEADLINE, carryWidth: 0 });
    expect(await redis.hmget(keysOf(runId).meta, 'deadlineAt', 'startedAt')).toEqual([String(DEADLINE), T]);
    expect(await redis.hexists(keysOf(runId).live, 'c')).toBe(0);
    expect(events).toEqual([]);
    // A redelivered start pass puts a running run among the deadlines again (on a cluster the
    // first one's write, made after its script, may have been cut off).
    await redis.zrem(runDeadlinesKey(prefix), runId);
    await store.start(runId, 0, ['c'], DEADLINE + 1, 'later');
    expect(await redis.zscore(runDeadlinesKey(prefix), runId)).toBe(String(DEADLINE));
  });

  it('keeps the carrier width the run started with, for a redelivered start pass', async () => {
    const runId = await createRun();
    expect(await store.start(runId, 0, ['a', 'b'], DEADLINE, T, 8)).toMatchObject({ carryWidth: 8 });
    expect(await redis.hget(keysOf(runId).meta, 'carryWidth')).toBe('8');
    // Another process, with other settings, takes the start pass again: it gets the run's.
    expect(await store.start(runId, 0, ['a', 'b'], DEADLINE, T, 3)).toMatchObject({ carryWidth: 8 });
    expect(await store.start(runId, 0, ['a', 'b'], DEADLINE, T, 0)).toMatchObject({ carryWidth: 8 });
    // A run started without carriers stays without.
    const plain = await createRun();
    await store.start(plain, 0, ['a', 'b'], DEADLINE, T);
    expect(await store.start(plain, 0, ['a', 'b'], DEADLINE, T, 8)).toMatchObject({ carryWidth: 0 });
  });

  it('answers stale for the root job of an older generation', async () => {
    const runId = await resumedRun();
    // Queued again, as the reconciler would find it.
    await redis.zadd(queuedRunsKey(prefix), 1, runId);
    const { result, events } = await withEvents(runId, () => store.start(runId, 0, ['b'], DEADLINE, T));
    expect(result.status).toBe('stale');
    expect(await store.status(runId)).toBe('queued');
    expect(events).toEqual([]);
    // The run is still queued: it stays on the index.
    expect(await redis.zscore(queuedRunsKey(prefix), runId)).not.toBeNull();
  });

  it('answers null for an unknown run and creates nothing, taking it off the index of queued runs', async () => {
    const runId = randomUUID();
    await redis.zadd(queuedRunsKey(prefix), 1, runId);
    expect((await store.start(runId, 0, ['a'], DEADLINE, T)).status).toBeNull();
    expect(await redis.exists(...allKeys(runId))).toBe(0);
    expect(await redis.zscore(queuedRunsKey(prefix), runId)).toBeNull();
  });

  it('gives a resumed run a fresh deadline', async () => {
    const runId = await resumedRun();
    const { result, events } = await withEvents(runId, () =>
      store.start(runId, 1, ['b'], DEADLINE + 5, 'later'),
    );
    expect(result).toEqual({ status: 'running', deadlineAt: DEADLINE + 5, carryWidth: 0 });
    // startedAt is the first start's.
    expect(await redis.hget(keysOf(runId).meta, 'startedAt')).toBe(T);
    expect(brief(events)[0]).toEqual({ type: 'run.started', data: { generation: 1 } });
  });

  it('keeps the deadline of a replanned run', async () => {
    const runId = await replannedRun();
    const result = await store.start(runId, 1, ['e'], DEADLINE + 5, 'later');
    expect(result).toEqual({ status: 'running', deadlineAt: DEADLINE, carryWidth: 0 });
  });

  it('keeps every key of the run until its deadline plus the retention, and settling gives the retention back', async () => {
    // A run that may wait three weeks, whose safety TTL from its creation (retention plus 500 s)
    // would end long before its deadline.
    const runId = await createRun();
    const deadline = Date.now() + 21 * 86_400_000;
    await store.start(runId, 0, ['a', 'b'], deadline, T);
    const k = keysOf(runId);
    const exist = [k.meta, k.pending, k.live, k.events, k.aux];
    for (const key of exist) {
      const left = await redis.pexpiretime(key);
      expect(left, key).toBeGreaterThanOrEqual(deadline + RETENTION * 1000 - 1000);
      expect(left, key).toBeLessThanOrEqual(deadline + RETENTION * 1000);
    }
    // A key made later (the first snapshot) takes the run's.
    await store.completeNode(runId, 'a', snapshot('succeeded', 1), {
      release: true,
      children: ['c'],
      charge: {},
    });
    expect(await redis.pttl(k.nodes)).toBeGreaterThan(deadline - Date.now());
    await store.decide(runId, 'succeeded', null, T);
    await store.settle(runId, 0, new Map(), null, { status: 'succeeded', error: null, generation: 0 }, T);
    for (const ttl of await ttls(allKeys(runId).filter((key) => key !== k.live))) {
      expect(ttl).toBeGreaterThan(RETENTION - 5);
      expect(ttl).toBeLessThanOrEqual(RETENTION);
    }
  });
});

describe('begin-node', () => {
  it('counts the execution, charges a tool call, marks the node running and reads snapshots', async () => {
    const runId = await runningRun();
    await store.completeNode(runId, 'a', snapshot('succeeded', { x: 1 }), {
      release: true,
      children: ['c'],
      charge: { toolTimeMs: 7, promptTokens: 3, completionTokens: 4, costNanoUsd: 1_234_567 },
    });
    const options = {
      generation: 0,
      live: running,
      countExecution: true,
      chargeCall: true,
      reads: ['a', 'b'],
    };
    const { result, events } = await withEvents(runId, () => store.beginNode(runId, 'c', options));
    expect(result).toEqual({
      status: 'running',
      existing: null,
      executions: 1,
      toolCalls: 1,
      toolTimeMs: 7,
      attempts: [],
      progress: [],
      deadlineAt: DEADLINE,
      budget: { toolCalls: 10 },
      tokens: 7,
      costNanoUsd: 1_234_567,
      reads: new Map([['a', snapshot('succeeded', { x: 1 })]]),
    });
    expect(JSON.parse((await redis.hget(keysOf(runId).live, 'c'))!)).toEqual(running);
    expect(await redis.hmget(keysOf(runId).aux, 'execs:c', 'usage:toolCalls')).toEqual(['1', '1']);
    expect(brief(events)).toEqual([
      { type: 'node.started', nodeId: 'c', data: running },
      { type: 'tool.start', nodeId: 'c' },
    ]);
    const again = await store.beginNode(runId, 'c', options);
    expect([again.executions, again.toolCalls]).toEqual([2, 2]);
  });

  it('without counting or charging only marks the node running', async () => {
    const runId = await runningRun();
    const options = { generation: 0, live: running, countExecution: false, chargeCall: false, reads: [] };
    const { result, events } = await withEvents(runId, () => store.beginNode(runId, 'a', options));
    expect([result.executions, result.toolCalls]).toEqual([0, 0]);
    expect(JSON.parse((await redis.hget(keysOf(runId).live, 'a'))!)).toEqual(running);
    expect(events).toEqual([]);
  });

  it('returns the snapshot of a node that has one and counts nothing', async () => {
    const runId = await runningRun();
    await store.completeNode(runId, 'a', snapshot('succeeded', 1), {
      release: false,
      children: [],
      charge: {},
    });
    const options = { generation: 0, live: running, countExecution: true, chargeCall: true, reads: [] };
    const { result, events } = await withEvents(runId, () => store.beginNode(runId, 'a', options));
    expect(result.existing).toEqual(snapshot('succeeded', 1));
    expect([result.executions, result.toolCalls]).toEqual([0, 0]);
    expect(await redis.hexists(keysOf(runId).live, 'a')).toBe(0);
    expect(events).toEqual([]);
  });

  it('counts nothing and marks nothing on a run that is not running', async () => {
    const runId = await createRun();
    const options = { generation: 0, live: running, countExecution: true, chargeCall: true, reads: [] };
    const { result, events } = await withEvents(runId, () => store.beginNode(runId, 'a', options));
    expect(result.status).toBe('queued');
    expect([result.executions, result.toolCalls]).toEqual([0, 0]);
    expect(await redis.hexists(keysOf(runId).live, 'a')).toBe(0);
    expect(events).toEqual([]);
  });

  it('answers stale for a job of an older generation and touches nothing', async () => {
    const runId = await resumedRun();
    await store.start(runId, 1, ['b'], DEADLINE, T);
    const options = { generation: 0, live: running, countExecution: true, chargeCall: true, reads: [] };
    const { result, events } = await withEvents(runId, () => store.beginNode(runId, 'b', options));
    expect(result.status).toBe('stale');
    expect(result.existing).toBeNull();
    expect(await redis.hget(keysOf(runId).live, 'b')).toBe('{"status":"queued"}');
    expect(await redis.hexists(keysOf(runId).aux, 'execs:b')).toBe(0);
    expect(events).toEqual([]);
  });
});

describe('record-attempt', () => {
  it('appends the attempt, charges its time, marks the node retrying and emits node.retrying', async () => {
    const runId = await runningRun();
    const retrying = { status: 'retrying' as const, attempt: 1, until: T };
    const { events } = await withEvents(runId, async () => {
      await store.recordAttempt(runId, 'a', attempt(1, 12.4), retrying);
      await store.recordAttempt(runId, 'a', attempt(2, 30), { ...retrying, attempt: 2 });
    });
    const k = keysOf(runId);
    expect(JSON.parse((await redis.hget(k.aux, 'attempts:a'))!)).toEqual([attempt(1, 12.4), attempt(2, 30)]);
    expect(await redis.hget(k.aux, 'usage:toolTimeMs')).toBe('42');
    expect(JSON.parse((await redis.hget(k.live, 'a'))!)).toEqual({ ...retrying, attempt: 2 });
    expect(brief(events)).toEqual([
      { type: 'node.retrying', nodeId: 'a', data: attempt(1, 12.4) },
      { type: 'node.retrying', nodeId: 'a', data: attempt(2, 30) },
    ]);
    const begin = await store.beginNode(runId, 'a', {
      generation: 0,
      live: running,
      countExecution: false,
      chargeCall: false,
      reads: [],
    });
    expect(begin.attempts).toEqual([attempt(1, 12.4), attempt(2, 30)]);
    expect(begin.toolTimeMs).toBe(42);
  });
});

describe('throttle-node', () => {
  const throttled = { status: 'throttled' as const, key: 'hosts=api.test', until: T, attempt: 1 };
  const event = { key: 'hosts=api.test', waitMs: 500 };

  it('marks a node throttled with its node.throttled event, and adds the time each call waited', async () => {
    const runId = await runningRun();
    const k = keysOf(runId);
    const { events } = await withEvents(runId, async () => {
      await store.recordThrottle(runId, 'a', { live: throttled, event });
      // A later ask of the same call: the event only, the live state left as it is.
      await store.recordThrottle(runId, 'a', { event: { ...event, waitMs: null } });
    });
    expect(JSON.parse((await redis.hget(k.live, 'a'))!)).toEqual(throttled);
    expect(brief(events)).toEqual([
      { type: 'node.throttled', nodeId: 'a', data: event },
      { type: 'node.throttled', nodeId: 'a', data: { ...event, waitMs: null } },
    ]);
    // Let go after waiting, twice (a redelivered call waits again): the times add up, no event.
    const after = await withEvents(runId, async () => {
      await store.recordThrottle(runId, 'a', { live: running, waitedMs: 120.4 });
      await store.recordThrottle(runId, 'a', { waitedMs: 80 });
    });
    expect(after.events).toEqual([]);
    expect(JSON.parse((await redis.hget(k.live, 'a'))!)).toEqual(running);
    expect(await redis.hget(k.aux, 'throttled:a')).toBe('200');
    expect((await store.document(runId))?.nodes.a).toMatchObject({ status: 'running', throttledMs: 200 });
  });

  it('records nothing for a node that has its snapshot, or on a run that is not running', async () => {
    const runId = await runningRun();
    await store.completeNode(runId, 'a', snapshot('succeeded'), { release: false, children: [], charge: {} });
    // Queued, and decided but not settled yet: no node of either has a snapshot.
    const queued = await createRun();
    const decided = await runningRun();
    await store.decide(decided, 'failed', failure, T);
    for (const [id, node] of [
      [runId, 'a'],
      [queued, 'a'],
      [decided, 'b'],
    ] as const) {
      const k = keysOf(id);
      const live = await redis.hget(k.live, node);
      const { events } = await withEvents(id, () =>
        store.recordThrottle(id, node, { live: throttled, event, waitedMs: 50 }),
      );
      expect(events).toEqual([]);
      expect(await redis.hget(k.live, node)).toBe(live);
      expect(await redis.hexists(k.aux, `throttled:${node}`)).toBe(0);
    }
  });
});

describe('record-iteration', () => {
  const charge = { toolCalls: 2, toolTimeMs: 5, promptTokens: 1, completionTokens: 2, costNanoUsd: 40 };
  const live = (iterations: number): { status: 'running'; iterations: number } => ({
    status: 'running',
    iterations,
  });

  it('records iteration n once, charges it and emits node.iteration', async () => {
    const runId = await runningRun();
    const { result, events } = await withEvents(runId, () =>
      store.recordIteration(runId, 'a', 1, { i: 1 }, charge, live(1)),
    );
    expect(result).toEqual({ iterations: 1, toolCalls: 2, toolTimeMs: 5, tokens: 3, costNanoUsd: 40 });
    expect(brief(events)).toEqual([{ type: 'node.iteration', nodeId: 'a', data: { i: 1 } }]);
    const repeated = await withEvents(runId, () =>
      store.recordIteration(runId, 'a', 1, { i: 9 }, charge, live(9)),
    );
    expect(repeated.result).toEqual({
      iterations: 1,
      toolCalls: 2,
      toolTimeMs: 5,
      tokens: 3,
      costNanoUsd: 40,
    });
    expect(repeated.events).toEqual([]);
    await store.recordIteration(runId, 'a', 2, { i: 2 }, charge, live(2));
    const k = keysOf(runId);
    expect(JSON.parse((await redis.hget(k.aux, 'progress:a'))!)).toEqual([{ i: 1 }, { i: 2 }]);
    expect(await redis.hget(k.aux, 'iterations:a')).toBe('2');
    expect(JSON.parse((await redis.hget(k.live, 'a'))!)).toEqual(live(2));
  });

  it('skips an iteration whose predecessor is not recorded', async () => {
    const runId = await runningRun();
    await store.recordIteration(runId, 'a', 1, { i: 1 }, charge, live(1));
    const { result, events } = await withEvents(runId, () =>
      store.recordIteration(runId, 'a', 3, { i: 3 }, charge, live(3)),
    );
    expect(result.iterations).toBe(1);
    expect(events).toEqual([]);
    const begin = await store.beginNode(runId, 'a', {
      generation: 0,
      live: running,
      countExecution: false,
      chargeCall: false,
      reads: [],
    });
    expect(begin.progress).toEqual([{ i: 1 }]);
  });
});

describe('complete-node', () => {
  it('writes the snapshot, drops the live state, charges usage and emits the node event', async () => {
    const runId = await runningRun();
    const { result, events } = await withEvents(runId, () =>
      store.completeNode(runId, 'a', snapshot('succeeded', { x: 1 }), {
        release: true,
        children: ['c'],
        charge: { toolTimeMs: 7.6, promptTokens: 3 },
      }),
    );
    expect(result).toEqual({
      written: true,
      decided: false,
      status: 'running',
      generation: 0,
      ready: [],
      handedOff: [],
    });
    const k = keysOf(runId);
    expect(JSON.parse((await redis.hget(k.nodes, 'a'))!)).toEqual(snapshot('succeeded', { x: 1 }));
    expect(await redis.hexists(k.live, 'a')).toBe(0);
    expect(await redis.hmget(k.aux, 'usage:toolTimeMs', 'usage:promptTokens')).toEqual(['8', '3']);
    expect(await redis.hget(k.pending, 'c')).toBe('1');
    expect(brief(events)).toEqual([
      {
        type: 'node.succeeded',
        nodeId: 'a',
        data: { status: 'succeeded', attempts: 1, durationMs: 12, worker: 'w1' },
      },
    ]);
  });

  describe('the last node of the plan to succeed decides the run', () => {
    const options = { release: true, children: ['c'], charge: {}, planned: { nodes: 3, generation: 0 } };
    const last = { release: true, children: [], charge: {}, planned: { nodes: 3, generation: 0 } };

    it('decides it succeeded when its snapshot is the last and every one succeeded, after its own event', async () => {
      const runId = await runningRun();
      expect((await store.completeNode(runId, 'a', snapshot('succeeded'), options)).decided).toBe(false);
      expect((await store.completeNode(runId, 'b', snapshot('succeeded'), options)).decided).toBe(false);
      expect(await store.status(runId)).toBe('running');
      const { result, events } = await withEvents(runId, () =>
        store.completeNode(runId, 'c', snapshot('succeeded', 'out'), last),
      );
      expect(result).toMatchObject({ written: true, decided: true, status: 'succeeded', ready: [] });
      expect(brief(events).map((e) => [e.type, e.nodeId])).toEqual([
        ['node.succeeded', 'c'],
        ['run.decided', undefined],
      ]);
      expect(await store.status(runId)).toBe('succeeded');
      // Decided, not settled: the caller settles it (or the root job's finalize pass does).
      expect(await store.settledState(runId)).toBe(false);
      // A redelivery of the last node decides nothing again.
      const again = await store.completeNode(runId, 'c', snapshot('succeeded', 'out'), last);
      expect(again).toMatchObject({ written: false, decided: false, status: 'succeeded' });
    });

    it('leaves a run with a failed node, or a node without a snapshot, to the root job', async () => {
      const failed = await runningRun();
      await store.completeNode(failed, 'a', snapshot('failed'), { ...options, release: false });
      await store.completeNode(failed, 'b', snapshot('succeeded'), options);
      await store.completeNode(failed, 'c', snapshot('succeeded'), last);
      expect(await store.status(failed)).toBe('running');
      // A snapshot of a node of no plan now (a stale job's) counts, but c has none: nothing decided.
      const stray = await runningRun();
      await store.completeNode(stray, 'x', snapshot('succeeded'), { ...options, children: [] });
      await store.completeNode(stray, 'a', snapshot('succeeded'), options);
      expect((await store.completeNode(stray, 'b', snapshot('succeeded'), options)).decided).toBe(false);
      expect(await store.status(stray)).toBe('running');
      // a and b succeeded, c has no snapshot yet.
      const third = await runningRun();
      await store.completeNode(third, 'a', snapshot('succeeded'), options);
      expect((await store.completeNode(third, 'b', snapshot('succeeded'), options)).decided).toBe(false);
      expect(await store.status(third)).toBe('running');
    });

    it('decides nothing while a replan is asked for, in window mode, for another generation or a decided run', async () => {
      const replanning = await runningTaskRun();
      await store.completeNode(replanning, 'a', snapshot('succeeded'), options);
      await store.completeNode(replanning, 'b', snapshot('succeeded'), options);
      expect(await store.requestReplan(replanning, failure, 0)).toBe(true);
      expect((await store.completeNode(replanning, 'c', snapshot('succeeded'), last)).decided).toBe(false);
      expect(await store.status(replanning)).toBe('running');

      const windowed = await runningTaskRun({ mode: 'window', window: { size: 3, maxWindows: 2 } });
      await store.completeNode(windowed, 'a', snapshot('succeeded'), options);
      await store.completeNode(windowed, 'b', snapshot('succeeded'), options);
      expect((await store.completeNode(windowed, 'c', snapshot('succeeded'), last)).decided).toBe(false);
      expect(await store.status(windowed)).toBe('running');

      // A job of another generation knows another plan: it decides nothing.
      const older = await runningRun();
      await store.completeNode(older, 'a', snapshot('succeeded'), options);
      await store.completeNode(older, 'b', snapshot('succeeded'), options);
      const stale = { ...last, planned: { nodes: 3, generation: 1 } };
      expect((await store.completeNode(older, 'c', snapshot('succeeded'), stale)).decided).toBe(false);
      expect(await store.status(older)).toBe('running');

      const cancelled = await runningRun();
      await store.completeNode(cancelled, 'a', snapshot('succeeded'), options);
      await store.completeNode(cancelled, 'b', snapshot('succeeded'), options);
      await store.decideError(cancelled, { code: 'cancelled', message: 'stop' }, T);
      expect((await store.completeNode(cancelled, 'c', snapshot('succeeded'), last)).decided).toBe(false);
      expect(await store.status(cancelled)).toBe('cancelled');
    });
  });

  it('releases a dependent when its last dependency completes and queues it', async () => {
    const runId = await runningRun();
    const options = { release: true, children: ['c'], charge: {} };
    await store.completeNode(runId, 'a', snapshot('succeeded'), options);
    const { result, events } = await withEvents(runId, () =>
      store.completeNode(runId, 'b', snapshot('succeeded'), options),
    );
    expect(result.ready).toEqual(['c']);
    expect(await redis.hget(keysOf(runId).pending, 'c')).toBe('0');
    // Marked queued with the node that released it.
    expect(JSON.parse((await redis.hget(keysOf(runId).live, 'c'))!)).toEqual({ status: 'queued', by: 'b' });
    expect(brief(events).map((e) => [e.type, e.nodeId])).toEqual([
      ['node.succeeded', 'b'],
      ['node.queued', 'c'],
    ]);
  });

  it('is written once: a redelivery neither overwrites nor counts again, but still answers ready dependents', async () => {
    const runId = await runningRun();
    const options = { release: true, children: ['c'], charge: { toolTimeMs: 5 } };
    await store.completeNode(runId, 'a', snapshot('succeeded'), options);
    await store.completeNode(runId, 'b', snapshot('succeeded', 'first'), options);
    const { result, events } = await withEvents(runId, () =>
      store.completeNode(runId, 'b', snapshot('failed'), options),
    );
    expect(result).toEqual({
      written: false,
      decided: false,
      status: 'running',
      generation: 0,
      ready: ['c'],
      handedOff: [],
    });
    const k = keysOf(runId);
    expect(JSON.parse((await redis.hget(k.nodes, 'b'))!)).toEqual(snapshot('succeeded', 'first'));
    expect(await redis.hget(k.pending, 'c')).toBe('0');
    expect(await redis.hget(k.aux, 'usage:toolTimeMs')).toBe('10');
    expect(events).toEqual([]);
  });

  it('on a redelivery answers only the dependents this node released and no other job runs handed off', async () => {
    const runId = await runningRun();
    const options = { release: true, children: ['c'], charge: {} };
    const redeliver = async (id: string, job: string): Promise<readonly string[]> =>
      (await store.completeNode(runId, id, snapshot('succeeded'), { ...options, jobs: [job] })).ready;
    await store.completeNode(runId, 'a', snapshot('succeeded'), { ...options, jobs: ['run.a.0'] });
    await store.completeNode(runId, 'b', snapshot('succeeded'), { ...options, jobs: ['run.b.0'] });
    // b released c: a's redelivery leaves it to b's job.
    expect(await redeliver('a', 'run.a.0')).toEqual([]);
    expect(await redeliver('b', 'run.b.0')).toEqual(['c']);
    const begin = (live: LiveNodeState) =>
      store.beginNode(runId, 'c', { generation: 0, live, countExecution: true, chargeCall: true, reads: [] });
    // c runs handed off in b's job: only that job's redelivery (it crashed) answers it again.
    await begin({ status: 'running', startedAt: T, attempt: 1, carriedBy: 'run.b.0' });
    expect(await redeliver('b', 'run.b.0')).toEqual(['c']);
    expect(await redeliver('a', 'run.a.0')).toEqual([]);
    // c in a job of its own: answered (adding that job again is a no-op).
    await begin({ status: 'running', startedAt: T, attempt: 1 });
    expect(await redeliver('a', 'run.a.0')).toEqual(['c']);
    // a and b ran side by side in one job, which b's completion handed c off in (`by`); a moved to
    // a job of its own, which names that job as its carrier: a's redelivery leaves c to it.
    await begin({ status: 'running', startedAt: T, attempt: 1, carriedBy: 'run.x', by: 'b' });
    expect(await redeliver('a', 'run.x')).toEqual([]);
    expect(await redeliver('b', 'run.x')).toEqual(['c']);
    // c's attempt failed there: until its retry's own job begins it, it still names b, so a's
    // redelivery still leaves it to that job.
    const retrying: LiveNodeState = { status: 'retrying', attempt: 1, until: T, carriedBy: 'run.x' };
    await store.recordAttempt(runId, 'c', attempt(1), retrying);
    expect(JSON.parse((await redis.hget(keysOf(runId).live, 'c'))!)).toEqual({ ...retrying, by: 'b' });
    expect(await redeliver('a', 'run.x')).toEqual([]);
    expect(await redeliver('b', 'run.x')).toEqual(['c']);
    // Its attempt failed in another job than the one the state names: that job's releaser is
    // not kept. Nor when it failed in a job of its own (no carrier).
    await begin({ status: 'running', startedAt: T, attempt: 1, carriedBy: 'run.x', by: 'b' });
    await store.recordAttempt(runId, 'c', attempt(1), { ...retrying, carriedBy: 'run.y' });
    expect(JSON.parse((await redis.hget(keysOf(runId).live, 'c'))!)).toEqual({
      ...retrying,
      carriedBy: 'run.y',
    });
    await store.recordAttempt(runId, 'c', attempt(2), { status: 'retrying', attempt: 2, until: T });
    expect(JSON.parse((await redis.hget(keysOf(runId).live, 'c'))!)).toEqual({
      status: 'retrying',
      attempt: 2,
      until: T,
    });
  });

  it('begins the first released handoff candidate in the same step, as begin-node would', async () => {
    const runId = await runningRun();
    const options = { release: true, children: ['c'], charge: {} };
    await store.completeNode(runId, 'a', snapshot('succeeded', 'from a'), options);
    const live: LiveNodeState = { status: 'running', startedAt: T, attempt: 1, carriedBy: 'run.b' };
    const handoff = {
      generation: 0,
      live,
      width: 1,
      // `x` is not released here; `c` is, and is begun with its reads.
      candidates: [
        { id: 'x', chargeCall: true, reads: [] },
        { id: 'c', chargeCall: true, reads: ['a', 'b'] },
      ],
    };
    const { result, events } = await withEvents(runId, () =>
      store.completeNode(runId, 'b', snapshot('succeeded', 'from b'), {
        ...options,
        jobs: ['run.b'],
        handoff,
      }),
    );
    expect(result.ready).toEqual(['c']);
    expect(result.handedOff.map((h) => h.nodeId)).toEqual(['c']);
    expect(result.handedOff[0]!.begin).toMatchObject({
      status: 'running',
      existing: null,
      executions: 1,
      toolCalls: 1,
    });
    expect([...result.handedOff[0]!.begin.reads.keys()]).toEqual(['a', 'b']);
    // It starts at the step's instant, which is also its node.queued's time.
    const startedAt = result.handedOff[0]!.startedAt;
    expect(new Date(startedAt).toISOString()).toBe(startedAt);
    expect(Date.parse(startedAt)).toBe(events.find((e) => e.type === 'node.queued')!.ts);
    expect(JSON.parse((await redis.hget(keysOf(runId).live, 'c'))!)).toEqual({ ...live, startedAt, by: 'b' });
    expect(brief(events).map((e) => [e.type, e.nodeId])).toEqual([
      ['node.succeeded', 'b'],
      ['node.queued', 'c'],
      ['node.started', 'c'],
      ['tool.start', 'c'],
    ]);
    // A redelivery begins nothing again.
    const again = await store.completeNode(runId, 'b', snapshot('succeeded', 'from b'), {
      ...options,
      jobs: ['run.b'],
      handoff,
    });
    expect(again.handedOff).toEqual([]);
    expect(await redis.hget(keysOf(runId).aux, 'execs:c')).toBe('1');
  });

  it('begins up to `width` released candidates in the order given; the others stay queued', async () => {
    const runId = randomUUID();
    const fan: ExecutableGraph = {
      nodes: [tool('a'), tool('c'), tool('d'), tool('e')] as ToolNode[],
      edges: [
        ['a', 'c'],
        ['a', 'd'],
        ['a', 'e'],
      ],
    };
    await createGraphRun(runId, fan, [
      ['a', 0],
      ['c', 1],
      ['d', 1],
      ['e', 1],
    ]);
    await store.start(runId, 0, ['a'], DEADLINE, T);
    const live: LiveNodeState = { status: 'running', startedAt: T, attempt: 1, carriedBy: 'run.a' };
    const candidate = (id: string) => ({ id, chargeCall: true, reads: [] });
    const { result, events } = await withEvents(runId, () =>
      store.completeNode(runId, 'a', snapshot('succeeded'), {
        release: true,
        children: ['c', 'd', 'e'],
        charge: {},
        jobs: ['run.a'],
        handoff: { generation: 0, live, width: 2, candidates: ['e', 'c', 'd'].map(candidate) },
      }),
    );
    expect(result.ready).toEqual(['c', 'd', 'e']);
    expect(result.handedOff.map((h) => h.nodeId)).toEqual(['e', 'c']);
    for (const handed of result.handedOff) {
      expect(handed.begin).toMatchObject({ status: 'running', existing: null, executions: 1 });
      expect(handed.startedAt).toBe(result.handedOff[0]!.startedAt);
    }
    const lives = await redis.hmget(keysOf(runId).live, 'c', 'd', 'e');
    expect(lives.map((l) => JSON.parse(l!) as LiveNodeState)).toEqual([
      { ...live, startedAt: result.handedOff[0]!.startedAt, by: 'a' },
      { status: 'queued', by: 'a' },
      { ...live, startedAt: result.handedOff[0]!.startedAt, by: 'a' },
    ]);
    expect(
      brief(events)
        .filter((e) => e.type === 'node.started')
        .map((e) => e.nodeId),
    ).toEqual(['e', 'c']);
    // The job's redelivery answers all three again: two carried by it, one released by its node.
    const again = await store.completeNode(runId, 'a', snapshot('succeeded'), {
      release: true,
      children: ['c', 'd', 'e'],
      charge: {},
      jobs: ['run.a'],
    });
    expect(again.ready).toEqual(['c', 'd', 'e']);
    expect(again.handedOff).toEqual([]);
  });

  it('of a tool node also emits tool.result', async () => {
    const runId = await runningRun();
    const { events } = await withEvents(runId, () =>
      store.completeNode(runId, 'a', snapshot('succeeded'), {
        release: false,
        children: [],
        charge: {},
        tool: 'echo',
      }),
    );
    const data = { tool: 'echo', status: 'succeeded', attempts: 1, durationMs: 12, worker: 'w1' };
    expect(brief(events)).toEqual([
      { type: 'node.succeeded', nodeId: 'a', data },
      { type: 'tool.result', nodeId: 'a', data },
    ]);
  });

  it('without release leaves the dependents waiting', async () => {
    const runId = await runningRun();
    const result = await store.completeNode(runId, 'a', snapshot('failed'), {
      release: false,
      children: ['c'],
      charge: {},
    });
    expect(result.ready).toEqual([]);
    expect(await redis.hget(keysOf(runId).pending, 'c')).toBe('2');
  });

  it('releases nothing while a replan is requested', async () => {
    const runId = await runningTaskRun();
    expect(await store.requestReplan(runId, failure, 0)).toBe(true);
    const options = { release: true, children: ['c'], charge: {} };
    await store.completeNode(runId, 'a', snapshot('succeeded'), options);
    const result = await store.completeNode(runId, 'b', snapshot('succeeded'), options);
    expect(result).toMatchObject({ written: true, ready: [] });
    expect(await redis.hget(keysOf(runId).pending, 'c')).toBe('2');
  });

  it('on a run that is no longer running answers ready dependents without queueing them', async () => {
    const runId = await runningRun();
    await store.decide(runId, 'cancelled', null, T);
    const options = { release: true, children: ['c'], charge: {} };
    await store.completeNode(runId, 'a', snapshot('succeeded'), options);
    const { result, events } = await withEvents(runId, () =>
      store.completeNode(runId, 'b', snapshot('succeeded'), options),
    );
    expect(result).toMatchObject({ status: 'cancelled', ready: ['c'] });
    expect(await redis.hexists(keysOf(runId).live, 'c')).toBe(0);
    expect(events.map((e) => e.type)).toEqual(['node.succeeded']);
  });
});

describe('decide-run', () => {
  it('lets the first decision win', async () => {
    const runId = await runningRun();
    const first = await withEvents(runId, () => store.decideOutcome(runId, 'failed', failure, T));
    expect(first.result).toEqual({ decided: true, status: 'failed' });
    expect(brief(first.events)).toEqual([{ type: 'run.decided', data: { status: 'failed' } }]);
    const meta = await redis.hgetall(keysOf(runId).meta);
    expect(meta).toMatchObject({ status: 'failed', decidedAt: T });
    expect(JSON.parse(meta.error!)).toEqual(failure);

    const second = await withEvents(runId, () => store.decideOutcome(runId, 'succeeded', null, 'later'));
    expect(second.result).toEqual({ decided: false, status: 'failed' });
    expect(await redis.hmget(keysOf(runId).meta, 'status', 'decidedAt')).toEqual(['failed', T]);
    expect(second.events).toEqual([]);
  });

  it('decides a queued run too, keeping the error out when none is given', async () => {
    const runId = await createRun();
    expect(await store.decide(runId, 'cancelled', null, T)).toBe(true);
    expect(await redis.hmget(keysOf(runId).meta, 'status', 'error')).toEqual(['cancelled', null]);
  });

  it('publishes the run id on the abort channel for an outcome other than succeeded', async () => {
    const runId = await runningRun();
    const { message } = await nextMessage(store.channels.abort);
    await store.decide(runId, 'cancelled', null, T);
    expect(await message).toBe(runId);
    await subscriber.unsubscribe(store.channels.abort);
  });

  it('publishes nothing on the abort channel for succeeded', async () => {
    const succeeded = await runningRun();
    const failed = await runningRun();
    const { message } = await nextMessage(store.channels.abort);
    await store.decide(succeeded, 'succeeded', null, T);
    await store.decide(failed, 'failed', failure, T);
    // Published in order on one connection: had the first decision published, it would come first.
    expect(await message).toBe(failed);
    await subscriber.unsubscribe(store.channels.abort);
  });

  it('refuses a decision for another generation', async () => {
    const runId = await resumedRun();
    await store.start(runId, 1, ['b'], DEADLINE, T);
    const { result, events } = await withEvents(runId, () =>
      store.decideOutcome(runId, 'failed', failure, T, 0),
    );
    expect(result).toEqual({ decided: false, status: 'running' });
    expect(events).toEqual([]);
    expect(await store.decide(runId, 'succeeded', null, T, 1)).toBe(true);
  });

  it('decides nothing for an unknown run and creates nothing', async () => {
    const runId = randomUUID();
    expect(await store.decideOutcome(runId, 'failed', failure, T)).toEqual({ decided: false, status: null });
    expect(await redis.exists(...allKeys(runId))).toBe(0);
  });
});

describe('settle-run', () => {
  async function decidedRun(): Promise<string> {
    const runId = await runningRun();
    await store.completeNode(runId, 'a', snapshot('succeeded', 1), {
      release: true,
      children: ['c'],
      charge: {},
    });
    await store.decide(runId, 'failed', failure, T);
    return runId;
  }
  const fill = new Map([
    ['a', notRun('skipped')],
    ['b', notRun('cancelled')],
    ['c', notRun('skipped')],
  ]);
  const final = { status: 'failed' as const, error: failure, generation: 0 };

  it('fills the missing snapshots, drops live states, stores the output and emits run.finished', async () => {
    const runId = await decidedRun();
    const { result, events } = await withEvents(runId, () =>
      store.settle(runId, 0, fill, { c: 'out' }, final, 'finished'),
    );
    expect(result).toBe(true);
    // Off the run deadlines: no sweep looks at it again.
    expect(await redis.zscore(runDeadlinesKey(prefix), runId)).toBeNull();
    const k = keysOf(runId);
    expect(await store.snapshots(runId)).toEqual(
      new Map([
        ['a', snapshot('succeeded', 1)],
        ['b', notRun('cancelled')],
        ['c', notRun('skipped')],
      ]),
    );
    expect(await redis.exists(k.live)).toBe(0);
    const meta = await redis.hgetall(k.meta);
    expect(meta.finishedAt).toBe('finished');
    expect(JSON.parse(meta.output!)).toEqual({ c: 'out' });
    expect(brief(events)).toEqual([
      { type: 'node.cancelled', nodeId: 'b' },
      { type: 'node.skipped', nodeId: 'c' },
      { type: 'run.finished', data: final },
    ]);
    expect(events.at(-1)).toMatchObject({ family: 'lifecycle', phase: 'error' });
  });

  it('gives every key of the run the retention TTL', async () => {
    const runId = await decidedRun();
    await store.settle(runId, 0, fill, null, final, T);
    const k = keysOf(runId);
    for (const ttl of await ttls([k.meta, k.pending, k.nodes, k.events, k.aux])) {
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(RETENTION);
    }
  });

  it('publishes the run id on the settled channel', async () => {
    const runId = await decidedRun();
    const { message } = await nextMessage(store.channels.settled);
    await store.settle(runId, 0, fill, null, final, T);
    expect(await message).toBe(runId);
    await subscriber.unsubscribe(store.channels.settled);
  });

  it('settles only once', async () => {
    const runId = await decidedRun();
    await store.settle(runId, 0, fill, null, final, 'first');
    const { result, events } = await withEvents(runId, () =>
      store.settle(runId, 0, new Map(), { c: 'other' }, final, 'second'),
    );
    expect(result).toBe(false);
    expect(await redis.hmget(keysOf(runId).meta, 'finishedAt', 'output')).toEqual(['first', null]);
    expect(events).toEqual([]);
  });

  it('refuses a generation that is not the current one', async () => {
    const runId = await resumedRun();
    await store.start(runId, 1, ['b'], DEADLINE, T);
    await store.decide(runId, 'failed', failure, T);
    const { result, events } = await withEvents(runId, () => store.settle(runId, 0, fill, null, final, T));
    expect(result).toBe(false);
    expect(await redis.hexists(keysOf(runId).meta, 'finishedAt')).toBe(0);
    expect(events).toEqual([]);
    expect(await store.settle(runId, 1, fill, null, { ...final, generation: 1 }, T)).toBe(true);
  });
});

describe('resume-run', () => {
  it('reopens a settled failed run for the nodes to rerun, at the next generation', async () => {
    const runId = await settledFailedRun();
    const { result, events } = await withEvents(runId, () =>
      store.resume(runId, ['b', 'c'], new Map([['c', 1]]), TIMEOUT),
    );
    expect(result).toEqual({ resumed: true, generation: 1 });
    const k = keysOf(runId);
    expect([...(await store.snapshots(runId)).keys()]).toEqual(['a']);
    expect(await redis.hgetall(k.pending)).toEqual({ c: '1' });
    expect(await redis.hgetall(k.live)).toEqual({ _: '{}' });
    const aux = await redis.hgetall(k.aux);
    // The rerun nodes' bookkeeping starts afresh; the kept node's stays, and so does the usage
    // (the budget is the whole run's).
    expect(aux['execs:a']).toBe('1');
    expect(Object.keys(aux).filter((f) => f.endsWith(':b'))).toEqual([]);
    expect(
      Object.keys(aux)
        .filter((f) => f.startsWith('usage:'))
        .sort(),
    ).toEqual(['usage:toolCalls', 'usage:toolTimeMs']);
    const meta = await redis.hgetall(k.meta);
    expect(meta).toMatchObject({ status: 'queued', generation: '1' });
    for (const field of ['decidedAt', 'finishedAt', 'error', 'output', 'deadlineAt'])
      expect(meta[field]).toBeUndefined();
    expect(brief(events)).toEqual([{ type: 'run.resumed', data: { generation: 1 } }]);
  });

  it('puts the safety TTL back on every key', async () => {
    const runId = await settledFailedRun();
    await store.resume(runId, ['b', 'c'], new Map([['c', 1]]), TIMEOUT);
    for (const ttl of await ttls(allKeys(runId))) {
      expect(ttl).toBeGreaterThan(RETENTION);
      expect(ttl).toBeLessThanOrEqual(RETENTION + TIMEOUT);
    }
  });

  it('reopens a timed_out run', async () => {
    const runId = await settledFailedRun('timed_out');
    expect(await store.resume(runId, ['b', 'c'], new Map([['c', 1]]), TIMEOUT)).toEqual({
      resumed: true,
      generation: 1,
    });
  });

  it('refuses a run that is not failed or timed_out, or not settled yet, or unknown', async () => {
    const succeeded = await runningRun();
    await store.decide(succeeded, 'succeeded', null, T);
    await store.settle(succeeded, 0, new Map(), null, { status: 'succeeded', error: null, generation: 0 }, T);
    const cancelled = await runningRun();
    await store.decide(cancelled, 'cancelled', null, T);
    const unsettled = await runningRun();
    await store.decide(unsettled, 'failed', failure, T);
    const live = await runningRun();
    const resume = (runId: string): ReturnType<RunStore['resume']> =>
      store.resume(runId, ['b'], new Map(), TIMEOUT);
    expect(await resume(succeeded)).toEqual({ resumed: false, status: 'succeeded' });
    expect(await resume(cancelled)).toEqual({ resumed: false, status: 'cancelled' });
    expect(await resume(unsettled)).toEqual({ resumed: false, status: 'settling' });
    expect(await resume(live)).toEqual({ resumed: false, status: 'running' });
    expect(await resume(randomUUID())).toEqual({ resumed: false, status: null });
    expect(await redis.hget(keysOf(unsettled).meta, 'generation')).toBe('0');
    expect(await store.events(unsettled, 0).then((e) => e.map((x) => x.type))).not.toContain('run.resumed');
  });
});

const BY: SignalDecision = { keyId: 'key-1', tenant: 'default', at: T };
const NOW = Date.now();
const waiting = (until: string): { status: 'waiting'; until: string } => ({ status: 'waiting', until });
const waitFor = (nodeId: string, signal: string) => ({ nodeId, signal });

describe('signal', () => {
  it('refuses a signal nothing waits for, and writes nothing', async () => {
    const runId = await runningRun();
    const refused = await withEvents(runId, () => store.signal(runId, 'approve', { ok: true }, BY, 10));
    expect(refused).toEqual({ result: 'not_awaited', events: [] });
    expect(await redis.hgetall(keysOf(runId).aux)).not.toHaveProperty('signal:approve');
  });

  it('delivers a name once while a node waits for it, recording who decided', async () => {
    const runId = await runningRun();
    await store.waitState(runId, waitFor('a', 'approve'), NOW + 60_000, waiting('one'));
    const first = await withEvents(runId, () => store.signal(runId, 'approve', { ok: true }, BY, 10));
    expect(first.result).toBe('delivered');
    expect(brief(first.events)).toEqual([
      { type: 'signal.received', data: { name: 'approve', payload: { ok: true }, decidedBy: BY } },
    ]);
    const second = await withEvents(runId, () => store.signal(runId, 'approve', { ok: false }, BY, 10));
    expect(second).toEqual({ result: 'duplicate', events: [] });
    expect(await redis.hget(keysOf(runId).aux, 'signal:approve')).toBe('{"ok":true}');
    const doc = await store.document(runId);
    expect(doc!.nodes.a!.waits).toEqual([
      expect.objectContaining({ signal: 'approve', generation: 0, decidedBy: BY }),
    ]);
  });

  it('refuses a wait that is over: its deadline passed, or its node has a snapshot', async () => {
    const runId = await runningRun();
    await store.waitState(runId, waitFor('a', 'late'), NOW - 1, waiting('past'));
    expect(await store.signal(runId, 'late', 1, BY, 10)).toBe('not_awaited');
    await store.waitState(runId, waitFor('b', 'done'), NOW + 60_000, waiting('one'));
    await store.completeNode(runId, 'b', snapshot('succeeded'), { release: true, children: [], charge: {} });
    expect(await store.signal(runId, 'done', 1, BY, 10)).toBe('not_awaited');
  });

  it('accepts early only a name a wait node of the plan declares with acceptEarly', async () => {
    const runId = randomUUID();
    const early: ExecutableGraph = {
      nodes: [
        { id: 'w', kind: 'wait', signal: 'go', timeoutSeconds: 60, onTimeout: 'fail', acceptEarly: true },
        { id: 'v', kind: 'wait', signal: 'stop', timeoutSeconds: 60, onTimeout: 'fail' },
      ],
      edges: [],
    };
    await createGraphRun(runId, early, [
      ['w', 0],
      ['v', 0],
    ]);
    expect(await store.signal(runId, 'stop', 1, BY, 10)).toBe('not_awaited');
    expect(await store.signal(runId, 'go', { early: true }, BY, 10)).toBe('delivered');
    const state = await store.waitState(runId, waitFor('w', 'go'), NOW + 60_000, waiting('one'));
    expect(state).toMatchObject({ delivered: true, payload: { early: true }, signal: 'go', decidedBy: BY });
    const doc = await store.document(runId);
    expect(doc!.nodes.w!.waits).toEqual([expect.objectContaining({ signal: 'go', decidedBy: BY })]);
  });

  it('caps the signals a run accepts', async () => {
    const runId = await runningRun();
    for (const name of ['s1', 's2', 's3'])
      await store.waitState(runId, { ...waitFor('a', name), key: `a#${name}` }, NOW + 60_000, waiting('one'));
    expect(await store.signal(runId, 's1', 1, BY, 2)).toBe('delivered');
    expect(await store.signal(runId, 's2', 1, BY, 2)).toBe('delivered');
    expect(await store.signal(runId, 's3', 1, BY, 2)).toBe('too_many');
  });

  it('refuses a run whose outcome is decided, and answers unknown_run for an unknown run', async () => {
    const runId = await runningRun();
    await store.waitState(runId, waitFor('a', 'approve'), NOW + 60_000, waiting('one'));
    await store.decide(runId, 'cancelled', null, T);
    expect(await store.signal(runId, 'approve', 1, BY, 10)).toBe('run_finished');
    const unknown = randomUUID();
    expect(await store.signal(unknown, 'approve', 1, BY, 10)).toBe('unknown_run');
    expect(await redis.exists(...allKeys(unknown))).toBe(0);
  });
});

describe('wait-state', () => {
  it('sets the deadline on the first call only, registers the wait once and marks the node waiting', async () => {
    const runId = await runningRun();
    const first = await withEvents(runId, () =>
      store.waitState(runId, waitFor('a', 'approve'), 1000, waiting('one')),
    );
    expect(first.result).toEqual({
      payload: null,
      delivered: false,
      deadlineAt: 1000,
      signal: 'approve',
      decidedBy: null,
    });
    expect(brief(first.events)).toEqual([
      {
        type: 'signal.awaited',
        nodeId: 'a',
        data: { signal: 'approve', until: new Date(1000).toISOString() },
      },
    ]);
    const second = await withEvents(runId, () =>
      store.waitState(runId, waitFor('a', 'approve'), 2000, waiting('two')),
    );
    expect(second.result).toMatchObject({ delivered: false, deadlineAt: 1000 });
    expect(second.events).toEqual([]);
    expect(await redis.hget(keysOf(runId).aux, 'waitUntil:a')).toBe('1000');
    expect(JSON.parse((await redis.hget(keysOf(runId).live, 'a'))!)).toEqual({
      ...waiting('two'),
      signal: 'approve',
    });
  });

  it('draws an approval nonce once: later calls of the same wait get the same name', async () => {
    const runId = await runningRun();
    const hold = {
      nodeId: 'a',
      key: 'a#g0.a1.x',
      signal: 'approve.a.',
      approval: { tool: 'http', reason: 'r' },
    };
    const first = await store.waitState(runId, { ...hold, nonce: 'n1' }, NOW + 60_000, waiting('one'));
    const again = await store.waitState(runId, { ...hold, nonce: 'n2' }, NOW + 60_000, waiting('one'));
    expect(first.signal).toBe('approve.a.n1');
    expect(again.signal).toBe('approve.a.n1');
    // The prefix alone, or another nonce, is not awaited.
    expect(await store.signal(runId, 'approve.a.n2', { approved: true }, BY, 10)).toBe('not_awaited');
    expect(await store.signal(runId, 'approve.a.n1', { approved: true }, BY, 10)).toBe('delivered');
    const doc = await store.document(runId);
    expect(doc!.nodes.a!.waits).toEqual([
      expect.objectContaining({
        signal: 'approve.a.n1',
        approval: { tool: 'http', reason: 'r' },
        decidedBy: BY,
      }),
    ]);
  });

  it('answers a delivered signal and who decided it, and leaves the live state', async () => {
    const runId = await runningRun();
    await store.waitState(runId, waitFor('b', 'approve'), NOW + 60_000, waiting('one'));
    await store.signal(runId, 'approve', { ok: 1 }, BY, 10);
    const result = await store.waitState(runId, waitFor('a', 'approve'), 1000, waiting('one'));
    expect(result).toEqual({
      payload: { ok: 1 },
      delivered: true,
      deadlineAt: 1000,
      signal: 'approve',
      decidedBy: BY,
    });
    expect(await redis.hget(keysOf(runId).live, 'a')).toBe('{"status":"queued"}');
  });
});

describe('sleep-state', () => {
  const sleeping = { status: 'waiting' as const };

  it('keeps the first wake time, marks the node waiting, and appends node.sleeping once', async () => {
    const runId = await runningRun();
    const wake = NOW + 60_000;
    const first = await withEvents(runId, () => store.sleepState(runId, 'a', wake, NOW, sleeping));
    expect(first.result).toEqual({ wakeAt: wake, woke: false });
    const until = new Date(wake).toISOString();
    expect(brief(first.events)).toEqual([{ type: 'node.sleeping', nodeId: 'a', data: { until } }]);
    // A re-entering or redelivered job proposes a later time (a forMs counted again): the first holds.
    const again = await withEvents(runId, () =>
      store.sleepState(runId, 'a', wake + 5000, NOW + 1000, sleeping),
    );
    expect(again.result).toEqual({ wakeAt: wake, woke: false });
    expect(again.events).toEqual([]);
    expect(await redis.hget(keysOf(runId).aux, 'waitUntil:a')).toBe(String(wake));
    expect(JSON.parse((await redis.hget(keysOf(runId).live, 'a'))!)).toEqual({ status: 'waiting', until });
  });

  it('answers woke at the wake time and appends node.woke once, however many calls find it so', async () => {
    const runId = await runningRun();
    const wake = NOW + 60_000;
    await store.sleepState(runId, 'a', wake, NOW, sleeping);
    const woke = await withEvents(runId, () => store.sleepState(runId, 'a', wake + 9, wake, sleeping));
    expect(woke.result).toEqual({ wakeAt: wake, woke: true });
    expect(brief(woke.events)).toEqual([
      { type: 'node.woke', nodeId: 'a', data: { until: new Date(wake).toISOString() } },
    ]);
    const later = await withEvents(runId, () => store.sleepState(runId, 'a', wake, wake + 10, sleeping));
    expect(later.result).toEqual({ wakeAt: wake, woke: true });
    expect(later.events).toEqual([]);
  });

  it('writes nothing for an unknown run, and has its wake time forgotten when the node runs again', async () => {
    const unknown = randomUUID();
    expect(await store.sleepState(unknown, 'a', NOW, NOW, sleeping)).toEqual({ wakeAt: 0, woke: true });
    expect(await redis.exists(...allKeys(unknown))).toBe(0);

    const runId = await runningRun();
    await store.sleepState(runId, 'b', NOW - 1, NOW, sleeping);
    await store.completeNode(runId, 'b', snapshot('failed'), { release: false, children: ['c'], charge: {} });
    await store.decide(runId, 'failed', failure, T);
    await store.settle(
      runId,
      0,
      new Map([['c', notRun('skipped')]]),
      null,
      { status: 'failed', error: failure, generation: 0 },
      T,
    );
    await store.resume(runId, ['b', 'c'], new Map([['c', 1]]), TIMEOUT);
    expect(await redis.hmget(keysOf(runId).aux, 'waitUntil:b', 'woke:b')).toEqual([null, null]);
  });
});

describe('budget decisions', () => {
  const paused = (nodeId: string, nonce: string) => ({
    nodeId,
    key: 'budget#g0#500000000',
    signal: 'budget.',
    nonce,
    budget: { costUsd: 0.5, spentUsd: 0.61 },
  });

  it('pause every node at one budget under one name, each with its wait and budget.paused', async () => {
    const runId = await runningRun({ budget: { toolCalls: 10, costUsd: 0.5 }, onBudget: 'pause' });
    const a = await withEvents(runId, () =>
      store.waitState(runId, paused('a', 'n1'), NOW + 60_000, waiting('x')),
    );
    const b = await withEvents(runId, () =>
      store.waitState(runId, paused('b', 'n2'), NOW + 90_000, waiting('x')),
    );
    expect([a.result.signal, b.result.signal]).toEqual(['budget.n1', 'budget.n1']);
    // One deadline per pause: the first call's.
    expect(b.result.deadlineAt).toBe(NOW + 60_000);
    const until = new Date(NOW + 60_000).toISOString();
    for (const [node, { events }] of [
      ['a', a],
      ['b', b],
    ] as const) {
      expect(brief(events)).toEqual([
        {
          type: 'signal.awaited',
          nodeId: node,
          data: { signal: 'budget.n1', until: expect.any(String), budget: { costUsd: 0.5, spentUsd: 0.61 } },
        },
        {
          type: 'budget.paused',
          nodeId: node,
          data: { budget: 'costUsd', costUsd: 0.5, spentUsd: 0.61, signal: 'budget.n1', until },
        },
      ]);
    }
    // Again from a re-entering job: no new wait, no new event.
    const again = await withEvents(runId, () => store.waitState(runId, paused('a', 'n3'), NOW, waiting('x')));
    expect(again.events).toEqual([]);
    const doc = await store.document(runId);
    for (const node of ['a', 'b']) {
      expect(doc!.nodes[node]).toMatchObject({ status: 'waiting', signal: 'budget.n1' });
      expect(doc!.nodes[node]!.waits).toEqual([
        expect.objectContaining({ signal: 'budget.n1', budget: { costUsd: 0.5, spentUsd: 0.61 } }),
      ]);
    }
    expect(doc!.onBudget).toBe('pause');
  });

  it('raise the budget in the step that delivers the decision, and only upwards', async () => {
    const runId = await runningRun({ budget: { toolCalls: 10, costUsd: 0.5 }, onBudget: 'pause' });
    await store.waitState(runId, paused('a', 'n1'), NOW + 60_000, waiting('x'));
    const low = await withEvents(runId, () =>
      store.signal(runId, 'budget.n1', { costUsd: 0.5 }, BY, 10, { costUsd: 0.5 }),
    );
    expect(low).toEqual({ result: 'not_raised', events: [] });
    expect(await redis.hexists(keysOf(runId).aux, 'signal:budget.n1')).toBe(0);
    const raised = await withEvents(runId, () =>
      store.signal(runId, 'budget.n1', { costUsd: 2 }, BY, 10, { costUsd: 2 }),
    );
    expect(raised.result).toBe('delivered');
    expect(brief(raised.events)).toEqual([
      { type: 'signal.received', data: { name: 'budget.n1', payload: { costUsd: 2 }, decidedBy: BY } },
      {
        type: 'budget.raised',
        data: { budget: 'costUsd', from: 0.5, to: 2, signal: 'budget.n1', decidedBy: BY },
      },
    ]);
    expect(await store.budget(runId)).toEqual({ toolCalls: 10, costUsd: 2 });
    expect(raised.events.map((e) => e.family)).toEqual(['environment', 'budget']);
  });

  it('deliver a stop without touching the budget', async () => {
    const runId = await runningRun({ budget: { toolCalls: 10, costUsd: 0.5 }, onBudget: 'pause' });
    await store.waitState(runId, paused('a', 'n1'), NOW + 60_000, waiting('x'));
    const stopped = await withEvents(runId, () => store.signal(runId, 'budget.n1', { stop: true }, BY, 10));
    expect(stopped.result).toBe('delivered');
    expect(stopped.events.map((e) => e.type)).toEqual(['signal.received']);
    expect(await store.budget(runId)).toEqual({ toolCalls: 10, costUsd: 0.5 });
  });
});

describe('add-child', () => {
  it('records each child run once', async () => {
    const runId = await runningRun();
    await store.addChild(runId, 'child-1');
    await store.addChild(runId, 'child-2');
    await store.addChild(runId, 'child-1');
    expect(JSON.parse((await redis.hget(keysOf(runId).aux, 'children'))!)).toEqual(['child-1', 'child-2']);
  });

  it('has a parent decided other than succeeded cancel its children', async () => {
    const parent = await runningRun();
    const child = await runningRun();
    const grandchild = await runningRun();
    await store.addChild(parent, child);
    await store.addChild(child, grandchild);
    expect(await store.decideOutcome(parent, 'failed', failure, T)).toEqual({
      decided: true,
      status: 'failed',
    });
    for (const id of [child, grandchild]) {
      expect(await store.status(id)).toBe('cancelled');
      expect((await store.error(id))?.code).toBe('parent_ended');
    }
  });

  it('leaves the children of a parent that succeeded running', async () => {
    const parent = await runningRun();
    const child = await runningRun();
    await store.addChild(parent, child);
    await store.decide(parent, 'succeeded', null, T);
    expect(await store.status(child)).toBe('running');
  });
});

describe('append-event', () => {
  it('appends an event with its node and data, changing nothing else', async () => {
    const runId = await runningRun();
    const before = await redis.hgetall(keysOf(runId).meta);
    const seq = await lastSeq(runId);
    const { events } = await withEvents(runId, async () => {
      await store.appendEvent(runId, 'assistant.delta', 'a', { text: 'hi' });
      await store.appendEvent(runId, 'usage', undefined, undefined);
    });
    expect(events).toEqual([
      {
        seq: seq + 1,
        type: 'assistant.delta',
        family: 'assistant',
        phase: 'delta',
        ts: expect.any(Number),
        runId,
        nodeId: 'a',
        data: { text: 'hi' },
      },
      {
        seq: seq + 2,
        type: 'usage',
        family: 'usage',
        phase: 'update',
        ts: expect.any(Number),
        runId,
      },
    ]);
    expect(await redis.hgetall(keysOf(runId).meta)).toEqual(before);
  });

  it('appends nothing to an unknown run and creates nothing', async () => {
    const runId = randomUUID();
    await store.appendEvent(runId, 'assistant.delta', 'a', { text: 'hi' });
    expect(await redis.exists(...allKeys(runId))).toBe(0);
  });
});

describe('set-plan', () => {
  it('stores a task run’s first plan with its counters and planner usage, and emits plan', async () => {
    const runId = await createRun({ task: task() });
    const { result, events } = await withEvents(runId, () =>
      store.setPlan(
        runId,
        {
          graph,
          plan,
          pending: new Map([
            ['a', 0],
            ['c', 2],
          ]),
        },
        planning,
        {
          promptTokens: 10,
          completionTokens: 5,
          modelCalls: 1,
        },
      ),
    );
    expect(result).toBe(true);
    const k = keysOf(runId);
    const meta = await redis.hgetall(k.meta);
    expect(JSON.parse(meta.graph!)).toEqual(graph);
    expect(JSON.parse(meta.plan!)).toEqual(plan);
    expect(JSON.parse(meta.planning!)).toEqual(planning);
    expect(await redis.hgetall(k.pending)).toEqual({ c: '2' });
    expect(
      await redis.hmget(k.aux, 'usage:promptTokens', 'usage:completionTokens', 'usage:modelCalls'),
    ).toEqual(['10', '5', '1']);
    expect(brief(events)).toEqual([{ type: 'plan', data: { ...planning, nodes: 3 } }]);
    expect(events[0]).toMatchObject({ family: 'plan', phase: 'created' });
  });

  it('keeps the plan cache entry the plan came from with the run, for planCacheRef', async () => {
    const runId = await createRun({ task: task() });
    expect(await store.planCacheRef(runId)).toBeNull();
    const cache = { key: `${prefix}:plancache:{a:main}:abc`, runId: 'from-run' };
    await store.setPlan(runId, { graph, plan, pending: new Map() }, planning, {}, cache);
    expect(await redis.hmget(keysOf(runId).meta, 'planCacheKey', 'planCacheFrom')).toEqual([
      cache.key,
      'from-run',
    ]);
    expect(await store.planCacheRef(runId)).toEqual(cache);
    // Without one, nothing is kept.
    const plain = await createRun({ task: task() });
    await store.setPlan(plain, { graph, plan, pending: new Map() }, planning, {});
    expect(await store.planCacheRef(plain)).toBeNull();
  });

  it('keeps the first plan', async () => {
    const runId = await createRun({ task: task() });
    await store.setPlan(runId, { graph, plan, pending: new Map([['c', 2]]) }, planning, {});
    const other: ExecutableGraph = { nodes: [tool('z')], edges: [] };
    const { result, events } = await withEvents(runId, () =>
      store.setPlan(runId, { graph: other, plan: other, pending: new Map([['z', 1]]) }, planning, {
        promptTokens: 3,
      }),
    );
    expect(result).toBe(false);
    expect((await store.plan(runId))?.plan).toEqual(plan);
    expect(await redis.hgetall(keysOf(runId).pending)).toEqual({ c: '2' });
    expect(await redis.hexists(keysOf(runId).aux, 'usage:promptTokens')).toBe(0);
    expect(events).toEqual([]);
  });

  it('stores nothing for an unknown run', async () => {
    const runId = randomUUID();
    expect(await store.setPlan(runId, { graph, plan, pending: new Map() }, planning, {})).toBe(false);
    expect(await redis.exists(...allKeys(runId))).toBe(0);
  });
});

describe('charge', () => {
  it('adds rounded usage to the run and emits the given event', async () => {
    const runId = await runningRun();
    const { events } = await withEvents(runId, async () => {
      await store.charge(
        runId,
        { promptTokens: 10.4, modelCalls: 1 },
        { type: 'usage', data: { tokens: 10 } },
      );
      await store.charge(runId, { promptTokens: 2, toolCalls: 0 });
    });
    const aux = await redis.hgetall(keysOf(runId).aux);
    expect([aux['usage:promptTokens'], aux['usage:modelCalls'], aux['usage:toolCalls']]).toEqual([
      '12',
      '1',
      undefined,
    ]);
    expect(brief(events)).toEqual([{ type: 'usage', data: { tokens: 10 } }]);
  });

  it('charges nothing to an unknown run and creates nothing', async () => {
    const runId = randomUUID();
    await store.charge(runId, { promptTokens: 1 }, { type: 'usage', data: {} });
    expect(await redis.exists(...allKeys(runId))).toBe(0);
  });
});

describe('request-replan', () => {
  it('hands a running task run back to the plan loop, once', async () => {
    const runId = await runningTaskRun();
    const first = await withEvents(runId, () => store.requestReplan(runId, failure, 0));
    expect(first.result).toBe(true);
    expect(brief(first.events)).toEqual([{ type: 'replan.requested', data: failure }]);
    expect(JSON.parse((await redis.hget(keysOf(runId).meta, 'replan'))!)).toEqual(failure);
    expect((await store.header(runId)).task?.replanRequest).toEqual(failure);

    const again = await withEvents(runId, () => store.requestReplan(runId, { ...failure, nodeId: 'a' }, 0));
    expect(again.result).toBe(true);
    expect(again.events).toEqual([]);
    expect(JSON.parse((await redis.hget(keysOf(runId).meta, 'replan'))!)).toEqual(failure);
  });

  it('refuses a loop-mode task run', async () => {
    const runId = await runningTaskRun({ mode: 'loop' });
    expect(await store.requestReplan(runId, failure, 0)).toBe(false);
    expect(await redis.hexists(keysOf(runId).meta, 'replan')).toBe(0);
  });

  it('refuses a fixed-graph run', async () => {
    const runId = await runningRun();
    expect(await store.requestReplan(runId, failure, 0)).toBe(false);
  });

  it('refuses a run that is not running', async () => {
    const queued = await createRun({ task: task() });
    expect(await store.requestReplan(queued, failure, 0)).toBe(false);
    const decided = await runningTaskRun();
    await store.decide(decided, 'cancelled', null, T);
    expect(await store.requestReplan(decided, failure, 0)).toBe(false);
  });

  it('refuses a failure from another generation', async () => {
    const runId = await runningTaskRun();
    expect(await store.requestReplan(runId, failure, 1)).toBe(false);
  });

  it('refuses once maxReplans are used up', async () => {
    const none = await runningTaskRun({ maxReplans: 0 });
    expect(await store.requestReplan(none, failure, 0)).toBe(false);
    const runId = await replannedRun();
    await store.start(runId, 1, ['e'], DEADLINE, T);
    const { result, events } = await withEvents(runId, () => store.requestReplan(runId, failure, 1));
    expect(result).toBe(false);
    expect(events).toEqual([]);
  });
});

/** The plan replan-6 installs: a (kept) and e feed d. */
const graph2: Graph = {
  nodes: [tool('a'), tool('e'), tool('d')],
  edges: [
    ['a', 'd'],
    ['e', 'd'],
  ],
};
const plan2 = planOf(graph2);
const planning2: PlanningRecord = { ...planning, planVersion: 2 };

/** A task run of maxReplans 1 whose node b failed at generation 0, with a replan requested. */
async function replanRequestedRun(): Promise<string> {
  const runId = await runningTaskRun();
  const begin = { generation: 0, live: running, countExecution: true, chargeCall: true, reads: [] };
  await store.beginNode(runId, 'a', begin);
  await store.completeNode(runId, 'a', snapshot('succeeded', 1), {
    release: true,
    children: ['c'],
    charge: { toolTimeMs: 5 },
  });
  await store.beginNode(runId, 'b', begin);
  await store.recordAttempt(runId, 'b', attempt(1), { status: 'retrying', attempt: 1 });
  await store.completeNode(runId, 'b', snapshot('failed'), { release: false, children: ['c'], charge: {} });
  await store.requestReplan(runId, failure, 0);
  return runId;
}

async function replannedRun(): Promise<string> {
  const runId = await replanRequestedRun();
  await store.replan(runId, 0, { graph: graph2, plan: plan2, pending: new Map([['d', 1]]) }, planning2, {}, [
    'b',
  ]);
  return runId;
}

describe('replan', () => {
  it('installs the new plan, drops the nodes it does not keep and moves the generation on', async () => {
    const runId = await replanRequestedRun();
    const { result, events } = await withEvents(runId, () =>
      store.replan(
        runId,
        0,
        { graph: graph2, plan: plan2, pending: new Map([['d', 1]]) },
        planning2,
        { promptTokens: 10, modelCalls: 1 },
        ['b'],
      ),
    );
    expect(result).toBe(1);
    const k = keysOf(runId);
    expect([...(await store.snapshots(runId)).keys()]).toEqual(['a']);
    expect(await redis.hgetall(k.pending)).toEqual({ d: '1' });
    expect(await redis.hgetall(k.live)).toEqual({ _: '{}' });
    const aux = await redis.hgetall(k.aux);
    expect(Object.keys(aux).filter((f) => f.endsWith(':b'))).toEqual([]);
    expect(aux['execs:a']).toBe('1');
    // Usage restarts with the planner's charge.
    expect(Object.fromEntries(Object.entries(aux).filter(([f]) => f.startsWith('usage:')))).toEqual({
      'usage:promptTokens': '10',
      'usage:modelCalls': '1',
    });
    const meta = await redis.hgetall(k.meta);
    expect(meta).toMatchObject({ status: 'queued', generation: '1', replans: '1' });
    expect(meta.replan).toBeUndefined();
    expect(JSON.parse(meta.graph!)).toEqual(graph2);
    expect(JSON.parse(meta.plan!)).toEqual(plan2);
    expect(JSON.parse(meta.planning!)).toEqual(planning2);
    expect(brief(events)).toEqual([{ type: 'plan', data: { ...planning2, nodes: 3 } }]);
  });

  it('drops a map item snapshot without lowering the counts, which never held it', async () => {
    const runId = await replanRequestedRun();
    const k = keysOf(runId);
    // As complete-item-6.lua writes one: in the snapshots hash, not counted.
    await redis.hset(k.nodes, 'a[0]', JSON.stringify(snapshot('succeeded', 1)));
    expect(await redis.hget(k.aux, 'count:succeeded')).toBe('1');
    await store.replan(
      runId,
      0,
      { graph: graph2, plan: plan2, pending: new Map([['d', 1]]) },
      planning2,
      {},
      ['b', 'a[0]'],
    );
    expect(await redis.hexists(k.nodes, 'a[0]')).toBe(0);
    // a, kept, is still counted.
    expect(await redis.hget(k.aux, 'count:succeeded')).toBe('1');
  });

  it('refuses a run with no replan requested', async () => {
    const runId = await runningTaskRun();
    const { result, events } = await withEvents(runId, () =>
      store.replan(runId, 0, { graph: graph2, plan: plan2, pending: new Map() }, planning2, {}, []),
    );
    expect(result).toBe(0);
    expect(events).toEqual([]);
    expect(await redis.hmget(keysOf(runId).meta, 'status', 'generation')).toEqual(['running', '0']);
  });

  it('refuses another generation', async () => {
    const runId = await replanRequestedRun();
    const result = await store.replan(
      runId,
      1,
      { graph: graph2, plan: plan2, pending: new Map() },
      planning2,
      {},
      ['b'],
    );
    expect(result).toBe(0);
    expect(await store.snapshots(runId).then((s) => [...s.keys()].sort())).toEqual(['a', 'b']);
    expect(await redis.hexists(keysOf(runId).meta, 'replan')).toBe(1);
  });

  it('makes node jobs from before the replan stale', async () => {
    const runId = await replannedRun();
    const begin = await store.beginNode(runId, 'a', {
      generation: 0,
      live: running,
      countExecution: true,
      chargeCall: true,
      reads: [],
    });
    expect(begin.status).toBe('stale');
  });
});

describe('emit', () => {
  it('numbers a run’s events 1, 2, 3… across scripts, as stream ids 0-<seq>', async () => {
    const runId = await runningRun();
    await store.waitState(runId, waitFor('a', 'go'), NOW + 60_000, waiting('one'));
    await store.signal(runId, 'go', null, BY, 10);
    const events = await store.events(runId, 0);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    const ids = (await redis.xrange(keysOf(runId).events, '-', '+')).map(([id]) => id);
    expect(ids).toEqual(events.map((e) => `0-${e.seq}`));
    expect(await store.events(runId, 2)).toEqual(events.slice(2));
  });
});

describe('end-unstarted', () => {
  it('decides a queued run cancelled, gives every node of its plan a snapshot and settles it, in one step', async () => {
    const runId = await createRun();
    const aborted = await nextMessage(store.channels.abort);
    const settled = await nextMessage(store.channels.settled);
    const { result, events } = await withEvents(runId, () =>
      store.endUnstarted(runId, { code: 'cancelled', message: 'stopped' }, T),
    );
    expect(result).toEqual({ settled: true, status: 'cancelled' });
    expect(await aborted.message).toBe(runId);
    expect(await settled.message).toBe(runId);
    expect(brief(events)).toEqual([
      { type: 'run.decided', data: { status: 'cancelled' } },
      { type: 'node.cancelled', nodeId: 'a' },
      { type: 'node.cancelled', nodeId: 'b' },
      { type: 'node.cancelled', nodeId: 'c' },
      {
        type: 'run.finished',
        data: { status: 'cancelled', error: { code: 'cancelled', message: 'stopped' }, generation: 0 },
      },
    ]);
    const doc = await store.document(runId);
    expect(doc).toMatchObject({ status: 'cancelled', finishedAt: T, error: { code: 'cancelled' } });
    expect(doc?.nodes.a).toEqual({ id: 'a', ...notRun('cancelled') });
    const k = keysOf(runId);
    // Live states are dropped at settle; every key left gets the retention TTL.
    expect(await redis.exists(k.live)).toBe(0);
    for (const ttl of await ttls([k.meta, k.pending, k.nodes, k.events])) {
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(RETENTION);
    }
  });

  it('fails a task run that has no plan, with the given error and no nodes', async () => {
    const runId = await createRun({ task: task() });
    const error: RunError = { code: 'plan_rejected', message: 'the plan was rejected', issues: [] };
    expect(await store.endUnstarted(runId, error, T)).toEqual({ settled: true, status: 'failed' });
    const doc = await store.document(runId);
    expect(doc).toMatchObject({ status: 'failed', finishedAt: T, error, nodes: {} });
  });

  it('keeps an outcome decided before, with its error, and settles the run as decided', async () => {
    const runId = await createRun({ task: task() });
    await store.decide(runId, 'timed_out', { code: 'timed_out', message: 'late' }, T);
    const { result, events } = await withEvents(runId, () => store.endUnstarted(runId, null, T));
    expect(result).toEqual({ settled: true, status: 'timed_out' });
    expect(brief(events)).toEqual([
      {
        type: 'run.finished',
        data: { status: 'timed_out', error: { code: 'timed_out', message: 'late' }, generation: 0 },
      },
    ]);
  });

  it('leaves a settled run and an unknown run alone', async () => {
    const runId = await settledFailedRun();
    const before = await redis.hgetall(keysOf(runId).meta);
    expect(await store.endUnstarted(runId, { code: 'cancelled', message: 'late' }, T)).toEqual({
      settled: false,
      status: 'failed',
    });
    expect(await redis.hgetall(keysOf(runId).meta)).toEqual(before);
    const unknown = randomUUID();
    expect(await store.endUnstarted(unknown, { code: 'cancelled', message: 'x' }, T)).toEqual({
      settled: false,
      status: null,
    });
    expect(await redis.exists(...allKeys(unknown))).toBe(0);
  });
});

describe('end-unstarted refuses', () => {
  it('a running run, whose nodes may have run, and a queued run when no outcome is given', async () => {
    const running = await runningRun();
    const seq = await lastSeq(running);
    expect(await store.endUnstarted(running, { code: 'cancelled', message: 'x' }, T)).toEqual({
      settled: false,
      status: 'running',
    });
    expect(await lastSeq(running)).toBe(seq);
    const queued = await createRun();
    expect(await store.endUnstarted(queued, null, T)).toEqual({ settled: false, status: 'queued' });
    expect(await redis.hexists(keysOf(queued).meta, 'finishedAt')).toBe(0);
  });
});

describe('environment-changed', () => {
  const recent = ['ci/build: {"ok":false}', 'ci/build: {"ok":true}', 'chat/message: "hurry"'];

  it('records the version, appends what is new and hands a planned run back to the planner, in one step', async () => {
    const runId = await runningTaskRun();
    await store.setEnvironmentVersion(runId, 1);
    const { result, events } = await withEvents(runId, () => store.environmentChanged(runId, 3, recent));
    expect(result).toBe(true);
    const message = 'the environment changed: ci/build: {"ok":true} | chat/message: "hurry"';
    expect(brief(events)).toEqual([
      { type: 'environment.changed', data: { version: 3, events: recent.slice(1) } },
      { type: 'replan.requested', data: { code: 'environment_changed', message } },
    ]);
    expect(await store.environmentVersion(runId)).toBe(3);
    expect((await store.taskOf(runId))?.replanRequest).toEqual({ code: 'environment_changed', message });
    expect(await store.steering(runId)).toEqual([]);
  });

  it('gives an agent run (loop mode, or a fixed graph) the new entries as steering', async () => {
    const runId = await runningTaskRun({ mode: 'loop' });
    expect(await store.environmentChanged(runId, 2, recent)).toBe(true);
    expect(await store.steering(runId)).toEqual(recent.slice(1));
    expect(await store.environmentChanged(runId, 3, recent)).toBe(true);
    expect(await store.steering(runId)).toEqual([...recent.slice(1), recent[2]]);
    expect((await store.taskOf(runId))?.replanRequest).toBeNull();
    const graphRun = await runningRun();
    expect(await store.environmentChanged(graphRun, 1, recent)).toBe(true);
    expect(await store.steering(graphRun)).toEqual(recent.slice(2));
  });

  it('does nothing when the version did not move, or the run is not running', async () => {
    const runId = await runningTaskRun();
    expect(await store.environmentChanged(runId, 2, recent)).toBe(true);
    const seq = await lastSeq(runId);
    expect(await store.environmentChanged(runId, 2, recent)).toBe(false);
    expect(await store.environmentChanged(runId, 1, recent)).toBe(false);
    expect(await lastSeq(runId)).toBe(seq);
    const queued = await createRun();
    expect(await store.environmentChanged(queued, 5, recent)).toBe(false);
    expect(await store.environmentVersion(queued)).toBe(0);
  });

  it('still records the change when the run may not be replanned any more', async () => {
    const runId = await runningTaskRun({ maxReplans: 0 });
    const { result, events } = await withEvents(runId, () => store.environmentChanged(runId, 1, recent));
    expect(result).toBe(true);
    expect(brief(events).map((e) => e.type)).toEqual(['environment.changed']);
    expect(await store.environmentVersion(runId)).toBe(1);
  });
});

describe('guards against ended and vanished runs', () => {
  it('replan leaves a run that ended while its planner was asked ended', async () => {
    const runId = await runningTaskRun();
    expect(await store.requestReplan(runId, failure, 0)).toBe(true);
    await store.decide(runId, 'cancelled', { code: 'cancelled', message: 'stop' }, T);
    const before = await redis.hgetall(keysOf(runId).meta);
    expect(await store.replan(runId, 0, { graph, plan, pending: new Map() }, planning, {}, [])).toBe(0);
    expect(await redis.hgetall(keysOf(runId).meta)).toEqual(before);
  });

  it('resume voids a replan requested before the run ended, so dependents are released again', async () => {
    const runId = await runningTaskRun();
    expect(await store.requestReplan(runId, failure, 0)).toBe(true);
    await store.decide(runId, 'failed', failure, T);
    await store.settle(runId, 0, new Map(), null, { status: 'failed', error: failure, generation: 0 }, T);
    const resumed = await store.resume(runId, ['a', 'b', 'c'], new Map([['c', 2]]), TIMEOUT);
    expect(resumed).toEqual({ resumed: true, generation: 1 });
    expect((await store.taskOf(runId))?.replanRequest).toBeNull();
    await store.start(runId, 1, ['a', 'b'], DEADLINE, T);
    const begin = { generation: 1, live: running, countExecution: true, chargeCall: true, reads: [] };
    for (const id of ['a', 'b']) await store.beginNode(runId, id, begin);
    await store.completeNode(runId, 'a', snapshot('succeeded'), {
      release: true,
      children: ['c'],
      charge: {},
    });
    const done = await store.completeNode(runId, 'b', snapshot('succeeded'), {
      release: true,
      children: ['c'],
      charge: {},
    });
    expect(done.ready).toEqual(['c']);
  });

  it('settle refuses a run whose outcome is not decided, and creates no unknown run', async () => {
    const runId = await runningRun();
    const final = { status: 'succeeded' as const, error: null, generation: 0 };
    expect(await store.settle(runId, 0, new Map(), null, final, T)).toBe(false);
    expect(await redis.hexists(keysOf(runId).meta, 'finishedAt')).toBe(0);
    const unknown = randomUUID();
    expect(await store.settle(unknown, 0, new Map(), null, final, T)).toBe(false);
    expect(await redis.exists(...allKeys(unknown))).toBe(0);
  });

  it('node scripts write nothing for a run that expired or was deleted', async () => {
    const runId = randomUUID();
    const done = await store.completeNode(runId, 'a', snapshot('succeeded'), {
      release: true,
      children: ['c'],
      charge: { toolTimeMs: 5 },
    });
    expect(done).toEqual({
      written: false,
      decided: false,
      status: null,
      generation: 0,
      ready: [],
      handedOff: [],
    });
    await store.recordAttempt(runId, 'a', attempt(1), { status: 'retrying', attempt: 1 });
    expect(await store.recordIteration(runId, 'a', 1, { iteration: 1 }, { toolCalls: 1 }, running)).toEqual({
      iterations: 0,
      toolCalls: 0,
      toolTimeMs: 0,
      tokens: 0,
      costNanoUsd: 0,
    });
    expect(await store.waitState(runId, waitFor('w', 'go'), DEADLINE, { status: 'waiting' })).toEqual({
      payload: null,
      delivered: false,
      deadlineAt: 0,
      signal: '',
      decidedBy: null,
    });
    await store.addChild(runId, randomUUID());
    expect(await redis.exists(...allKeys(runId))).toBe(0);
  });
});

describe('search indexes and node counts', () => {
  const search = runSearchKeys(prefix, 'default');
  // A run may last the longest wait (30 days by default), then is kept the retention.
  const KEEP_MS = (30 * 86_400 + RETENTION) * 1000;
  const inIndex = async (key: string, runId: string): Promise<boolean> =>
    (await redis.zscore(key, runId)) !== null;
  const counts = async (runId: string): Promise<Record<string, string>> =>
    Object.fromEntries(
      Object.entries(await redis.hgetall(keysOf(runId).aux)).filter(([f]) => f.startsWith('count:')),
    );

  it('create-run lists a run under all, its status, agent, session and tags, by creation time', async () => {
    const runId = randomUUID();
    await store.create({
      runId,
      graph,
      plan,
      agentId: 'scout',
      sessionKey: 'acme~alice',
      tags: ['nightly', 'env=prod'],
      input: null,
      timeoutSeconds: TIMEOUT,
      budget: {},
      metadata: undefined,
      createdAt: T,
      pending: new Map([['c', 2]]),
    });
    for (const key of [
      search.all,
      search.status('queued'),
      search.agent('scout'),
      search.session('acme~alice'),
      search.tag('nightly'),
      search.tag('env=prod'),
    ]) {
      expect(await redis.zscore(key, runId), key).toBe(String(Date.parse(T)));
      // A set lives as long as the runs it can hold, from its last write.
      expect(await redis.pttl(key)).toBeGreaterThan(KEEP_MS - 60_000);
    }
    const meta = await redis.hgetall(keysOf(runId).meta);
    expect(JSON.parse(meta.tags!)).toEqual(['nightly', 'env=prod']);
    expect(meta.nodeCount).toBe('3');
  });

  it('lists no child run', async () => {
    const runId = randomUUID();
    await store.create({
      runId,
      graph,
      plan,
      parentRunId: randomUUID(),
      input: null,
      timeoutSeconds: TIMEOUT,
      budget: {},
      metadata: undefined,
      createdAt: T,
      pending: new Map(),
    });
    expect(await inIndex(search.all, runId)).toBe(false);
    expect(await redis.hget(keysOf(runId).meta, 'index')).toBeNull();
  });

  it('trims each index of the runs created too long before to still exist', async () => {
    const old = await createRun({ runId: randomUUID() });
    // Moved back in time past what any run can live (its longest deadline plus the retention).
    await redis.zadd(search.all, Date.parse(T) - KEEP_MS - 1, old);
    expect(await inIndex(search.all, old)).toBe(true);
    const fresh = await createRun();
    expect(await inIndex(search.all, old)).toBe(false);
    expect(await inIndex(search.all, fresh)).toBe(true);
  });

  it('moves a run between the status indexes as its status changes', async () => {
    const runId = await createRun();
    const where = async (): Promise<string[]> => {
      const found: string[] = [];
      for (const status of ['queued', 'running', 'succeeded', 'failed', 'cancelled', 'timed_out']) {
        if (await inIndex(search.status(status), runId)) found.push(status);
      }
      return found;
    };
    expect(await where()).toEqual(['queued']);
    await store.start(runId, 0, ['a', 'b'], DEADLINE, T);
    expect(await where()).toEqual(['running']);
    await store.decide(runId, 'failed', failure, T);
    expect(await where()).toEqual(['failed']);
    await store.settle(runId, 0, new Map(), null, { status: 'failed', error: failure, generation: 0 }, T);
    await store.resume(runId, ['a', 'b', 'c'], new Map([['c', 2]]), TIMEOUT);
    expect(await where()).toEqual(['queued']);
  });

  it('counts snapshots by status where they are written and dropped', async () => {
    const runId = await settledFailedRun();
    expect(await counts(runId)).toEqual({
      'count:succeeded': '1',
      'count:failed': '1',
      'count:skipped': '1',
    });
    // Stored status first, so a script reads it without decoding the output.
    expect(await redis.hget(keysOf(runId).nodes, 'a')).toMatch(/^\{"status":"succeeded",/);
    await store.resume(runId, ['b', 'c'], new Map([['c', 1]]), TIMEOUT);
    expect(await counts(runId)).toEqual({
      'count:succeeded': '1',
      'count:failed': '0',
      'count:skipped': '0',
    });
  });

  it('counts the nodes a run ended without running', async () => {
    const runId = await createRun();
    await store.endUnstarted(runId, { code: 'cancelled', message: 'stopped' }, T);
    expect(await counts(runId)).toEqual({ 'count:cancelled': '3' });
    expect(JSON.parse((await redis.hget(keysOf(runId).nodes, 'a'))!)).toEqual(notRun('cancelled'));
  });

  it('starts a rerun with its origin’s snapshots, marked, counted and announced', async () => {
    const origin = randomUUID();
    const runId = randomUUID();
    const { events } = await withEvents(runId, () =>
      store.create({
        runId,
        graph,
        plan,
        input: null,
        timeoutSeconds: TIMEOUT,
        budget: {},
        metadata: undefined,
        createdAt: T,
        pending: new Map([['c', 1]]),
        rerun: {
          of: { runId: origin, from: 'b' },
          reused: new Map([['a', snapshot('succeeded', { x: 1 })]]),
        },
      }),
    );
    expect(brief(events)).toEqual([
      { type: 'run.queued' },
      { type: 'node.reused', nodeId: 'a', data: { status: 'succeeded', from: origin } },
    ]);
    const doc = (await store.document(runId))!;
    expect(doc.rerunOf).toEqual({ runId: origin, from: 'b' });
    expect(doc.nodes.a).toMatchObject({ status: 'succeeded', output: { x: 1 }, reusedFrom: origin });
    expect(doc.nodes.b).toMatchObject({ status: 'pending' });
    expect(await counts(runId)).toEqual({ 'count:succeeded': '1' });
    expect((await store.plan(runId))!.reusesSnapshots).toBe(true);
    for (const ttl of await ttls(allKeys(runId))) expect(ttl).toBeGreaterThan(RETENTION);
  });
});
