/** Map nodes on a real Redis with real worker pools: items, concurrency, failures, resume, events. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/core/domain';
import type { RunExplain } from '@tetraloop/core/insight';
import { post, postRun, readEvents, runToEnd, startStack, waitFor, type Stack } from './support/stack.js';
import { startToolServer, type Hit, type ToolServer } from './support/tool-server.js';

let stack: Stack;
let server: ToolServer;

beforeAll(async () => {
  server = await startToolServer();
  stack = await startStack({ env: { TETRALOOP_TOOL_CONCURRENCY: '8' } });
});
afterAll(async () => {
  await stack?.close();
  await server?.close();
});

/** The most hits of these nodes in flight at one instant. */
function mostAtOnce(hits: readonly Hit[]): number {
  const edges = hits.flatMap((h): [number, number][] => [
    [h.start, 1],
    [h.end ?? Infinity, -1],
  ]);
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let now = 0;
  let most = 0;
  for (const [, d] of edges) most = Math.max(most, (now += d));
  return most;
}

const mapOver = (id: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  id,
  kind: 'map',
  over: { $ref: 'input.items' },
  node: { kind: 'tool', tool: 'http', args: { url: `${server.url}{{item.path}}` }, retry: { server: 0 } },
  ...extra,
});

/** Three items for the loopback server, `<prefix>0` to `<prefix>2`, the second answering 500: a map with one failed item. */
const itemsFailingSecond = (prefix: string): { path: string }[] => [
  { path: `/work?node=${prefix}0&ms=1` },
  { path: `/status/500?node=${prefix}1` },
  { path: `/work?node=${prefix}2&ms=1` },
];

/** Runs a graph of one map node, `read` over `items` (with `extra` on it), to its end: the map tests' common run. */
const runMapToEnd = (items: unknown[], extra: Record<string, unknown> = {}): Promise<RunDocument> =>
  runToEnd(stack.url, { input: { items }, graph: { nodes: [mapOver('read', extra)] } });

/** Posts a run of one map node, `read` over no items, with `fields` as its template: how a test asks for a refusal. */
const postMapOverNothing = (fields: Record<string, unknown>) =>
  postRun(stack.url, {
    input: { items: [] },
    graph: { nodes: [{ id: 'read', kind: 'map', over: { $ref: 'input.items' }, ...fields }] },
  });

/** A settled node's output. */
const outputOf = (doc: RunDocument, id: string): unknown => (doc.nodes[id] as { output?: unknown }).output;

