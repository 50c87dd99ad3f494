import { describe, expect, it } from 'vitest';
import type { NodeSnapshot, WindowRecord } from '../domain/run-model.js';
import type { ValidationResult } from '../compile/validate.js';
import { buildTopology } from '../graph/topology.js';
import type { Graph } from '../nodes/index.js';
import { carriedGraph, checkWindow, windowAnswerSchema, windowHistory } from './window.js';

const json = (id: string, value: unknown = id) => ({
  id,
  kind: 'tool' as const,
  tool: 'json',
  args: { value },
});
const snap = (
  status: NodeSnapshot['status'],
  output?: unknown,
  error?: NodeSnapshot['error'],
): NodeSnapshot => ({
  status,
  attempts: [],
  finishedAt: '2026-12-01T00:00:00.000Z',
  durationMs: 1,
  ...(output !== undefined ? { output } : {}),
  ...(error ? { error } : {}),
});

/** A stand-in for the plan checks: accepts any graph whose ids are unique, and records what it saw. */
function accepting(seen: unknown[] = []): (graph: unknown) => ValidationResult {
  return (graph) => {
    seen.push(graph);
    const g = graph as Graph;
    const ids = g.nodes.map((n) => n.id);
    if (new Set(ids).size !== ids.length) return { ok: false, issues: [{ path: 'nodes', message: 'dup' }] };
    return {
      ok: true,
      graph: g,
      plan: { nodes: g.nodes as never, edges: g.edges },
      topology: buildTopology(ids, g.edges),
    };
  };
}

describe('carriedGraph', () => {
  it('keeps succeeded nodes whose ancestors all succeeded, and the edges among them', () => {
    const graph: Graph = {
      nodes: [json('a'), json('b'), json('c'), json('d')],
      edges: [
        ['a', 'b'],
        ['c', 'd'],
      ],
    };
    const snapshots = new Map([
      ['a', snap('succeeded', 1)],
      ['b', snap('succeeded', 2)],
      ['c', snap('failed')],
      // d read c's error (onError continue) and succeeded: it goes with c.
      ['d', snap('succeeded', 3)],
    ]);
    const carried = carriedGraph(graph, snapshots);
    expect(carried.nodes.map((n) => n.id)).toEqual(['a', 'b']);
    expect(carried.edges).toEqual([['a', 'b']]);
  });
});

describe('checkWindow', () => {
  const carried: Graph = { nodes: [json('done')], edges: [] };

  it('merges the window before the carried nodes, defaults onError to replan, observes the window sinks', () => {
    const seen: unknown[] = [];
    const result = checkWindow(
      {
        nodes: [json('x'), json('y'), { ...json('z'), onError: 'continue' }],
        edges: [
          ['done', 'x'],
          ['x', 'y'],
        ],
        goalReached: false,
      },
      3,
      carried,
      accepting(seen),
    );
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.value.nodes).toEqual(['x', 'y', 'z']);
    expect(result.value.observe).toEqual(['y', 'z']);
    const merged = seen[0] as Graph;
    expect(merged.nodes.map((n) => n.id)).toEqual(['x', 'y', 'z', 'done']);
    expect(merged.nodes.map((n) => (n as { onError?: string }).onError)).toEqual([
      'replan',
      'replan',
      'continue',
      undefined,
    ]);
  });

  it('rejects more nodes than the window holds, never cutting them', () => {
    const result = checkWindow(
      { nodes: [json('a'), json('b'), json('c')], edges: [], goalReached: true },
      2,
      carried,
      accepting(),
    );
    expect(result).toEqual({
      ok: false,
      issues: [{ path: 'nodes', message: 'at most 2 nodes per window; the answer has 3' }],
    });
  });

  it('rejects an empty window short of the goal, a reused completed id, and an unknown observed node', () => {
    expect(checkWindow({ nodes: [], edges: [], goalReached: false }, 5, carried, accepting())).toMatchObject({
      ok: false,
      issues: [{ path: 'nodes', message: 'a window whose goal is not reached needs at least one node' }],
    });
    expect(
      checkWindow({ nodes: [json('done')], edges: [], goalReached: true }, 5, carried, accepting()),
    ).toMatchObject({
      ok: false,
      issues: [{ path: 'nodes.0.id', message: '"done" is a completed node of an earlier window' }],
    });
    expect(
      checkWindow(
        { nodes: [json('a')], edges: [], goalReached: false, observe: ['nope'] },
        5,
        carried,
        accepting(),
      ),
    ).toMatchObject({ ok: false, issues: [{ path: 'observe.0', message: 'unknown node "nope"' }] });
    expect(checkWindow({ nodes: [], edges: [] }, 5, carried, accepting())).toMatchObject({
      ok: false,
      issues: [{ path: 'goalReached' }],
    });
  });

  it('tells the model the bound in the answer schema', () => {
    expect(JSON.stringify(windowAnswerSchema(4))).toContain('"maxItems":4');
  });
});

describe('windowHistory', () => {
  it('shows the observed outputs, cut, and what of the last window did not complete', () => {
    const last: WindowRecord = {
      generation: 0,
      nodes: ['a', 'b', 'c'],
      observe: ['a'],
      goalReached: false,
      reason: 'start',
      usage: { promptTokens: 0, completionTokens: 0, modelCalls: 0 },
    };
    const snapshots = new Map([
      ['a', snap('succeeded', 'x'.repeat(3000))],
      ['b', snap('failed', undefined, { code: 'server', message: 'HTTP 500', retryable: true } as never)],
    ]);
    const carried = { nodes: [json('a')], edges: [] };
    const history = windowHistory('server: boom', last, carried, snapshots, carried);
    expect(history.completed).toEqual([{ id: 'a', label: 'json' }]);
    expect(history.observed.a).toMatch(/…\[truncated 1002 chars\]$/);
    expect(history.failed).toEqual(['- b: server: HTTP 500', '- c: did not run']);
  });
});

describe('windowHistory of a window whose node expired', () => {
  it('hands the expired node back with what it was and when it expired, apart from the failures', () => {
    const late = { ...json('late'), ttlMs: 50 };
    const down = {
      ...json('down'),
      ttlMs: 50,
      onExpire: 'downgrade' as const,
      fallback: { kind: 'tool', tool: 'json', args: { value: 'cached' } },
    };
    const last: WindowRecord = {
      generation: 0,
      nodes: ['late', 'down', 'after'],
      observe: [],
      goalReached: false,
      reason: 'start',
      usage: { promptTokens: 0, completionTokens: 0, modelCalls: 0 },
    };
    const at = '2026-12-01T00:00:00.050Z';
    const snapshots = new Map([
      ['late', { ...snap('skipped', { expired: true }), expired: { at, onExpire: 'skip' as const } }],
      ['down', { ...snap('succeeded', 'cached'), expired: { at, onExpire: 'downgrade' as const } }],
    ]);
    const graph = { nodes: [late, down, json('after')], edges: [['late', 'after']] } as Graph;
    const history = windowHistory('timeout: expired', last, carriedGraph(graph, snapshots), snapshots, graph);
    // The downgraded node ran its fallback: it is a completed node, not handed back.
    expect(history.expired).toEqual([
      {
        id: 'late',
        node: '{"kind":"tool","tool":"json","args":{"value":"late"},"ttlMs":50}',
        expiredAt: at,
        onExpire: 'skip',
      },
    ]);
    expect(history.failed).toEqual(['- after: did not run']);
  });
});
