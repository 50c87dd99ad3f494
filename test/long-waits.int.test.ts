/**
 * Runs that wait for weeks, through the API on a real Redis: a request may ask for a deadline up to
 * `TETRALOOP_MAX_WAIT_DAYS` (30 days here), past it is refused with 400 at `timeoutSeconds`, and a
 * wait node past it at its own field, with nothing run. While such a run waits, every key of its
 * record lives at least until its deadline; once it settles, the retention.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runKeyList, runKeys } from '@tetraloop/core/state';
import { post, postRun, startStack, untilNodeStatus, waitFor, type Stack } from './support/stack.js';

let stack: Stack;
let redis: Redis;
const DAY = 86_400;
const RETENTION = 3600;

beforeAll(async () => {
  stack = await startStack({ env: { TETRALOOP_RUN_RETENTION_SECONDS: String(RETENTION) } });
  redis = new Redis(stack.env.REDIS_URL!);
});
afterAll(async () => {
  redis?.disconnect();
  await stack?.close();
});

const issuesOf = (body: Record<string, unknown>) =>
  (body.error as { issues?: { path: string; message: string }[] }).issues;

describe('runs that wait for weeks', () => {
  it('keep their keys while they wait until the deadline, and the retention once settled', async () => {
    const posted = await postRun(stack.url, {
      timeoutSeconds: 20 * DAY,
      graph: { nodes: [{ id: 'approval', kind: 'wait', signal: 'approve', timeoutSeconds: 14 * DAY }] },
    });
    expect(posted.status).toBe(202);
    const runId = posted.body.runId as string;
    await untilNodeStatus(stack, runId, 'approval', 'waiting');
    const keys = runKeyList(runKeys(stack.prefix, runId));
    const deadlineAt = Number(await redis.hget(keys[0]!, 'deadlineAt'));
    expect(deadlineAt - Date.now()).toBeGreaterThan(20 * DAY * 1000 - 60_000);
    for (const key of keys) {
      if (!(await redis.exists(key))) continue;
      // At least the deadline plus the retention, counted from the run's start.
      expect(await redis.pexpiretime(key), key).toBeGreaterThanOrEqual(deadlineAt + RETENTION * 1000 - 1000);
    }
    expect((await post(stack.url, `/v1/runs/${runId}/signals/approve`, { approved: true })).status).toBe(202);
    expect((await waitFor(stack.url, runId)).status).toBe('succeeded');
    for (const key of keys) {
      if (!(await redis.exists(key))) continue;
      const ttl = await redis.pttl(key);
      expect(ttl, key).toBeGreaterThan((RETENTION - 60) * 1000);
      expect(ttl, key).toBeLessThanOrEqual(RETENTION * 1000);
    }
  });

  it('refuse a deadline past TETRALOOP_MAX_WAIT_DAYS, or a wait past it, at the field, before anything runs', async () => {
    const graph = { nodes: [{ id: 'j', kind: 'tool', tool: 'json', args: { value: 1 } }] };
    const late = await postRun(stack.url, { timeoutSeconds: 30 * DAY + 1, graph });
    expect(late.status).toBe(400);
    expect(late.body).toMatchObject({ error: { code: 'invalid_request' } });
    expect(issuesOf(late.body)).toEqual([
      { path: 'timeoutSeconds', message: 'must be at most 2592000 (30 days, TETRALOOP_MAX_WAIT_DAYS)' },
    ]);
    // Past what any deployment allows: the request's own schema.
    const never = await postRun(stack.url, { timeoutSeconds: 400 * DAY, graph });
    expect(never.status).toBe(400);
    expect(issuesOf(never.body)?.map((i) => i.path)).toEqual(['timeoutSeconds']);

    const sleep = await postRun(stack.url, {
      timeoutSeconds: 30 * DAY,
      graph: {
        nodes: [graph.nodes[0], { id: 'nap', kind: 'wait', forMs: 31 * DAY * 1000 }],
        edges: [['j', 'nap']],
      },
    });
    expect(sleep.status).toBe(400);
    expect(sleep.body).toMatchObject({ error: { code: 'invalid_graph' } });
    expect(issuesOf(sleep.body)).toEqual([
      { path: 'graph.nodes.1.forMs', message: 'must be at most 30 days (TETRALOOP_MAX_WAIT_DAYS)' },
    ]);
    const bad = await postRun(stack.url, {
      graph: { nodes: [{ id: 'nap', kind: 'wait', until: 'next monday' }] },
    });
    expect(bad.status).toBe(400);
    expect(issuesOf(bad.body)?.map((i) => i.path)).toEqual(['graph.nodes.0.until']);
  });
});
