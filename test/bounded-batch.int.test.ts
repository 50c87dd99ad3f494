/**
 * L3 runs a bounded batch (seed `000_*` §2.3): a run's `maxParallelNodes` caps its node jobs
 * running at once, and a window-mode run's cycle budget hands what a window has not started back
 * to the planner. Calls are held at the loopback tool server's `/gate` until the test opens them,
 * so every check is structural: which calls were in flight together, which events came.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runNodeSlotKeys } from '@tetraloop/core/state';
import type { ModelServer } from './support/model-server.js';
import { startPlannerStack, type PlannerStack } from './support/planner-stack.js';
import { postRun, readEvents, untilEvent, waitFor, type Stack } from './support/stack.js';
import { maxOverlap, type Hit, type ToolServer } from './support/tool-server.js';

let planned: PlannerStack;
let stack: Stack;
let model: ModelServer;
let server: ToolServer;

beforeAll(async () => {
  // The deployment's cap, for runs that set none.
  planned = await startPlannerStack({ schemas: ['window'], env: { TETRALOOP_MAX_PARALLEL_NODES: '3' } });
  ({ stack, model, server } = planned);
});
afterAll(() => planned?.close());

const gate = (id: string) => ({
  id,
  kind: 'tool',
  tool: 'http',
  args: { url: `${server.url}/gate?node=${id}` },
});
const gateHits = (prefix: string): Hit[] =>
  server.hits.filter((h) => h.path === '/gate' && h.node.startsWith(prefix));
const inFlight = (prefix: string): Hit[] => gateHits(prefix).filter((h) => h.end === undefined);

/**
 * Runs a fan-out of `count` held calls named `<prefix><i>`, opening one held call at a time once
 * `cap` are in flight, until all ran; answers the run's id.
 */
async function drainFanOut(prefix: string, count: number, cap: number, body: Record<string, unknown>) {
  const ids = Array.from({ length: count }, (_, i) => `${prefix}${i}`);
  const posted = await postRun(stack.url, {
    graph: { nodes: ids.map(gate) },
    ...body,
  });
  expect(posted.status).toBe(202);
  for (let opened = 0; opened < count; opened++) {
    // As many as the cap (or as are left) are held; the others wait for a slot.
    await expect
      .poll(() => inFlight(prefix).length, { timeout: 20_000, interval: 20 })
      .toBe(Math.min(cap, count - opened));
    server.openGate(inFlight(prefix)[0]!.node);
  }
  return posted.body.runId as string;
}

describe('maxParallelNodes', () => {
  it("runs at most the run's cap of its nodes at once, the others waiting queued, and keeps nothing after", async () => {
    const runId = await drainFanOut('cap-', 6, 2, { maxParallelNodes: 2 });
    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('succeeded');
    expect(gateHits('cap-')).toHaveLength(6);
    expect(maxOverlap(gateHits('cap-'))).toBe(2);
    // Each node ran once: a job that waited for a slot began its node only when it got one.
    const events = await readEvents(stack.url, runId);
    expect(events.filter((e) => e.data.type === 'node.started')).toHaveLength(6);
    // The run's slot sets go with it: the last node's job drops them after the settle it made.
    const keys = runNodeSlotKeys(stack.prefix, runId);
    const redis = new Redis(stack.env.REDIS_URL!);
    try {
      await expect
        .poll(() => redis.exists(keys.running, keys.waiting), { timeout: 10_000, interval: 20 })
        .toBe(0);
    } finally {
      redis.disconnect();
    }
  });

  it("takes the deployment's cap when the request sets none", async () => {
    const runId = await drainFanOut('dflt-', 5, 3, {});
    expect((await waitFor(stack.url, runId)).status).toBe('succeeded');
    expect(maxOverlap(gateHits('dflt-'))).toBe(3);
  });

  it('refuses a cap below 1 at the field, and a cycle budget outside window mode', async () => {
    const graph = { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] };
    const zero = await postRun(stack.url, { graph, maxParallelNodes: 0 });
    expect(zero.status).toBe(400);
    expect(JSON.stringify(zero.body)).toContain('maxParallelNodes');
    const budget = await postRun(stack.url, { graph, cycleBudgetMs: 1000 });
    expect(budget.status).toBe(400);
    expect(JSON.stringify(budget.body)).toMatch(/cycleBudgetMs.*only window mode takes this field/);
  });
});

