/**
 * Window mode against a scripted OpenAI-compatible planner, through the real `openai` SDK: windows
 * run in parallel, the next window is asked when one drains (or a node fails) and sees only the
 * outputs asked for, the goal ends the run, windows are bounded in size and number, and an invalid
 * window is rejected whole.
 */
import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatRequest, ModelServer } from './support/model-server.js';
import { startPlannerStack, type PlannerStack } from './support/planner-stack.js';
import { postRun, readEvents, runToEnd, type Stack } from './support/stack.js';
import { overlaps, type ToolServer } from './support/tool-server.js';

let planned: PlannerStack;
let stack: Stack;
let model: ModelServer;
let server: ToolServer;

beforeAll(async () => {
  planned = await startPlannerStack({
    schemas: ['window'],
    env: { TETRALOOP_PLAN_WINDOW: '3', TETRALOOP_PLAN_MAX_WINDOWS: '4' },
  });
  ({ stack, model, server } = planned);
});
afterAll(() => planned?.close());

const work = (id: string, ms = 1) => ({
  id,
  kind: 'tool',
  tool: 'http',
  args: { url: `${server.url}/work?node=${id}&ms=${ms}` },
});
/** The hex sha256 of a value's canonical JSON (RFC 8785). */
const fingerprintOf = (value: unknown): string =>
  createHash('sha256')
    .update(canonicalize(value) ?? 'null')
    .digest('hex');
const userOf = (r: ChatRequest): string => r.messages.find((m) => m.role === 'user')!.content!;

