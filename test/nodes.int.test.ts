/** Loop, wait and nested-graph nodes, and loop suspicion, on a real Redis. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/core/domain';
import {
  post,
  postRun,
  readEvents,
  runToEnd,
  startStack,
  untilNodeStatus,
  waitFor,
  type Stack,
} from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

let stack: Stack;
let server: ToolServer;

beforeAll(async () => {
  server = await startToolServer();
  // One tool slot, so "holds no worker slot" is visible; fast backoff, so loop suspicion is quick.
  stack = await startStack({
    env: {
      TETRALOOP_TOOL_CONCURRENCY: '1',
      TETRALOOP_BACKOFF_BASE_MS: '20',
    },
  });
});
afterAll(async () => {
  await stack?.close();
  await server?.close();
});

const url = (path: string, node: string): string =>
  `${server.url}${path}${path.includes('?') ? '&' : '?'}node=${node}`;

describe('loop nodes', () => {
  it('repeat until the exit condition holds', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          {
            id: 'poll',
            kind: 'loop',
            body: { tool: 'http', args: { url: url('/count', 'poll') } },
            until: { path: 'output.body.count', gte: 3 },
            maxIterations: 10,
            intervalMs: 50,
          },
        ],
      },
    });
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.poll).toMatchObject({
      status: 'succeeded',
      output: { last: { status: 200, body: { count: 3 } }, iterations: 3, stoppedBy: 'condition' },
    });
    const hits = server.hitsOf('poll');
    expect(hits).toHaveLength(3);
    // The declared interval separates iterations.
    expect(hits[1]!.start - hits[0]!.end!).toBeGreaterThanOrEqual(45);
  });

  it('stop at maxIterations when the condition never holds', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          {
            id: 'capped',
            kind: 'loop',
            body: { tool: 'http', args: { url: url('/status/503', 'capped') } },
            until: { path: 'output.status', equals: 200 },
            maxIterations: 3,
          },
        ],
      },
    });
    expect(doc.nodes.capped).toMatchObject({
      status: 'succeeded',
      output: { last: null, lastError: { code: 'server' }, iterations: 3, stoppedBy: 'maxIterations' },
    });
    expect(server.hitsOf('capped')).toHaveLength(3);
  });
});

describe('loop nodes over a nested graph', () => {
  it('run each iteration as a child run until the condition holds', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          {
            id: 'rounds',
            kind: 'loop',
            body: {
              input: { tag: 'x' },
              graph: {
                nodes: [
                  {
                    id: 'hit',
                    kind: 'tool',
                    tool: 'http',
                    args: { url: url('/count?tag={{input.tag}}', 'gl') },
                  },
                  {
                    id: 'seen',
                    kind: 'tool',
                    tool: 'json',
                    args: { value: { $ref: 'hit.output.body.count' } },
                  },
                ],
                edges: [['hit', 'seen']],
              },
            },
            until: { path: 'output.seen', gte: 2 },
            maxIterations: 5,
          },
        ],
      },
    });
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.rounds).toMatchObject({
      status: 'succeeded',
      output: { last: { seen: 2 }, iterations: 2, stoppedBy: 'condition' },
    });
    expect(server.hitsOf('gl')).toHaveLength(2);
    // Each iteration is a run of its own, linked to its parent.
    const iterationEvents = (await readEvents(stack.url, doc.runId)).filter(
      (e) => e.data.type === 'node.iteration',
    );
    const childIds = iterationEvents.map((e) => (e.data.data as { runId: string }).runId);
    expect(childIds).toHaveLength(2);
    const child = (await fetch(`${stack.url}/v1/runs/${childIds[0]}`).then((r) => r.json())) as RunDocument;
    expect(child).toMatchObject({
      status: 'succeeded',
      metadata: { parentRunId: doc.runId, parentNodeId: 'rounds', iteration: 1 },
    });
    expect(doc.usage.toolCalls).toBe(4);
  });

  it('cancel their child run when the parent run is cancelled', async () => {
    const posted = await postRun(stack.url, {
      graph: {
        nodes: [
          {
            id: 'stuck',
            kind: 'loop',
            body: {
              graph: {
                nodes: [
                  {
                    id: 'h',
                    kind: 'tool',
                    tool: 'http',
                    args: { url: url('/hang', 'gl-hang') },
                    timeoutMs: 60_000,
                  },
                ],
              },
            },
            maxIterations: 3,
          },
        ],
      },
    });
    const runId = posted.body.runId as string;
    await server.hitCount('gl-hang', 1);
    expect((await post(stack.url, `/v1/runs/${runId}/cancel`)).status).toBe(202);
    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('cancelled');
    const childEvents = (await readEvents(stack.url, runId)).filter((e) => e.data.type === 'node.iteration');
    expect(childEvents).toHaveLength(0);
    expect(server.hitsOf('gl-hang')).toHaveLength(1);
    expect(server.hitsOf('gl-hang')[0]?.end).toBeDefined();
  });
});

describe('wait nodes', () => {
  it('wait for a signal without holding a worker slot; the signal body is the output', async () => {
    const posted = await postRun(stack.url, {
      graph: {
        nodes: [
          { id: 'approval', kind: 'wait', signal: 'approve', timeoutSeconds: 60 },
          { id: 'meanwhile', kind: 'tool', tool: 'http', args: { url: url('/work?ms=50', 'meanwhile') } },
          { id: 'use', kind: 'tool', tool: 'json', args: { value: { $ref: 'approval.output.by' } } },
        ],
        edges: [['approval', 'use']],
      },
    });
    const runId = posted.body.runId as string;
    // With one tool slot, this node can only run because the waiting node gave its slot back.
    await server.hitCount('meanwhile', 1);
    const before = await fetch(`${stack.url}/v1/runs/${runId}`).then(
      (r) => r.json() as Promise<{ nodes: Record<string, { status: string }> }>,
    );
    expect(before.nodes.approval!.status).toBe('waiting');
    const sent = await post(stack.url, `/v1/runs/${runId}/signals/approve`, { by: 'ana' });
    expect(sent).toMatchObject({ status: 202, body: { runId, signal: 'approve', delivered: true } });
    const doc = await waitFor(stack.url, runId);
    expect(doc.status).toBe('succeeded');
    expect(doc.output).toMatchObject({ use: 'ana' });
    const again = await post(stack.url, `/v1/runs/${runId}/signals/approve`, { by: 'bob' });
    expect(again.status).toBe(409);
  });

  it('settle at once when their run is cancelled, not when their timeout runs out', async () => {
    const posted = await postRun(stack.url, {
      graph: { nodes: [{ id: 'parked', kind: 'wait', signal: 'never', timeoutSeconds: 3600 }] },
    });
    const runId = posted.body.runId as string;
    await untilNodeStatus(stack, runId, 'parked', 'waiting');
    expect((await post(stack.url, `/v1/runs/${runId}/cancel`)).status).toBe(202);
    // Well inside the hour the node would otherwise sit in the delayed set.
    const doc = await waitFor(stack.url, runId, 10_000);
    expect(doc.status).toBe('cancelled');
    expect(doc.nodes.parked).toMatchObject({ status: 'cancelled' });
  });

  it('time out: fail the run, or with onTimeout "continue" hand {error} downstream', async () => {
    const failing = await runToEnd(stack.url, {
      graph: { nodes: [{ id: 'w', kind: 'wait', signal: 'never', timeoutSeconds: 0.3 }] },
    });
    expect(failing.status).toBe('failed');
    expect(failing.nodes.w).toMatchObject({ status: 'failed', error: { code: 'timeout' } });

    const continuing = await runToEnd(stack.url, {
      graph: {
        nodes: [
          { id: 'w', kind: 'wait', signal: 'never', timeoutSeconds: 0.3, onTimeout: 'continue' },
          { id: 'next', kind: 'tool', tool: 'json', args: { value: { $ref: 'w.output.error.code' } } },
        ],
        edges: [['w', 'next']],
      },
    });
    expect(continuing.status).toBe('succeeded');
    expect(continuing.output).toEqual({ next: 'timeout' });
  });
});

describe('nested graphs', () => {
  it("expand into namespaced nodes whose output is the sinks' outputs", async () => {
    const doc = await runToEnd(stack.url, {
      input: { city: 'Oslo' },
      graph: {
        nodes: [
          { id: 'seed', kind: 'tool', tool: 'json', args: { value: { n: 2 } } },
          {
            id: 'sub',
            kind: 'graph',
            input: { n: { $ref: 'seed.output.n' } },
            graph: {
              nodes: [
                {
                  id: 'double',
                  kind: 'tool',
                  tool: 'json',
                  args: { value: { n: { $ref: 'input.n' }, label: 'x{{input.n}}' } },
                },
                {
                  id: 'pick',
                  kind: 'tool',
                  tool: 'json',
                  args: { value: { $ref: 'double.output' }, pick: 'label' },
                },
              ],
              edges: [['double', 'pick']],
            },
          },
          {
            id: 'final',
            kind: 'tool',
            tool: 'json',
            args: { value: ['{{sub.output.pick}}', '{{input.city}}'] },
          },
        ],
        edges: [
          ['seed', 'sub'],
          ['sub', 'final'],
        ],
      },
    });
    expect(doc.status).toBe('succeeded');
    expect(Object.keys(doc.nodes).sort()).toEqual([
      'final',
      'seed',
      'sub',
      'sub/double',
      'sub/input',
      'sub/pick',
    ]);
    expect(doc.nodes.sub).toMatchObject({ status: 'succeeded', output: { pick: 'x2' } });
    expect(doc.output).toEqual({ final: ['x2', 'Oslo'] });
  });

  it('are validated with paths into the nested graph', async () => {
    const res = await postRun(stack.url, {
      graph: {
        nodes: [
          { id: 'sub', kind: 'graph', graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'nope', args: {} }] } },
        ],
      },
    });
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ error: { issues: [{ path: 'graph.nodes.0.graph.nodes.0.tool' }] } });
  });
});

describe('loop suspicion', () => {
  it('stops a node executed more than 5 times and says so', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          {
            id: 'spin',
            kind: 'tool',
            tool: 'http',
            args: { url: url('/status/503', 'spin') },
            retry: { server: 10 },
          },
        ],
      },
    });
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatchObject({ code: 'suspected_loop', nodeId: 'spin' });
    expect(doc.nodes.spin).toMatchObject({
      status: 'failed',
      error: { code: 'suspected_loop', executions: 6 },
    });
    expect(server.hitsOf('spin')).toHaveLength(5);
  });
});

describe('node priorities', () => {
  it("dispatch a run's ready nodes highest priority first, the unprioritized at the default", async () => {
    const call = (id: string, priority?: number) => ({
      id,
      kind: 'tool',
      tool: 'http',
      args: { url: url('/work?ms=20', id) },
      ...(priority !== undefined ? { priority } : {}),
    });
    // With one tool slot, the five ready nodes run one at a time, in the order they are taken.
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          call('prio-low', 1),
          call('prio-plain'),
          call('prio-top', 10),
          call('prio-mid', 7),
          call('prio-min', 1),
        ],
      },
    });
    expect(doc.status).toBe('succeeded');
    const order = server.hits
      .filter((h) => h.node.startsWith('prio-'))
      .sort((a, b) => a.start - b.start)
      .map((h) => h.node);
    // Equal priorities keep their order in the graph.
    expect(order).toEqual(['prio-top', 'prio-mid', 'prio-plain', 'prio-low', 'prio-min']);
  });
});

describe('task TTLs', () => {
  // One tool slot: `hold` runs first, so the nodes queued beside it wait past their 100 ms TTL.
  const hold = () => ({
    id: 'ttl-hold',
    kind: 'tool',
    tool: 'http',
    args: { url: url('/work?ms=400', 'ttl-hold') },
  });
  const late = (id: string, extra: object) => ({
    id,
    kind: 'tool',
    tool: 'http',
    args: { url: url('/work', id) },
    ttlMs: 100,
    ...extra,
  });

  it('skip an expired node (its dependents read {expired: true}) or run its fallback in its place', async () => {
    const doc = await runToEnd(stack.url, {
      graph: {
        nodes: [
          hold(),
          late('ttl-skip', {}),
          late('ttl-down', {
            onExpire: 'downgrade',
            fallback: { kind: 'tool', tool: 'json', args: { value: 'cached answer' } },
          }),
          {
            id: 'ttl-after',
            kind: 'tool',
            tool: 'json',
            args: { value: { got: { $ref: 'ttl-skip.output' } } },
          },
        ],
        edges: [['ttl-skip', 'ttl-after']],
      },
    });
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes['ttl-skip']).toMatchObject({
      status: 'skipped',
      output: { expired: true },
      expired: { onExpire: 'skip' },
    });
    expect(doc.nodes['ttl-down']).toMatchObject({
      status: 'succeeded',
      output: 'cached answer',
      expired: { onExpire: 'downgrade' },
    });
    expect(doc.output).toMatchObject({ 'ttl-after': { got: { expired: true } } });
    // Neither expired node made its call, and the skipped one was not charged: one http call in all.
    expect(server.hitsOf('ttl-skip')).toHaveLength(0);
    expect(server.hitsOf('ttl-down')).toHaveLength(0);
    expect(doc.usage.toolCalls).toBe(3);
    const events = await readEvents(stack.url, doc.runId);
    expect(
      events
        .filter((e) => e.data.type === 'node.expired')
        .map((e) => [e.data.nodeId, (e.data.data as { onExpire: string }).onExpire])
        .sort(),
    ).toEqual([
      ['ttl-down', 'downgrade'],
      ['ttl-skip', 'skip'],
    ]);
  });

  it('fail the run with onExpire "fail"; a node started in time runs as written', async () => {
    const doc = await runToEnd(stack.url, {
      graph: { nodes: [hold(), late('ttl-fail', { onExpire: 'fail' })] },
    });
    expect(doc.status).toBe('failed');
    expect(doc.nodes['ttl-fail']).toMatchObject({
      status: 'failed',
      error: { code: 'timeout', expired: true },
      expired: { onExpire: 'fail' },
    });
    const fresh = await runToEnd(stack.url, { graph: { nodes: [late('ttl-fresh', { ttlMs: 60_000 })] } });
    expect(fresh.nodes['ttl-fresh']).toMatchObject({ status: 'succeeded' });
    expect(fresh.nodes['ttl-fresh']).not.toHaveProperty('expired');
  });

  it('refuse, before anything runs, a TTL policy that cannot apply', async () => {
    const res = await postRun(stack.url, {
      graph: {
        nodes: [
          late('ttl-bad-1', { onExpire: 'downgrade' }),
          late('ttl-bad-2', { expiresAt: '2026-12-01T00:00:00Z' }),
          late('ttl-bad-3', { onExpire: 'downgrade', fallback: { kind: 'wait', signal: 'x' } }),
          late('ttl-bad-4', { onExpire: 'downgrade', fallback: { kind: 'tool', tool: 'nope' } }),
        ],
      },
    });
    expect(res.status).toBe(400);
    const issues = (res.body as { error: { issues: { path: string }[] } }).error.issues;
    expect(issues.map((i) => i.path).sort()).toEqual([
      'graph.nodes.0.fallback',
      'graph.nodes.1.expiresAt',
      'graph.nodes.2.fallback',
      'graph.nodes.3.fallback.tool',
    ]);
  });
});