describe('a window cycle budget', () => {
  it('hands what the window has not started back to the planner when the budget runs out', async () => {
    planned.plan(
      // Two independent held calls, one slot: one runs, the other waits queued for it.
      { nodes: [gate('cb-a'), gate('cb-b')], edges: [], goalReached: false },
      {
        nodes: [{ id: 'cb-done', kind: 'tool', tool: 'json', args: { value: 'done' } }],
        edges: [],
        goalReached: true,
      },
    );
    const before = model.requests.length;
    const posted = await postRun(stack.url, {
      task: 'two held calls',
      mode: 'window',
      maxParallelNodes: 1,
      cycleBudgetMs: 300,
    });
    expect(posted.status).toBe(202);
    const runId = posted.body.runId as string;
    await expect.poll(() => inFlight('cb-').length, { timeout: 20_000, interval: 20 }).toBe(1);
    const first = inFlight('cb-')[0]!.node;
    const second = first === 'cb-a' ? 'cb-b' : 'cb-a';
    // The budget runs out while the first call is held: the run asks for its next window.
    const requested = await untilEvent(stack.url, runId, (e) => e.data.type === 'replan.requested', {
      what: 'replan.requested',
    });
    expect(JSON.stringify(requested.data)).toContain('cycle_budget');
    // The running node finishes; the queued one, given its slot, does not start.
    server.openGate(first);
    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('succeeded');
    // The completed call carries over into the next window; the deferred one is gone.
    expect(Object.keys(doc.output ?? {}).sort()).toEqual(['cb-done', first].sort());
    expect(gateHits(second)).toHaveLength(0);
    const events = await readEvents(stack.url, runId);
    const deferred = events.find((e) => e.data.type === 'node.deferred');
    expect(deferred?.data).toMatchObject({ nodeId: second, data: { reason: 'cycle_budget' } });
    const calls = planned.plannerRequests(before);
    expect(calls).toHaveLength(2);
    const next = calls[1]!.messages.find((m) => m.role === 'user')!.content!;
    expect(next).toContain('cycle_budget: window 1 ran past its cycle budget of 300 ms');
    expect(next).toContain(`- ${second}: did not run`);
    expect(doc.nodes[first]).toMatchObject({ status: 'succeeded' });
  });

  it('lets a running map finish its items when the budget runs out', async () => {
    planned.plan(
      {
        nodes: [
          {
            id: 'cm',
            kind: 'map',
            over: { $ref: 'input.items' },
            concurrency: 1,
            node: { kind: 'tool', tool: 'http', args: { url: `${server.url}/gate?node={{item}}` } },
          },
        ],
        edges: [],
        goalReached: false,
      },
      {
        nodes: [{ id: 'cm-done', kind: 'tool', tool: 'json', args: { value: 'done' } }],
        edges: [],
        goalReached: true,
      },
    );
    const posted = await postRun(stack.url, {
      task: 'a map past its budget',
      mode: 'window',
      cycleBudgetMs: 300,
      input: { items: ['cm-0', 'cm-1', 'cm-2'] },
    });
    expect(posted.status).toBe(202);
    const runId = posted.body.runId as string;
    // The budget runs out while the map's first item is held and the others wait their turn.
    await expect.poll(() => inFlight('cm-').length, { timeout: 20_000, interval: 20 }).toBe(1);
    await untilEvent(stack.url, runId, (e) => e.data.type === 'replan.requested', {
      what: 'replan.requested',
    });
    for (const item of ['cm-0', 'cm-1', 'cm-2']) server.openGate(item);
    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('succeeded');
    // Every item ran, once: none was deferred as if it were a node of its own.
    expect(gateHits('cm-').map((h) => h.node)).toEqual(['cm-0', 'cm-1', 'cm-2']);
    const map = doc.nodes.cm as { status: string; output?: unknown[] };
    expect(map.status).toBe('succeeded');
    expect(map.output).toHaveLength(3);
    expect(map.output).not.toContain(null);
  });
});