describe('map nodes', () => {
  it('run each item under the template, at most `concurrency` at once, output in item order', async () => {
    const items = Array.from({ length: 12 }, (_, i) => ({ path: `/work?node=ord${i}&ms=${(12 - i) * 5}` }));
    const doc = await runToEnd(stack.url, {
      input: { items },
      graph: {
        nodes: [
          mapOver('read', { concurrency: 3 }),
          { id: 'after', kind: 'tool', tool: 'json', args: { value: { $ref: 'read.output.11.body.node' } } },
        ],
        edges: [['read', 'after']],
      },
    });
    expect(doc.status, JSON.stringify({ e: doc.error, n: doc.nodes })).toBe('succeeded');
    const output = outputOf(doc, 'read') as { body: { node: string } }[];
    expect(output.map((o) => o.body.node)).toEqual(items.map((_, i) => `ord${i}`));
    // Dependents start when the map settles, and read its output.
    expect(outputOf(doc, 'after')).toBe('ord11');
    const hits = server.hits.filter((h) => h.node.startsWith('ord'));
    expect(hits).toHaveLength(12);
    expect(mostAtOnce(hits)).toBeLessThanOrEqual(3);
    expect(doc.usage.toolCalls).toBe(13);
    // Each item's snapshot is kept and readable on its own.
    const item = await fetch(`${stack.url}/v1/runs/${doc.runId}/nodes/read/items/7`);
    expect(item.status).toBe(200);
    expect(await item.json()).toMatchObject({
      id: 'read[7]',
      status: 'succeeded',
      output: { body: { node: 'ord7' } },
    });
    expect((await fetch(`${stack.url}/v1/runs/${doc.runId}/nodes/read/items/12`)).status).toBe(404);
    expect((await fetch(`${stack.url}/v1/runs/${doc.runId}/nodes/read/items/x`)).status).toBe(400);
    // No per-item event but failures; progress instead, at most every 500 ms plus the last.
    const events = await readEvents(stack.url, doc.runId);
    expect(events.filter((e) => (e.data.nodeId ?? '').startsWith('read['))).toEqual([]);
    const progress = events.filter((e) => e.data.type === 'map.progress');
    expect(progress.length).toBeGreaterThanOrEqual(2);
    expect(progress.at(-1)!.data.data).toEqual({ done: 12, failed: 0, running: 0, total: 12 });
    // Explain sets the map's wall time against its items' critical path: its longest lane of 3.
    const explained = (await (await fetch(`${stack.url}/v1/runs/${doc.runId}/explain`)).json()) as RunExplain;
    const map = explained.nodes.find((n) => n.id === 'read')!;
    expect(map.map).toMatchObject({ total: 12, concurrency: 3, ran: 12 });
    const { itemsCriticalPathMs, longestItemMs, itemTimeMs, wallOverItemsCriticalPath } = map.map!;
    // A lane's items run one after another inside the map's span.
    expect(itemsCriticalPathMs).toBeGreaterThanOrEqual(longestItemMs);
    expect(itemsCriticalPathMs).toBeLessThanOrEqual(map.durationMs);
    expect(itemsCriticalPathMs * 3).toBeGreaterThanOrEqual(itemTimeMs);
    expect(wallOverItemsCriticalPath).toBeGreaterThanOrEqual(1);
    // The map's span starts when it started its items, before the first of them.
    const firstItem = (await (
      await fetch(`${stack.url}/v1/runs/${doc.runId}/nodes/read/items/0`)
    ).json()) as {
      startedAt: string;
    };
    expect(Date.parse(map.startedAt!)).toBeLessThanOrEqual(Date.parse(firstItem.startedAt));
    // So does the map's own snapshot: a continuation keeps its first entry's start and counts its
    // duration from there, not from when it came back after its items.
    const mapNode = doc.nodes.read as { startedAt: string; durationMs: number };
    expect(Date.parse(mapNode.startedAt)).toBeLessThanOrEqual(Date.parse(firstItem.startedAt));
    expect(mapNode.durationMs).toBeGreaterThanOrEqual(itemsCriticalPathMs);
    expect(explained.nodes.find((n) => n.id === 'after')!.map).toBeUndefined();
  });

  it('with onItemError "continue", gives failed items as {error}, and minSuccess may fail the map', async () => {
    const items = itemsFailingSecond('c');
    const ok = await runMapToEnd(items, { onItemError: 'continue', minSuccess: 2 });
    expect(ok.status).toBe('succeeded');
    const output = outputOf(ok, 'read') as unknown[];
    expect(output[1]).toEqual({ error: { code: 'server', message: expect.any(String) } });
    expect(output[2]).toMatchObject({ body: { node: 'c2' } });
    const failedEvents = (await readEvents(stack.url, ok.runId)).filter(
      (e) => e.data.type === 'map.item.failed',
    );
    expect(failedEvents.map((e) => (e.data.data as { index: number }).index)).toEqual([1]);

    const short = await runMapToEnd(items, { onItemError: 'continue', minSuccess: 0.9 });
    expect(short.status).toBe('failed');
    expect(short.nodes.read).toMatchObject({ error: { code: 'validation', reason: 'min_success' } });
  });

  it('fails on the first failed item by default, and starts no item after it', async () => {
    const items = itemsFailingSecond('f');
    const doc = await runMapToEnd(items, { concurrency: 1 });
    expect(doc.status).toBe('failed');
    expect(doc.nodes.read).toMatchObject({
      error: {
        code: 'server',
        message: expect.stringContaining('item 1'),
      },
    });
    expect(server.hits.filter((h) => h.node === 'f2')).toHaveLength(0);
  });

  it('fails a list longer than maxItems with validation, too_many_items', async () => {
    const doc = await runMapToEnd([{ path: '/' }, { path: '/' }, { path: '/' }], { maxItems: 2 });
    expect(doc.nodes.read).toMatchObject({ error: { code: 'validation', reason: 'too_many_items' } });
  });

  it('run a whole graph per item as a child run, reading the item, its index and the map input', async () => {
    const items = itemsFailingSecond('g');
    const doc = await runToEnd(stack.url, {
      input: { items },
      graph: {
        nodes: [
          { id: 'prefix', kind: 'tool', tool: 'json', args: { value: 'item' } },
          {
            id: 'read',
            kind: 'map',
            over: { $ref: 'input.items' },
            input: { label: { $ref: 'prefix.output' } },
            onItemError: 'continue',
            graph: {
              nodes: [
                {
                  id: 'fetch',
                  kind: 'tool',
                  tool: 'http',
                  args: { url: `${server.url}{{item.path}}` },
                  retry: { server: 0 },
                },
                {
                  id: 'name',
                  kind: 'tool',
                  tool: 'json',
                  args: { value: '{{input.label}} {{index}}: {{fetch.output.body.node}}' },
                },
              ],
              edges: [['fetch', 'name']],
            },
          },
        ],
        edges: [['prefix', 'read']],
      },
    });
    expect(doc.status, JSON.stringify(doc.nodes.read)).toBe('succeeded');
    const output = outputOf(doc, 'read') as unknown[];
    // An item's output is its graph's: its sinks' outputs.
    expect(output[0]).toEqual({ name: 'item 0: g0' });
    // A failed item is its child run's failure.
    expect(output[1]).toEqual({ error: { code: 'node_failed', message: 'node "fetch" failed: HTTP 500' } });
    expect(output[2]).toEqual({ name: 'item 2: g2' });
    const item = (await (await fetch(`${stack.url}/v1/runs/${doc.runId}/nodes/read/items/2`)).json()) as {
      status: string;
      output: unknown;
    };
    expect(item).toMatchObject({ status: 'succeeded', output: { name: 'item 2: g2' } });
    expect(
      server.hits
        .filter((h) => /^g\d$/.test(h.node))
        .map((h) => h.node)
        .sort(),
    ).toEqual(['g0', 'g1', 'g2']);
  });

  it('refuses a graph template at its exact field, and both templates at once', async () => {
    const bad = await postMapOverNothing({
      input: { item: 1 },
      graph: {
        nodes: [{ id: 'x', kind: 'tool', tool: 'json', args: { value: { $ref: 'nowhere.output' } } }],
      },
    });
    expect(bad.status).toBe(400);
    const text = JSON.stringify(bad.body);
    expect(text).toContain('graph.nodes.0.input.item');
    expect(text).toContain('graph.nodes.0.graph.nodes.0.args.value');
    const both = await postMapOverNothing({
      node: { kind: 'tool', tool: 'json', args: { value: 1 } },
      graph: { nodes: [{ id: 'x', kind: 'tool', tool: 'json', args: { value: 1 } }] },
    });
    expect(both.status).toBe(400);
    expect(JSON.stringify(both.body)).toContain('not both');
  });

  it('resumed, runs only the failed and unfinished items again', async () => {
    const items = [
      { path: '/work?node=r0&ms=1' },
      { path: '/flaky?node=r1&fail=1&status=500' },
      { path: '/work?node=r2&ms=1' },
      { path: '/work?node=r3&ms=1' },
    ];
    const first = await runMapToEnd(items, { concurrency: 2 });
    expect(first.status).toBe('failed');
    const before = (n: string): number => server.hits.filter((h) => h.node === n).length;
    expect([before('r0'), before('r1')]).toEqual([1, 1]);
    expect((await post(stack.url, `/v1/runs/${first.runId}/resume`)).status).toBe(202);
    const resumed = await waitFor(stack.url, first.runId);
    expect(resumed.status).toBe('succeeded');
    // r0 kept its snapshot; r1 ran again; r2 and r3 ran once, whenever they ran.
    expect(['r0', 'r1', 'r2', 'r3'].map(before)).toEqual([1, 2, 1, 1]);
    expect(
      (outputOf(resumed, 'read') as { body: { node: string } }[]).map((o) => o.body.node ?? o),
    ).toHaveLength(4);
  });
});

