/**
 * A worker that gets SIGTERM mid-node stops taking jobs, finishes the node (exactly once) and
 * exits; its metrics port answers probes and Prometheus until then, with the queue and Redis
 * gauges of its own.
 */
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { freePort } from '@tetraloop/core/runtime';
import { spawnTetraloop, stderrMatches, type Spawned } from '../support/processes.js';
import { postRun, startStack, waitFor, type Stack } from '../support/stack.js';
import { startToolServer, type ToolServer } from '../support/tool-server.js';

let stack: Stack;
let server: ToolServer;
let worker: Spawned | undefined;

beforeAll(async () => {
  server = await startToolServer();
  stack = await startStack({ pools: ['plan'] });
});
afterAll(async () => {
  await worker?.kill('SIGKILL');
  await stack?.close();
  await server?.close();
});

it('finishes the node in flight exactly once on SIGTERM, then exits', async () => {
  const port = await freePort();
  worker = spawnTetraloop(['worker', '--pool', 'tool', '--metrics-port', String(port)], stack.env);
  await stderrMatches(worker, /worker ready/);
  const base = `http://127.0.0.1:${port}`;
  expect((await fetch(`${base}/healthz`)).status).toBe(200);
  expect((await fetch(`${base}/readyz`)).status).toBe(200);

  const posted = await postRun(stack.url, {
    graph: {
      nodes: [
        { id: 'long', kind: 'tool', tool: 'http', args: { url: `${server.url}/work?node=long&ms=1500` } },
      ],
    },
  });
  await server.hitCount('long', 1);
  worker.child.kill('SIGTERM');
  expect(await worker.exited).toEqual({ code: 0, signal: null });
  const doc = await waitFor(stack.url, posted.body.runId as string);
  expect(doc.status).toBe('succeeded');
  expect(server.hitsOf('long')).toHaveLength(1);
  expect(doc.nodes.long!.attempts).toHaveLength(1);
});

it('reports Redis and the queues from the worker itself, with no API process of its own', async () => {
  const port = await freePort();
  const alone = spawnTetraloop(['worker', '--pool', 'sense', '--metrics-port', String(port)], {
    ...stack.env,
    TETRALOOP_QUEUE_CHECK_MS: '100',
  });
  try {
    await stderrMatches(alone, /worker ready/);
    // The worker's own registry: the gauges an alert or the autoscaler reads while the API is down.
    // Scraped until its first queue check (every 100 ms here) has set the gauges.
    const text = await vi.waitFor(
      async () => {
        const scraped = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
        expect(scraped).toMatch(/^tetraloop_redis_up 1$/m);
        return scraped;
      },
      { timeout: 10_000, interval: 100 },
    );
    for (const queue of ['sense', 'plan', 'tool', 'reflect']) {
      expect(text).toMatch(
        new RegExp(`^tetraloop_queue_jobs\\{queue="${queue}",state="waiting"\\} \\d+$`, 'm'),
      );
      expect(text).toMatch(new RegExp(`^tetraloop_queue_stalled\\{queue="${queue}"\\} 0$`, 'm'));
    }
  } finally {
    await alone.kill('SIGKILL');
  }
});