describe('window mode', () => {
  it('runs a window in parallel, asks for the next with only the observed outputs, and ends at the goal', async () => {
    const before = model.requests.length;
    planned.plan(
      {
        // w-b reads w-a, so only w-b and w-c (the window's results) are shown next time.
        nodes: [
          work('w-a', 150),
          { id: 'w-b', kind: 'tool', tool: 'json', args: { value: { seen: '{{w-a.output.body.node}}' } } },
          work('w-c', 150),
        ],
        edges: [['w-a', 'w-b']],
        goalReached: false,
      },
      {
        nodes: [{ id: 'w-d', kind: 'tool', tool: 'json', args: { value: { from: { $ref: 'w-b.output' } } } }],
        edges: [['w-b', 'w-d']],
        goalReached: true,
      },
    );
    const doc = await runToEnd(stack.url, { task: 'two windows', mode: 'window' });
    expect(doc.status).toBe('succeeded');
    // The first window's independent fetches ran side by side.
    expect(overlaps(server.hitsOf('w-a')[0]!, server.hitsOf('w-c')[0]!)).toBe(true);
    const calls = planned.plannerRequests(before);
    expect(calls).toHaveLength(2);
    expect(calls[0]!.model).toBe('scripted-planner');
    expect(userOf(calls[0]!)).toBe(
      'Task: two windows\n\nWindow 1 of at most 4, at most 3 nodes.\n\nReturn the first window.',
    );
    const second = userOf(calls[1]!);
    expect(second).toContain('Window 2 of at most 4');
    expect(second).toContain('Why you are asked again: window_drained: window 1 drained');
    expect(second).toContain('Completed nodes you may depend on: w-a (http), w-b (json), w-c (http)');
    expect(second).toContain('"w-b":"{\\"seen\\":\\"w-a\\"}"');
    expect(second).toContain('"w-c":');
    // w-a's output was consumed inside the window: the next call does not see it.
    expect(second).not.toContain('"w-a":');
    // Each call is fresh: no earlier answer travels with it.
    expect(calls[1]!.messages).toHaveLength(2);
    expect(doc.output).toEqual({ 'w-c': expect.anything(), 'w-d': { from: { seen: 'w-a' } } });
    // Every window is a plan generation, recorded on the run.
    expect(doc.generation).toBe(1);
    expect(doc.planning).toMatchObject({ promptVersion: 'planner-window-v4', planVersion: 1 });
    expect(doc.planning!.windows).toEqual([
      {
        generation: 0,
        nodes: ['w-a', 'w-b', 'w-c'],
        observe: ['w-b', 'w-c'],
        goalReached: false,
        reason: 'start',
        // The fingerprint of what the window's planner was given: its call's messages.
        inputSha256: fingerprintOf(calls[0]!.messages),
        usage: { promptTokens: 100, completionTokens: 50, modelCalls: 1 },
      },
      {
        generation: 1,
        nodes: ['w-d'],
        observe: ['w-d'],
        goalReached: true,
        reason: 'window_drained: window 1 drained',
        inputSha256: fingerprintOf(calls[1]!.messages),
        usage: { promptTokens: 100, completionTokens: 50, modelCalls: 1 },
      },
    ]);
    expect(doc.planning!.inputSha256).toBe(fingerprintOf(calls[1]!.messages));
    // The completed nodes kept their snapshots; the run's usage spans both windows.
    expect(server.hitsOf('w-a')).toHaveLength(1);
    expect(doc.usage).toMatchObject({
      promptTokens: 200,
      completionTokens: 100,
      modelCalls: 2,
      toolCalls: 4,
    });
    const events = await readEvents(stack.url, doc.runId);
    expect(events.filter((e) => e.data.type === 'plan')).toHaveLength(2);
  });

  it('runs a map a window planned over a list an earlier window found', async () => {
    planned.plan(
      {
        nodes: [
          {
            id: 'wm-list',
            kind: 'tool',
            tool: 'json',
            args: { value: ['wm-0', 'wm-1'].map((n) => ({ path: `/work?node=${n}&ms=1` })) },
          },
        ],
        edges: [],
        goalReached: false,
      },
      {
        nodes: [
          {
            id: 'wm-read',
            kind: 'map',
            over: { $ref: 'wm-list.output' },
            node: { kind: 'tool', tool: 'http', args: { url: `${server.url}{{item.path}}` } },
            concurrency: 2,
          },
        ],
        edges: [['wm-list', 'wm-read']],
        goalReached: true,
      },
    );
    const doc = await runToEnd(stack.url, { task: 'list, then read each', mode: 'window' });
    expect(doc.status, JSON.stringify(doc.error)).toBe('succeeded');
    expect(
      (doc.output as { 'wm-read': { body: { node: string } }[] })['wm-read'].map((o) => o.body.node),
    ).toEqual(['wm-0', 'wm-1']);
  });

  it('shows the outputs a window asks to observe, and ends on a goal reached with no nodes', async () => {
    const before = model.requests.length;
    planned.plan(
      {
        nodes: [
          work('o-a'),
          { id: 'o-b', kind: 'tool', tool: 'json', args: { value: '{{o-a.output.body.node}}' } },
        ],
        edges: [['o-a', 'o-b']],
        goalReached: false,
        observe: ['o-a'],
      },
      { nodes: [], edges: [], goalReached: true },
    );
    const doc = await runToEnd(stack.url, { task: 'observe', mode: 'window' });
    expect(doc.status).toBe('succeeded');
    const second = userOf(planned.plannerRequests(before)[1]!);
    expect(second).toContain('"o-a":');
    expect(second).not.toContain('"o-b":');
    expect(doc.output).toEqual({ 'o-b': 'o-a' });
    expect(doc.planning!.windows!.map((w) => w.nodes)).toEqual([['o-a', 'o-b'], []]);
  });

  it('asks for the next window when a node fails, and drops the failed node', async () => {
    const before = model.requests.length;
    const hits = server.hits.length;
    planned.plan(
      {
        nodes: [
          {
            id: 'f-bad',
            kind: 'tool',
            tool: 'http',
            args: { url: `${server.url}/status/500?node=f-bad` },
            retry: { server: 0 },
          },
          { id: 'f-after', kind: 'tool', tool: 'json', args: { value: { $ref: 'f-bad.output' } } },
          work('f-ok', 50),
        ],
        edges: [['f-bad', 'f-after']],
        goalReached: false,
      },
      { nodes: [work('f-mirror')], edges: [], goalReached: true },
    );
    const doc = await runToEnd(stack.url, { task: 'blocked', mode: 'window' });
    expect(doc.status).toBe('succeeded');
    const second = userOf(planned.plannerRequests(before)[1]!);
    expect(second).toContain('Why you are asked again: server: node "f-bad" failed: HTTP 500');
    expect(second).toContain('- f-bad: server: HTTP 500');
    expect(second).toContain('- f-after: did not run');
    expect(second).toContain('Completed nodes you may depend on: f-ok (http)');
    // The failed node and its dependent are not part of the run any more; the completed one is.
    expect(Object.keys(doc.nodes).sort()).toEqual(['f-mirror', 'f-ok']);
    expect(doc.planning!.windows![1]!.reason).toContain('server: node "f-bad" failed');
    // The failure policy a window node gets unless the planner sets one.
    expect(doc.graph!.nodes.find((n) => n.id === 'f-mirror')).toMatchObject({ onError: 'replan' });
    expect(server.hits.slice(hits).filter((h) => h.node === 'f-ok')).toHaveLength(1);
  });

  it('lets each window set the priority of its nodes', async () => {
    const before = model.requests.length;
    planned.plan(
      { nodes: [{ ...work('p-low'), priority: 2 }], edges: [], goalReached: false },
      { nodes: [{ ...work('p-high'), priority: 9 }], edges: [['p-low', 'p-high']], goalReached: true },
    );
    const doc = await runToEnd(stack.url, { task: 'prioritised', mode: 'window' });
    expect(doc.status).toBe('succeeded');
    expect(doc.graph!.nodes.find((n) => n.id === 'p-high')).toMatchObject({ priority: 9 });
    expect(doc.graph!.nodes.find((n) => n.id === 'p-low')).toMatchObject({ priority: 2 });
    const [first] = planned.plannerRequests(before);
    expect(JSON.stringify(first!.response_format)).toContain('"priority"');
    expect(first!.messages[0]!.content).toContain('"priority" orders the ready nodes of a window');
  });

  it('holds the budget for the whole run, across windows', async () => {
    planned.plan(
      { nodes: [work('b-1'), work('b-2')], edges: [], goalReached: false },
      { nodes: [work('b-3')], edges: [], goalReached: true },
    );
    const doc = await runToEnd(stack.url, {
      task: 'two tool calls allowed',
      mode: 'window',
      maxWindows: 2,
      budget: { toolCalls: 2 },
    });
    // The second window starts with the first window's two calls counted: its node has none left.
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatchObject({ code: 'budget_exhausted', nodeId: 'b-3' });
    expect(server.hitsOf('b-3')).toHaveLength(0);
    // The first window's calls are still counted after the second was installed.
    expect(doc.usage.toolCalls).toBeGreaterThanOrEqual(2);
  });

  it('fails the run with window_limit when its windows are used up', async () => {
    const before = model.requests.length;
    let n = 0;
    planned.setPlanner(() => ({
      content: JSON.stringify({ nodes: [work(`l-${n++}`)], edges: [], goalReached: false }),
    }));
    const doc = await runToEnd(stack.url, { task: 'never done', mode: 'window', maxWindows: 2 });
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatchObject({ code: 'window_limit' });
    expect(doc.error!.message).toContain('2 window(s)');
    expect(planned.plannerRequests(before)).toHaveLength(2);
    expect(doc.planning!.windows).toHaveLength(2);
  });

  it('sends a window larger than its bound back for repair, and rejects it whole if it stays too large', async () => {
    const before = model.requests.length;
    planned.plan(
      { nodes: [work('s-1'), work('s-2'), work('s-3')], edges: [], goalReached: true },
      { nodes: [work('s-1'), work('s-2')], edges: [], goalReached: true },
    );
    const repaired = await runToEnd(stack.url, { task: 'too big once', mode: 'window', window: 2 });
    expect(repaired.status).toBe('succeeded');
    const calls = planned.plannerRequests(before);
    expect(calls).toHaveLength(2);
    expect(calls[1]!.messages.at(-1)!.content).toContain(
      '- nodes: at most 2 nodes per window; the answer has 3',
    );
    // The structured-output schema carries the bound too.
    expect(JSON.stringify(calls[0]!.response_format)).toContain('"maxItems":2');

    const hits = server.hits.length;
    planned.plan({ nodes: [work('t-1'), work('t-2'), work('t-3')], edges: [], goalReached: true });
    const rejected = await runToEnd(stack.url, { task: 'too big', mode: 'window', window: 2 });
    expect(rejected.status).toBe('failed');
    expect(rejected.error).toMatchObject({
      code: 'plan_rejected',
      issues: [{ path: 'nodes', message: 'at most 2 nodes per window; the answer has 3' }],
    });
    expect(rejected.graph).toBeNull();
    expect(server.hits.length).toBe(hits);
  });

  it('rejects an invalid next window whole: nothing of it runs and the run fails', async () => {
    const hits = server.hits.length;
    planned.plan(
      { nodes: [work('i-a')], edges: [], goalReached: false },
      {
        nodes: [
          work('i-b'),
          { id: 'i-c', kind: 'tool', tool: 'teleport', args: {} },
          { id: 'i-a', kind: 'tool', tool: 'json', args: { value: 1 } },
        ],
        edges: [],
        goalReached: true,
      },
    );
    const doc = await runToEnd(stack.url, { task: 'invalid second window', mode: 'window' });
    expect(doc.status).toBe('failed');
    expect(doc.error).toMatchObject({ code: 'plan_rejected', message: 'the next window was rejected' });
    expect(doc.error!.issues).toEqual([
      { path: 'nodes.2.id', message: '"i-a" is a completed node of an earlier window' },
    ]);
    expect(server.hits.slice(hits).map((h) => h.node)).toEqual(['i-a']);
  });

  it('refuses window fields outside window mode, and a window out of bounds, naming the field', async () => {
    const dag = await postRun(stack.url, { task: 't', window: 3 });
    expect(dag.status).toBe(400);
    expect(JSON.stringify(dag.body)).toContain('"path":"window"');
    const big = await postRun(stack.url, { task: 't', mode: 'window', maxWindows: 51 });
    expect(big.status).toBe(400);
    expect(JSON.stringify(big.body)).toContain('"path":"maxWindows"');
    const graph = await postRun(stack.url, { graph: { nodes: [] }, mode: 'window' });
    expect(graph.status).toBe(400);
    expect(JSON.stringify(graph.body)).toContain('window mode needs a task');
  });
});
