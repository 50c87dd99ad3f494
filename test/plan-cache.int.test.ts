/**
 * The plan cache against a scripted planner (through the real `openai` SDK) and a real Redis: a
 * repeated task reuses its first plan without a planner call; a different input shape, a new
 * lessons version or TETRALOOP_PLAN_CACHE=off do not; a run that fails takes its plan out; a cached
 * plan that no longer validates is a miss; replans never read the cache.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inputShape } from '@tetraloop/core/planning';
import { MemoryStore, PlanCacheStore } from '@tetraloop/core/state';
import { metrics } from '@tetraloop/core/telemetry';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import { runToEnd, runToFinalized, startStack, type Stack } from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let stack: Stack;
let model: ModelServer;
let server: ToolServer;
let redis: Redis;

/** The graph the scripted planner answers with; replans get `replanned` when it is set. */
let plan: unknown = null;
let replanned: unknown = null;
const isPlannerCall = (r: ChatRequest): boolean =>
  (r.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema?.name === 'graph';
const isReplan = (r: ChatRequest): boolean =>
  r.messages.at(-1)?.content?.includes('The previous plan stopped') ?? false;
const plannerCalls = (): number => model.requests.filter(isPlannerCall).length;

beforeAll(async () => {
  server = await startToolServer();
  model = await startModelServer({
    script: (request) =>
      isPlannerCall(request)
        ? {
            content: JSON.stringify(isReplan(request) && replanned ? replanned : plan),
            usage: { promptTokens: 100, completionTokens: 50 },
          }
        : { content: 'ok' },
  });
  stack = await startStack({
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_PLANNER_MODEL: 'scripted-planner',
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      // Lessons are read afresh for every plan, so a new lessons version counts at once.
      TETRALOOP_LESSON_REFRESH_MS: '0',
    },
  });
  redis = new Redis(stack.env.REDIS_URL!);
});
afterAll(async () => {
  redis?.disconnect();
  await stack?.close();
  await model?.close();
  await server?.close();
});

/** A one-node plan: the http tool fetches the URL the run's input names. */
const fetchPlan = (id: string) => ({
  nodes: [{ id, kind: 'tool', tool: 'http', args: { url: '{{input.url}}' } }],
  edges: [],
});
const work = (node: string): string => `${server.url}/work?node=${node}&ms=1`;

