import { describe, expect, it } from 'vitest';
import { expandGraph } from './expand.js';
import type { Graph } from '../nodes/index.js';

describe('expandGraph', () => {
  it('namespaces nested nodes, rewires edges and rewrites references, deterministically', () => {
    const graph: Graph = {
      nodes: [
        { id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } },
        {
          id: 'g',
          kind: 'graph',
          input: { x: { $ref: 'a.output' } },
          graph: {
            nodes: [
              { id: 'p', kind: 'tool', tool: 'json', args: { value: { $ref: 'input.x' } } },
              { id: 'q', kind: 'tool', tool: 'json', args: { value: 'got {{p.output}}' } },
            ],
            edges: [['p', 'q']],
          },
        },
        { id: 'z', kind: 'tool', tool: 'json', args: { value: { $ref: 'g.output.q' } } },
      ],
      edges: [
        ['a', 'g'],
        ['g', 'z'],
      ],
    };
    const flat = expandGraph(graph);
    expect(flat).toEqual(expandGraph(graph));
    expect(flat.nodes.map((n) => n.id)).toEqual(['a', 'g/input', 'g/p', 'g/q', 'g', 'z']);
    expect(flat.edges).toEqual([
      ['g/p', 'g/q'],
      ['g/input', 'g/p'],
      ['g/q', 'g'],
      ['a', 'g/input'],
      ['g', 'z'],
    ]);
    const byId = Object.fromEntries(flat.nodes.map((n) => [n.id, n]));
    expect(byId['g/input']).toMatchObject({ args: { value: { x: { $ref: 'a.output' } } } });
    expect(byId['g/p']).toMatchObject({ args: { value: { $ref: 'g/input.output.x' } } });
    expect(byId['g/q']).toMatchObject({ args: { value: 'got {{g/p.output}}' } });
    expect(byId.g).toMatchObject({ tool: 'json', args: { value: { q: { $ref: 'g/q.output' } } } });
  });
});
