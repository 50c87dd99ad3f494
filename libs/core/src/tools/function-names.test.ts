import { describe, expect, it } from 'vitest';
import { functionNames } from './function-names.js';

describe('function names', () => {
  it('keeps names a model API accepts and maps the others both ways', () => {
    const names = functionNames(['http', 'mcp.everything.get-sum', 'mcp.fs.read file']);
    expect(names.toFunction('http')).toBe('http');
    expect(names.toFunction('mcp.everything.get-sum')).toBe('mcp__everything__get-sum');
    expect(names.toFunction('mcp.fs.read file')).toBe('mcp__fs__read_file');
    expect(names.toTool('mcp__everything__get-sum')).toBe('mcp.everything.get-sum');
    // A model that answers with the tool's own name is understood too.
    expect(names.toTool('mcp.everything.get-sum')).toBe('mcp.everything.get-sum');
  });

  it('keeps function names unique and at most 64 characters', () => {
    const long = `mcp.s.${'x'.repeat(100)}`;
    const names = functionNames(['mcp.a.b_c', 'mcp.a.b c', 'mcp__a__b_c', long, `${long}y`]);
    const fns = ['mcp.a.b_c', 'mcp.a.b c', long, `${long}y`].map(names.toFunction);
    expect(new Set([...fns, 'mcp__a__b_c']).size).toBe(5);
    for (const fn of fns) expect(fn).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
    for (const tool of ['mcp.a.b_c', 'mcp.a.b c', long, `${long}y`])
      expect(names.toTool(names.toFunction(tool))).toBe(tool);
  });
});
