import { describe, expect, it } from 'vitest';
import type { ExecutableGraph, ToolNode } from '../nodes/index.js';
import { rerunSet, rerunStart } from './rerun-set.js';

const tool = (id: string): ToolNode => ({ id, kind: 'tool', tool: 'json', args: {} });
/** a → b → d, a → c → d, d → e; x stands alone. */
const plan: ExecutableGraph = {
  nodes: ['a', 'b', 'c', 'd', 'e', 'x'].map(tool),
  edges: [
    ['a', 'b'],
    ['a', 'c'],
    ['b', 'd'],
    ['c', 'd'],
    ['d', 'e'],
  ],
};

describe('rerunSet', () => {
  it('resumes: what did not succeed and everything downstream runs again', () => {
    const succeeded = new Set(['a', 'b', 'x']);
    const { rerun, pending } = rerunSet(plan, (id) => succeeded.has(id));
    expect(rerun).toEqual(['c', 'd', 'e']);
    expect(Object.fromEntries(pending)).toEqual({ c: 0, d: 1, e: 1 });
  });

  it('reruns from a node: it and everything downstream, keeping what is upstream and beside it', () => {
    const { rerun, pending } = rerunSet(plan, (id) => id !== 'b');
    expect(rerun).toEqual(['b', 'd', 'e']);
    // b's dependency a is kept, so b is ready at once; d waits for b only (c is kept).
    expect(Object.fromEntries(pending)).toEqual({ b: 0, d: 1, e: 1 });
  });

  it('reruns a source and so the whole of its downstream', () => {
    expect(rerunSet(plan, (id) => id !== 'a').rerun).toEqual(['a', 'b', 'c', 'd', 'e']);
  });
});

describe('rerunStart', () => {
  const nested: ExecutableGraph = {
    nodes: ['seed', 'p/input', 'p/double', 'p', 'after'].map(tool),
    edges: [
      ['seed', 'p/input'],
      ['p/input', 'p/double'],
      ['p/double', 'p'],
      ['p', 'after'],
    ],
  };

  it('starts a graph node at its input node, so its nested nodes run again', () => {
    expect(rerunStart(nested, 'p')).toBe('p/input');
    expect(rerunSet(nested, (id) => id !== rerunStart(nested, 'p')).rerun).toEqual([
      'p/input',
      'p/double',
      'p',
      'after',
    ]);
  });

  it('starts any other node at itself, nested ones included, and knows no other', () => {
    expect(rerunStart(nested, 'seed')).toBe('seed');
    expect(rerunStart(nested, 'p/double')).toBe('p/double');
    expect(rerunStart(nested, 'nope')).toBeUndefined();
  });
});