describe('map reruns', () => {
  it('rerun from the map runs every item again; rerun from after it keeps the map', async () => {
    const items = [{ path: '/work?node=x0&ms=1' }, { path: '/work?node=x1&ms=1' }];
    const first = await runToEnd(stack.url, {
      input: { items },
      graph: {
        nodes: [
          mapOver('read'),
          { id: 'after', kind: 'tool', tool: 'json', args: { value: { $ref: 'read.output' } } },
        ],
        edges: [['read', 'after']],
      },
    });
    expect(first.status).toBe('succeeded');
    const hits = (): number[] => ['x0', 'x1'].map((n) => server.hits.filter((h) => h.node === n).length);
    expect(hits()).toEqual([1, 1]);

    const fromMap = await post(stack.url, `/v1/runs/${first.runId}/rerun`, { from: 'read' });
    expect(fromMap.status).toBe(202);
    expect((await waitFor(stack.url, fromMap.body.runId as string)).status).toBe('succeeded');
    expect(hits()).toEqual([2, 2]);

    const fromAfter = await post(stack.url, `/v1/runs/${first.runId}/rerun`, { from: 'after' });
    expect(fromAfter.status).toBe(202);
    const kept = await waitFor(stack.url, fromAfter.body.runId as string);
    expect(kept.status).toBe('succeeded');
    expect(hits()).toEqual([2, 2]);
    expect(outputOf(kept, 'read')).toEqual(outputOf(first, 'read'));
  });
});

describe('map validation', () => {
  it('checks the template before anything runs, at its exact field', async () => {
    const bad = await postRun(stack.url, {
      input: { items: [] },
      graph: {
        nodes: [
          { id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } },
          { id: 'read', kind: 'map', over: { $ref: 'input.items' }, node: { kind: 'tool', tool: 'nope' } },
        ],
      },
    });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('graph.nodes.1.node.tool');
  });

  it('refuses item and index outside a template', async () => {
    const bad = await postRun(stack.url, {
      input: { items: [] },
      graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: { $ref: 'item.x' } } }] },
    });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain('unknown node \\"item\\"');
  });
});
