import { describe, expect, it } from 'vitest';
import type { ExecutableNode } from '../nodes/index.js';
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

describe("a new run's first nodes in carrier jobs", () => {
  it('groups the nodes that may be handed off by the width, in the order given', () => {
    const nodes = nodesOf(...['a', 'b', 'c', 'd', 'e', 'f', 'g'].map((id) => tool(id)));
    expect(carriedStarts(nodes, ['a', 'b', 'c', 'd', 'e', 'f', 'g'], 3)).toEqual({
      carried: [
        ['a', 'b', 'c'],
        ['d', 'e', 'f'],
      ],
      // A group of one is a job of its own.
      own: ['g'],
    });
    expect(carriedStarts(nodes, ['a', 'b'], 8)).toEqual({ carried: [['a', 'b']], own: [] });
    expect(carriedStarts(nodes, ['a'], 8)).toEqual({ carried: [], own: ['a'] });
  });

  it('gives a job of its own to a node that parks, one with a TTL and a custom tool’s, in order', () => {
    const nodes = nodesOf(
      { id: 'w', kind: 'wait', signal: 'go' },
      tool('a'),
      tool('t', 'json', { ttlMs: 1000 }),
      tool('c', 'acme.lookup'),
      tool('m', 'mcp.files.read'),
      tool('b', 'http'),
      tool('z'),
    );
    expect(carriedStarts(nodes, ['w', 'a', 't', 'c', 'm', 'b', 'z'], 3)).toEqual({
      carried: [['a', 'm', 'b']],
      // In the order given: with one tool slot the first of them runs first, as without carriers.
      own: ['w', 't', 'c', 'z'],
    });
  });
});
