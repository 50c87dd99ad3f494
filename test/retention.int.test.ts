/** Finished BullMQ jobs go by policy; the run record stays, with its own TTL. */
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { runKeys } from '@tetraloop/core/state';
import { runToEnd, startStack, type Stack } from './support/stack.js';

let stack: Stack;
let redis: Redis;

beforeAll(async () => {
  stack = await startStack({
    env: { TETRALOOP_RUN_RETENTION_SECONDS: '1234', TETRALOOP_JOB_COMPLETED_COUNT: '2' },
  });
  redis = new Redis(stack.env.REDIS_URL!);
});
afterAll(async () => {
  await stack?.close();
  redis?.disconnect();
});

it('keeps at most the configured number of completed jobs, and the run record with its TTL', async () => {
  const nodes = Array.from({ length: 5 }, (_, i) => ({
    id: `n${i}`,
    kind: 'tool',
    tool: 'wait',
    args: { ms: 1 },
  }));
  const doc = await runToEnd(stack.url, { graph: { nodes } });
  expect(doc.status).toBe('succeeded');

  const tool = new Queue('tool', { connection: redis, prefix: stack.prefix });
  expect(await tool.getCompletedCount()).toBeLessThanOrEqual(2);
  await tool.close();

  const keys = runKeys(stack.prefix, doc.runId);
  for (const key of [keys.meta, keys.nodes]) {
    const ttl = await redis.ttl(key);
    expect(ttl).toBeGreaterThan(1200);
    expect(ttl).toBeLessThanOrEqual(1234);
  }
  const again = await fetch(`${stack.url}/v1/runs/${doc.runId}`);
  expect(again.status).toBe(200);
});
