/**
 * How long the record of a session run waiting in its lane lives, on a real Redis with the real
 * API and pools: the run ahead of it may wait up to `TETRALOOP_MAX_WAIT_DAYS` (a signal, an
 * approval, a budget decision, a time), so a run waiting behind it keeps its keys that long plus
 * the retention from its creation, and again from each start of the run ahead of it, however
 * little was left; started and settled, it gets its own deadline's, then the retention.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runJobId } from '@tetraloop/core/queues';
import { runKeyList, runKeys } from '@tetraloop/core/state';
import { startModelServer, type ChatRequest, type ModelServer } from './support/model-server.js';
import { followJobEvents, laneIdle, post, startStack, waitFor, type Stack } from './support/stack.js';

let stack: Stack;
let model: ModelServer;
let redis: Redis;
const RETENTION = 3600;
const LANE_TTL_MS = (RETENTION + 30 * 86_400) * 1000;
/** A message `hold <n>` is answered once the test releases `n`. */
const releases = new Map<string, () => void>();
const held = new Map<string, Promise<void>>();
const hold = (n: string): void => {
  held.set(n, new Promise((resolve) => releases.set(n, resolve)));
};
const lastUser = (r: ChatRequest): string =>
  [...r.messages].reverse().find((m) => m.role === 'user')?.content ?? '';

beforeAll(async () => {
  hold('1');
  hold('2');
  model = await startModelServer({
    script: async (r) => {
      const n = /^hold (\d+)$/.exec(lastUser(r))?.[1];
      if (n) await held.get(n);
      return { content: `done: ${lastUser(r)}` };
    },
  });
  stack = await startStack({
    pools: ['sense', 'plan', 'tool'],
    env: {
      OPENAI_BASE_URL: model.url,
      TETRALOOP_MODEL_MAX_RETRIES: '0',
      TETRALOOP_RUN_RETENTION_SECONDS: String(RETENTION),
    },
  });
  redis = new Redis(stack.env.REDIS_URL!);
});
afterAll(async () => {
  for (const release of releases.values()) release();
  redis?.disconnect();
  await stack?.close();
  await model?.close();
});

const say = async (text: string): Promise<{ runId: string; queued: boolean }> => {
  const res = await post(stack.url, '/v1/sessions/lane-ttl/messages', { text, mode: 'followup' });
  expect(res.status).toBe(202);
  return res.body as { runId: string; queued: boolean };
};
const keysOf = (runId: string): string[] => runKeyList(runKeys(stack.prefix, runId));
/**
 * The shortest PTTL among the run's keys that exist: a queued task run has its hash, live, events
 * and aux (pending comes with its plan, nodes with its first snapshot); none is without a TTL.
 */
const pttlOf = async (runId: string): Promise<number> => {
  const ttls = (await Promise.all(keysOf(runId).map((k) => redis.pttl(k)))).filter((t) => t !== -2);
  expect(ttls.length, 'the run exists').toBeGreaterThanOrEqual(4);
  expect(
    ttls.filter((t) => t === -1),
    'keys without a TTL',
  ).toEqual([]);
  return Math.min(...ttls);
};

it('a run waiting in its lane lives as long as the runs ahead of it may, renewed at each of their starts', async () => {
  const first = await say('hold 1');
  expect(first.queued).toBe(false);
  await model.received((r) => lastUser(r) === 'hold 1');
  const second = await say('hold 2');
  const third = await say('third');
  expect([second.queued, third.queued]).toEqual([true, true]);
  // From its creation: the longest the run ahead may last, plus the retention; not its own
  // deadline (600 s) plus the retention.
  for (const { runId } of [second, third]) {
    expect(await pttlOf(runId)).toBeGreaterThan(LANE_TTL_MS - 60_000);
    expect(await pttlOf(runId)).toBeLessThanOrEqual(LANE_TTL_MS);
  }

  // As if weeks had passed while the first run waited: the third run has a minute left.
  for (const key of keysOf(third.runId)) await redis.pexpire(key, 60_000);
  const plan = await followJobEvents(stack, ['plan']);
  try {
    releases.get('1')!();
    // The first run's root job completes once it has moved the lane on to the second run.
    await plan.next(
      (e) => e.jobId === runJobId(first.runId) && e.event === 'completed',
      Date.now() + 20_000,
      'the first run done',
    );
  } finally {
    plan.close();
  }
  await model.received((r) => lastUser(r) === 'hold 2');
  // The second run started and may wait as long as a run may: the third is kept that long again.
  expect(await pttlOf(third.runId)).toBeGreaterThan(LANE_TTL_MS - 60_000);

  releases.get('2')!();
  for (const { runId } of [first, second, third])
    expect((await waitFor(stack.url, runId)).status).toBe('succeeded');
  await laneIdle(stack, 'lane-ttl');
  // Settled, the retention.
  for (const key of keysOf(third.runId)) {
    if (!(await redis.exists(key))) continue;
    expect(await redis.pttl(key), key).toBeLessThanOrEqual(RETENTION * 1000);
    expect(await redis.pttl(key), key).toBeGreaterThan((RETENTION - 60) * 1000);
  }
});
