/**
 * A sleeping wait node survives a restart of Redis itself: the sleep is a delayed BullMQ job and
 * its wake time is in the run's record, both in Redis's append-only file. Redis is stopped while
 * the node sleeps and started again on the same port and data directory; the API and the workers
 * reconnect, and the run wakes once, at the wake time kept before the restart, and finishes.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startRedisServer, type RedisServer } from '@tetraloop/core/runtime';
import { postRun, readEvents, startStack, untilEvent, waitFor, type Stack } from '../support/stack.js';

let redis: RedisServer;
let stack: Stack;
const dataDir = mkdtempSync(join(tmpdir(), 'tetraloop-sleep-redis-'));

beforeAll(async () => {
  // Every write fsynced before Redis answers it, so stopping Redis loses nothing acknowledged.
  redis = await startRedisServer({ dataDir, appendfsync: 'always' });
  stack = await startStack({ env: { REDIS_URL: redis.url } });
});
afterAll(async () => {
  await stack?.close();
  await redis?.stop();
});

/** Polls the API's readiness probe until it answers 200: its Redis connection is back. */
async function untilReady(url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    const res = await fetch(`${url}/readyz`).catch(() => null);
    if (res?.status === 200) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('the API did not become ready again');
}

it('sleeps 3 s across a restart of Redis and wakes once', async () => {
  const posted = await postRun(stack.url, {
    graph: {
      nodes: [
        { id: 'nap', kind: 'wait', forMs: 3000 },
        { id: 'after', kind: 'tool', tool: 'json', args: { value: { $ref: 'nap.output' } } },
      ],
      edges: [['nap', 'after']],
    },
  });
  expect(posted.status).toBe(202);
  const runId = posted.body.runId as string;
  const sleeping = await untilEvent(stack.url, runId, (e) => e.data.type === 'node.sleeping', {
    what: 'node.sleeping',
  });
  const until = (sleeping.data.data as { until: string }).until;

  const port = Number(new URL(redis.url).port);
  await redis.stop();
  redis = await startRedisServer({ port, dataDir, appendfsync: 'always' });
  await untilReady(stack.url);

  const doc = await waitFor(stack.url, runId, 60_000);
  expect(doc.status).toBe('succeeded');
  expect(doc.nodes.nap).toMatchObject({ status: 'succeeded', output: { until } });
  expect(doc.nodes.nap!.attempts).toHaveLength(1);
  expect(doc.output).toEqual({ after: { until } });
  const events = (await readEvents(stack.url, runId)).map((e) => e.data);
  const of = (type: string) => events.filter((e) => e.type === type && e.nodeId === 'nap');
  expect(of('node.sleeping')).toHaveLength(1);
  expect(of('node.woke')).toHaveLength(1);
  expect(of('node.woke')[0]!.ts).toBeGreaterThanOrEqual(Date.parse(until));
});
