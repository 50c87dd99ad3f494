import { describe, expect, it } from 'vitest';
import type { ExecutableNode } from '../nodes/index.js';
import type { Tool } from '../tools/tool.js';
import { carriedStarts } from './handoff.js';

const tool = (id: string, name = 'json', extra: object = {}): ExecutableNode => ({
  id,
  kind: 'tool',
  tool: name,
  args: {},
  ...extra,
});
const nodesOf = (...nodes: ExecutableNode[]): Map<string, ExecutableNode> =>
  new Map(nodes.map((n) => [n.id, n]));
/** A team's own tool, as the registry knows it. */
const custom = { name: 'acme.lookup', custom: { queue: 'default' }, codeHere: true } as unknown as Tool;
const tools = new Map([['acme.lookup', custom]]);

describe("a new run's first nodes in carrier jobs", () => {
  it('groups the nodes that may be handed off by the width, in the order given', () => {
    const nodes = nodesOf(...['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((id) => tool(id)));
    expect(carriedStarts(nodes, ['a', 'b', 'c', 'd', 'e', 'f', 'g'], 3, new Map())).toEqual({
      carried: [
        ['a', 'b', 'c'],
        ['d', 'e', 'f'],
      ],
      // A group of one is a job of its own.
      own: ['g'],
    });
    expect(carriedStarts(nodes, ['a', 'b'], 8, new Map())).toEqual({ carried: [['a', 'b']], own: [] });
    expect(carriedStarts(nodes, ['a'], 8, new Map())).toEqual({ carried: [], own: ['a'] });
  });

  it('gives a job of its own to a node that parks, one with a TTL and a custom tool’s', () => {
    const nodes = nodesOf(
      tool('a'),
      { id: 'w', kind: 'wait', signal: 'go' },
      tool('t', 'json', { ttlMs: 1000 }),
      tool('c', 'acme.lookup'),
      tool('b'),
    );
    expect(carriedStarts(nodes, ['a', 'w', 't', 'c', 'b'], 8, tools)).toEqual({
      carried: [['a', 'b']],
      own: ['w', 't', 'c'],
    });
  });
});
