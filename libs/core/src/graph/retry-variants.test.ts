import { describe, expect, it } from 'vitest';
import { applyVariant, nodeForAttempt, variantNumber } from './retry-variants.js';

describe('retry variants', () => {
  it('run the first attempt as written, then the overrides in turn, the last one repeating', () => {
    expect([1, 2, 3, 4, 5].map((attempt) => variantNumber(2, attempt))).toEqual([undefined, 1, 2, 2, 2]);
    expect(variantNumber(0, 3)).toBeUndefined();
  });

  it('merge an object field one level deep and replace the others', () => {
    const node = { id: 'a', kind: 'tool', args: { url: 'https://a.test/x', method: 'GET' }, timeoutMs: 100 };
    expect(applyVariant(node, { args: { url: 'https://mirror.test/x' }, timeoutMs: 500 })).toEqual({
      id: 'a',
      kind: 'tool',
      args: { url: 'https://mirror.test/x', method: 'GET' },
      timeoutMs: 500,
    });
    // The node itself is left as it was.
    expect(node.args.url).toBe('https://a.test/x');
  });

  it('answer the node an attempt runs, and which override it took', () => {
    const node = {
      id: 'm',
      kind: 'llm',
      prompt: 'extract',
      retry: { vary: [{ prompt: 'extract, simply' }] },
    };
    expect(nodeForAttempt(node, 1)).toEqual({ node });
    expect(nodeForAttempt(node, 2)).toEqual({ node: { ...node, prompt: 'extract, simply' }, variant: 1 });
  });
});
