import { describe, expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/client';
import { definitionOf, resolvedInput } from './resolved-input.js';

const doc = {
  input: { city: 'Lyon' },
  graph: {
    nodes: [
      { id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } },
      {
        id: 'b',
        kind: 'tool',
        tool: 'http',
        args: { url: 'https://x.test/{{a.output.name}}?c={{input.city}}', json: { $ref: 'a.output' } },
      },
      {
        id: 'p',
        kind: 'graph',
        graph: { nodes: [{ id: 'q', kind: 'tool', tool: 'json', args: { value: { $ref: 'r.output.n' } } }] },
      },
      {
        id: 'z',
        kind: 'tool',
        tool: 'json',
        args: { value: { $ref: 'gone.output' }, none: { $ref: 'a.output.nothing' } },
      },
    ],
    edges: [['a', 'b']],
  },
  nodes: {
    a: { id: 'a', status: 'succeeded', output: { name: 'page', n: null } },
    b: { id: 'b', status: 'pending' },
    'p/q': { id: 'p/q', status: 'pending' },
    'p/r': { id: 'p/r', status: 'succeeded', output: { n: 7 } },
    z: { id: 'z', status: 'pending' },
  },
} as unknown as RunDocument;

describe('resolvedInput', () => {
  it('fills in whole-value and in-string references from outputs and the run input', () => {
    expect(resolvedInput(doc, 'b')).toEqual({
      tool: 'http',
      args: { url: 'https://x.test/page?c=Lyon', json: { name: 'page', n: null } },
    });
  });

  it('reads a nested node’s siblings under its parent, and leaves what does not resolve as written', () => {
    expect(definitionOf(doc, 'p/q')?.id).toBe('q');
    expect(resolvedInput(doc, 'p/q')).toEqual({ tool: 'json', args: { value: 7 } });
    expect(resolvedInput(doc, 'z')).toEqual({
      tool: 'json',
      args: { value: { $ref: 'gone.output' }, none: { $ref: 'a.output.nothing' } },
    });
    expect(resolvedInput(doc, 'missing')).toBeUndefined();
  });
});
