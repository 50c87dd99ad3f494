import { describe, expect, it } from 'vitest';
import { findReferences, resolveReferences } from './references.js';

describe('references', () => {
  const scope = { input: { city: 'Oslo' }, a: { output: { body: { n: 3, list: [1, 2] } } } };

  it('finds $ref objects and templates with their location', () => {
    expect(findReferences({ x: { $ref: 'a.output.body' }, y: ['hi {{input.city}}'] })).toEqual([
      { root: 'a', path: ['output', 'body'], at: ['x'] },
      { root: 'input', path: ['city'], at: ['y', 0] },
    ]);
  });

  it('replaces $ref with the value, keeping its type', () => {
    expect(resolveReferences({ v: { $ref: 'a.output.body.list' } }, scope)).toEqual({ v: [1, 2] });
  });

  it('interpolates templates into strings', () => {
    expect(
      resolveReferences('n={{a.output.body.n}} in {{ input.city }}; {{a.output.body.list}}', scope),
    ).toBe('n=3 in Oslo; [1,2]');
  });

  it('resolves a missing path to undefined (empty inside a string)', () => {
    expect(resolveReferences({ v: { $ref: 'a.output.nope' }, s: '[{{a.output.nope}}]' }, scope)).toEqual({
      v: undefined,
      s: '[]',
    });
  });

  it('keeps every key as data, `__proto__` included, and leaves the value it read unchanged', () => {
    const value = JSON.parse(
      '{"__proto__": {"x": "{{input.city}}"}, "k": [{"$ref": "a.output.body.n"}]}',
    ) as unknown;
    const copy = structuredClone(value);
    const resolved = resolveReferences(value, scope) as Record<string, unknown>;
    expect(Object.keys(resolved)).toEqual(['__proto__', 'k']);
    expect(Object.getPrototypeOf(resolved)).toBe(Object.prototype);
    expect(resolved['__proto__']).toEqual({ x: 'Oslo' });
    expect(resolved.k).toEqual([3]);
    expect(value).toEqual(copy);
    expect(findReferences(value, ['args']).map((r) => r.at)).toEqual([
      ['args', '__proto__', 'x'],
      ['args', 'k', 0],
    ]);
  });

  it('treats an object with $ref and other keys as plain data', () => {
    expect(resolveReferences({ $ref: 'a.output', other: 1 }, scope)).toEqual({ $ref: 'a.output', other: 1 });
  });
});
