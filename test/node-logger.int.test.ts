/**
 * A node's logger is made when something logs for it, not before: a child logger bound to the
 * run and node ids, made for every node (or every tool call) whether anything logs or not, costs
 * each node CPU and garbage for nothing.
 */
import pino from 'pino';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { runToEnd, startStack, type Stack } from './support/stack.js';

let stack: Stack;

beforeAll(async () => {
  stack = await startStack();
});

afterAll(async () => {
  await stack?.close();
});

/** A source, `width` json nodes that read it, and a join: `width` + 2 nodes. */
const fanOut = (width: number): unknown => {
  const branches = Array.from({ length: width }, (_, i) => `b${i}`);
  return {
    graph: {
      nodes: [
        { id: 'src', kind: 'tool', tool: 'json', args: { value: { n: 1 } } },
        ...branches.map((id) => ({
          id,
          kind: 'tool',
          tool: 'json',
          args: { value: { $ref: 'src.output' } },
        })),
        {
          id: 'join',
          kind: 'tool',
          tool: 'json',
          args: { value: branches.map((b) => ({ $ref: `${b}.output.n` })) },
        },
      ],
      edges: [...branches.map((b) => ['src', b]), ...branches.map((b) => [b, 'join'])],
    },
  };
};

it('a run of json nodes that log nothing makes no logger per node or per call', async () => {
  // Every pino logger, and every child of one, inherits `child` from one shared prototype.
  const shared = Object.getPrototypeOf(Object.getPrototypeOf(pino({ enabled: false }))) as {
    child: pino.Logger['child'];
  };
  const child = vi.spyOn(shared, 'child');
  try {
    await runToEnd(stack.url, fanOut(1)); // warm: whatever a process makes once
    const childrenOf = async (width: number): Promise<number> => {
      const before = child.mock.calls.length;
      const doc = await runToEnd(stack.url, fanOut(width));
      expect(doc.status).toBe('succeeded');
      expect(Object.keys(doc.nodes)).toHaveLength(width + 2);
      return child.mock.calls.length - before;
    };
    const small = await childrenOf(1);
    const large = await childrenOf(40);
    // 39 more nodes, and as many more tool calls, make not one logger more.
    expect(large).toBe(small);
  } finally {
    child.mockRestore();
  }
});
