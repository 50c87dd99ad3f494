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
      message: 'a map needs its item template: "node"',
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
