/** Static checks of map nodes: the template at its exact field, item references only inside it. */
import { describe, expect, it } from 'vitest';
import { builtinTools, parseAllowHosts } from '../tools/index.js';
import { validateGraph } from './validate.js';

const tools = builtinTools({ egress: parseAllowHosts('') });

const issuesOf = (graph: unknown): { path: string; message: string }[] => {
  const result = validateGraph(graph, { tools });
  return result.ok ? [] : [...result.issues];
};

const source = { id: 's', kind: 'tool', tool: 'json', args: { value: [1, 2] } };
const map = (extra: Record<string, unknown>): unknown => ({
  nodes: [source, { id: 'm', kind: 'map', over: { $ref: 's.output' }, ...extra }],
  edges: [['s', 'm']],
});

describe('map nodes in validation', () => {
  it('accept a template referencing item, index and the map’s dependencies', () => {
    const template = { kind: 'tool', tool: 'json', args: { value: { i: '{{index}}', v: { $ref: 'item' } } } };
    expect(issuesOf(map({ node: template }))).toEqual([]);
  });

  it('check the template like a node, at its own path', () => {
    expect(issuesOf(map({ node: { kind: 'tool', tool: 'nope' } }))).toContainEqual({
      path: 'nodes.1.node.tool',
      message: expect.stringContaining('nope'),
    });
    expect(issuesOf(map({ node: { kind: 'map' } }))[0]?.path).toBe('nodes.1.node.kind');
    expect(issuesOf(map({}))[0]).toEqual({
      path: 'nodes.1.node',
      message: 'a map needs its item template: "node" (one node) or "graph"',
    });
    expect(issuesOf(map({ graph: { nodes: [] }, node: { kind: 'tool', tool: 'json' } }))[0]?.path).toBe(
      'nodes.1.graph',
    );
  });

  it('bound concurrency and maxItems, and take minSuccess only with onItemError "continue"', () => {
    const node = { kind: 'tool', tool: 'json', args: { value: 1 } };
    expect(issuesOf(map({ node, concurrency: 1001 }))[0]?.path).toBe('nodes.1.concurrency');
    expect(issuesOf(map({ node, maxItems: 10_001 }))[0]?.path).toBe('nodes.1.maxItems');
    expect(issuesOf(map({ node, minSuccess: 2 }))[0]?.path).toBe('nodes.1.minSuccess');
    expect(issuesOf(map({ node, onItemError: 'continue', minSuccess: 1.5 }))[0]?.path).toBe(
      'nodes.1.minSuccess',
    );
    expect(issuesOf(map({ node, onItemError: 'continue', minSuccess: 0.5 }))).toEqual([]);
  });

  it('refuse item and index outside a template, and references to nodes the map does not follow', () => {
    expect(
      issuesOf({ nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: '{{index}}' } }] }),
    ).toEqual([{ path: 'nodes.0.args.value', message: 'reference to unknown node "index"' }]);
    const late = {
      nodes: [
        source,
        {
          id: 'm',
          kind: 'map',
          over: { $ref: 's.output' },
          node: { kind: 'tool', tool: 'json', args: { value: '{{t.output}}' } },
        },
        { id: 't', kind: 'tool', tool: 'json', args: { value: 1 } },
      ],
      edges: [['s', 'm']],
    };
    expect(issuesOf(late)[0]?.path).toBe('nodes.1.node.args.value');
  });
});

describe('graph templates', () => {
  const graph = {
    nodes: [
      { id: 'a', kind: 'tool', tool: 'json', args: { value: { u: '{{item.url}}', i: { $ref: 'index' } } } },
      { id: 'b', kind: 'tool', tool: 'json', args: { value: [{ $ref: 'a.output' }, { $ref: 'input.tag' }] } },
    ],
    edges: [['a', 'b']],
  };

  it('reads item and index as the child run’s input, and the map’s input beside them', () => {
    const result = validateGraph(map({ graph, input: { tag: { $ref: 's.output.0' } } }), { tools });
    expect(result.ok).toBe(true);
    const node = result.ok ? result.graph.nodes[1] : undefined;
    expect(node).toMatchObject({
      graph: {
        nodes: [
          { args: { value: { u: '{{input.item.url}}', i: { $ref: 'input.index' } } } },
          { args: { value: [{ $ref: 'a.output' }, { $ref: 'input.tag' }] } },
        ],
      },
    });
  });

  it('refuses input on a node template, reserved input names, and references the map does not follow', () => {
    const node = { kind: 'tool', tool: 'json', args: { value: 1 } };
    expect(issuesOf(map({ node, input: { x: 1 } }))[0]?.path).toBe('nodes.1.input');
    expect(issuesOf(map({ graph, input: { index: 1 } }))[0]?.path).toBe('nodes.1.input.index');
    expect(issuesOf(map({ graph, input: { x: { $ref: 'elsewhere.output' } } }))[0]?.path).toBe(
      'nodes.1.input.x',
    );
    expect(issuesOf(map({ graph: { nodes: [] } }))[0]?.path).toMatch(/^nodes\.1\.graph/);
  });
});