/** The plan cache entries of `agentId` in this stack. */
async function entries(agentId: string, prefix = stack.prefix): Promise<string[]> {
  const found: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:plancache:{a:${agentId}}:*`);
    cursor = next;
    found.push(...keys);
  } while (cursor !== '0');
  return found;
}

async function cacheCount(outcome: 'hit' | 'miss' | 'stale'): Promise<number> {
  const { values } = await metrics.planCache.get();
  return values.find((v) => v.labels.outcome === outcome)?.value ?? 0;
}

describe('the plan cache', () => {
  it('computes the input shape from types, not values, with sorted keys', () => {
    expect(inputShape({ b: [1, 2], a: 'x', c: { z: null, y: true } })).toEqual({
      a: 'string',
      b: ['number'],
      c: { y: 'boolean', z: 'null' },
    });
    expect(JSON.stringify(inputShape({ b: 1, a: 'x' }))).toBe(JSON.stringify(inputShape({ a: 'y', b: 2 })));
    expect(inputShape([1, 'a', 2])).toEqual(['number', 'string']);
    expect(inputShape([])).toEqual([]);
  });

  it('lets a repeated task skip the planner: one planner call for two runs, no planner tokens on the hit', async () => {
    plan = fetchPlan('hit-a');
    const calls = plannerCalls();
    const [hits, misses] = [await cacheCount('hit'), await cacheCount('miss')];

    const first = await runToEnd(stack.url, {
      task: 'Fetch the page',
      agentId: 'repeat',
      input: { url: work('hit-a') },
    });
    expect(first.status).toBe('succeeded');
    expect(first.planning).toMatchObject({ cache: 'miss', planVersion: 0 });
    expect(first.planning?.cachedFrom).toBeUndefined();
    expect(first.usage).toMatchObject({ promptTokens: 100, completionTokens: 50, modelCalls: 1 });
    const [key] = await entries('repeat');
    expect(key).toMatch(new RegExp(`^${stack.prefix}:plancache:\\{a:repeat\\}:[0-9a-f]{32}$`));
    const ttl = await redis.ttl(key!);
    expect(ttl).toBeGreaterThan(3500);
    expect(ttl).toBeLessThanOrEqual(3600);
    const entry = JSON.parse((await redis.get(key!))!) as Record<string, unknown>;
    expect(entry).toMatchObject({ graph: fetchPlan('hit-a'), runId: first.runId });
    expect(Date.parse(entry.createdAt as string)).not.toBeNaN();

    // Same task (up to case and spaces), other values of the same input shape.
    const second = await runToEnd(stack.url, {
      task: '  fetch the   PAGE ',
      agentId: 'repeat',
      input: { url: `${work('hit-a')}&again=1` },
    });
    expect(second.status).toBe('succeeded');
    expect(second.planning).toMatchObject({ cache: 'hit', cachedFrom: first.runId, planVersion: 0 });
    expect(second.graph).toEqual(first.graph);
    expect(second.usage).toMatchObject({
      promptTokens: 0,
      completionTokens: 0,
      totalTokens: 0,
      modelCalls: 0,
    });
    expect(server.hitsOf('hit-a')).toHaveLength(2);
    expect(plannerCalls() - calls).toBe(1);
    expect(await cacheCount('hit')).toBe(hits + 1);
    expect(await cacheCount('miss')).toBe(misses + 1);
    // The entry is still the first run's.
    expect(await entries('repeat')).toEqual([key]);

    // Another agent has a cache of its own.
    const other = await runToEnd(stack.url, {
      task: 'Fetch the page',
      agentId: 'repeat-other',
      input: { url: work('hit-a') },
    });
    expect(other.planning).toMatchObject({ cache: 'miss' });
    expect(plannerCalls() - calls).toBe(2);
  });

  it('misses for a different input shape', async () => {
    plan = fetchPlan('shape-a');
    const calls = plannerCalls();
    const a = await runToEnd(stack.url, {
      task: 'shape task',
      agentId: 'shape',
      input: { url: work('shape-a') },
    });
    const b = await runToEnd(stack.url, {
      task: 'shape task',
      agentId: 'shape',
      input: { url: work('shape-a'), extra: 1 },
    });
    expect([a.planning?.cache, b.planning?.cache]).toEqual(['miss', 'miss']);
    expect(plannerCalls() - calls).toBe(2);
    expect(await entries('shape')).toHaveLength(2);
    // Each shape now hits its own entry.
    const c = await runToEnd(stack.url, {
      task: 'shape task',
      agentId: 'shape',
      input: { extra: 2, url: work('shape-a') },
    });
    expect(c.planning).toMatchObject({ cache: 'hit', cachedFrom: b.runId });
    expect(plannerCalls() - calls).toBe(2);
  });

  it('misses once the agent’s lessons version changed', async () => {
    plan = fetchPlan('lessons-a');
    const calls = plannerCalls();
    const body = { task: 'lessons task', agentId: 'lessons', input: { url: work('lessons-a') } };
    const a = await runToEnd(stack.url, body);
    expect(a.planning).toMatchObject({ cache: 'miss', lessonsVersion: 0 });
    expect((await runToEnd(stack.url, body)).planning).toMatchObject({ cache: 'hit' });

    const memory = new MemoryStore(redis, { prefix: stack.prefix, hotRuns: 200, useBonus: 0.05 });
    expect(await memory.saveReflection('lessons', [], true, new Date().toISOString())).toBe(1);
    const b = await runToEnd(stack.url, body);
    expect(b.planning).toMatchObject({ cache: 'miss', lessonsVersion: 1 });
    expect(plannerCalls() - calls).toBe(2);
    expect((await runToEnd(stack.url, body)).planning).toMatchObject({ cache: 'hit', cachedFrom: b.runId });
  });

  it('takes the plan of a failed run out: the next run asks the planner', async () => {
    plan = fetchPlan('fail-a');
    const calls = plannerCalls();
    const task = { task: 'fail task', agentId: 'failing' };

    // A run that stored the plan fails: its entry goes.
    // Its finalize pass takes the entry out after settling the run: waited for, not the settle.
    const failed = await runToFinalized(stack, {
      ...task,
      input: { url: `${server.url}/status/400?node=fail-a` },
    });
    expect(failed.status).toBe('failed');
    expect(failed.planning).toMatchObject({ cache: 'miss' });
    expect(await entries('failing')).toEqual([]);

    // The next run asks the planner again and stores its plan; a run that hit it and fails removes it.
    const ok = await runToEnd(stack.url, { ...task, input: { url: work('fail-a') } });
    expect(ok.status).toBe('succeeded');
    expect(ok.planning).toMatchObject({ cache: 'miss' });
    expect(plannerCalls() - calls).toBe(2);
    expect(await entries('failing')).toHaveLength(1);
    const hitThenFailed = await runToFinalized(stack, {
      ...task,
      input: { url: `${server.url}/status/400?node=fail-a` },
    });
    expect(hitThenFailed.status).toBe('failed');
    expect(hitThenFailed.planning).toMatchObject({ cache: 'hit', cachedFrom: ok.runId });
    expect(await entries('failing')).toEqual([]);

    const again = await runToEnd(stack.url, { ...task, input: { url: work('fail-a') } });
    expect(again.planning).toMatchObject({ cache: 'miss' });
    expect(plannerCalls() - calls).toBe(3);
  });

  it('treats a cached plan that no longer validates as a miss, and replaces it', async () => {
    plan = fetchPlan('stale-a');
    const body = { task: 'stale task', agentId: 'stale', input: { url: work('stale-a') } };
    const first = await runToEnd(stack.url, body);
    const [key] = await entries('stale');
    const calls = plannerCalls();
    const stale = await cacheCount('stale');

    // A plan the agent may no longer run: a tool it does not have.
    await redis.set(
      key!,
      JSON.stringify({
        graph: { nodes: [{ id: 'x', kind: 'tool', tool: 'teleport', args: {} }], edges: [] },
        createdAt: new Date().toISOString(),
        runId: first.runId,
      }),
      'EX',
      3600,
    );
    const second = await runToEnd(stack.url, body);
    expect(second.status).toBe('succeeded');
    expect(second.planning).toMatchObject({ cache: 'miss' });
    expect(plannerCalls() - calls).toBe(1);
    expect(await cacheCount('stale')).toBe(stale + 1);
    expect(JSON.parse((await redis.get(key!))!)).toMatchObject({
      graph: fetchPlan('stale-a'),
      runId: second.runId,
    });

    // Something that is not an entry at all.
    await redis.set(key!, 'not json', 'EX', 3600);
    const third = await runToEnd(stack.url, body);
    expect(third.planning).toMatchObject({ cache: 'miss' });
    expect(plannerCalls() - calls).toBe(2);
    expect(await cacheCount('stale')).toBe(stale + 2);
    expect((await runToEnd(stack.url, body)).planning).toMatchObject({
      cache: 'hit',
      cachedFrom: third.runId,
    });
  });

  it('never reads it for a replan', async () => {
    // The first plan exhausts the tool-call budget; the replan finishes the work.
    plan = {
      nodes: [
        { id: 'rp-a', kind: 'tool', tool: 'http', args: { url: work('rp-a') } },
        { id: 'rp-b', kind: 'tool', tool: 'http', args: { url: work('rp-b') } },
      ],
      edges: [['rp-a', 'rp-b']],
    };
    replanned = {
      nodes: [
        { id: 'rp-a', kind: 'tool', tool: 'http', args: { url: work('rp-a') } },
        { id: 'rp-c', kind: 'tool', tool: 'json', args: { value: 'done' } },
      ],
      edges: [['rp-a', 'rp-c']],
    };
    try {
      const body = { task: 'replan task', agentId: 'replans', budget: { toolCalls: 1 } };
      const calls = plannerCalls();
      const first = await runToEnd(stack.url, body);
      expect(first.status).toBe('succeeded');
      expect(first.replans).toBe(1);
      // The current planning record is the replan's, which has nothing to do with the cache.
      expect(first.planning).toMatchObject({ planVersion: 1 });
      expect(first.planning?.cache).toBeUndefined();
      expect(plannerCalls() - calls).toBe(2);

      // The first plan is cached; the replan is asked for again.
      const second = await runToEnd(stack.url, body);
      expect(second.status).toBe('succeeded');
      expect(second.replans).toBe(1);
      expect(plannerCalls() - calls).toBe(3);
      expect(model.requests.filter(isPlannerCall).slice(-1).every(isReplan)).toBe(true);
    } finally {
      replanned = null;
    }
  });
});

describe('with TETRALOOP_PLAN_CACHE=off', () => {
  it('asks the planner for every run and stores nothing', async () => {
    const off = await startStack({
      env: { OPENAI_BASE_URL: model.url, TETRALOOP_MODEL_MAX_RETRIES: '0', TETRALOOP_PLAN_CACHE: 'off' },
    });
    try {
      plan = fetchPlan('off-a');
      const calls = plannerCalls();
      const body = { task: 'off task', agentId: 'off', input: { url: work('off-a') } };
      const a = await runToEnd(off.url, body);
      const b = await runToEnd(off.url, body);
      expect([a.status, b.status]).toEqual(['succeeded', 'succeeded']);
      expect(a.planning?.cache).toBeUndefined();
      expect(b.planning?.cache).toBeUndefined();
      expect(b.usage.modelCalls).toBe(1);
      expect(plannerCalls() - calls).toBe(2);
      expect(await entries('off', off.prefix)).toEqual([]);
    } finally {
      await off.close();
    }
  });
});

describe('PlanCacheStore.forget', () => {
  it('removes an entry only while it names the given run', async () => {
    const cache = new PlanCacheStore(redis, { prefix: stack.prefix, enabled: true, ttlSeconds: 60 });
    const key = cache.keyOf('forget', 'h1');
    await cache.put(key, { graph: fetchPlan('f'), createdAt: new Date().toISOString(), runId: 'run-b' });
    expect(await cache.get(key)).toMatchObject({ runId: 'run-b' });
    expect(await redis.ttl(key)).toBeLessThanOrEqual(60);
    // Another run's entry (written since) stays.
    expect(await cache.forget(key, 'run-a')).toBe(false);
    expect(await redis.exists(key)).toBe(1);
    expect(await cache.forget(key, 'run-b')).toBe(true);
    expect(await redis.exists(key)).toBe(0);
    expect(await cache.forget(key, 'run-b')).toBe(false);
    // Without a run id, or over something unreadable, whatever is there goes.
    await redis.set(key, 'not json');
    expect(await cache.get(key)).toBe('corrupt');
    expect(await cache.forget(key, 'run-b')).toBe(true);
    await redis.set(key, '{}');
    expect(await cache.get(key)).toBe('corrupt');
    expect(await cache.forget(key)).toBe(true);
  });
});
