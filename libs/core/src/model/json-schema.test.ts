import { describe, expect, it } from 'vitest';
import { compileSchema, schemaProblems } from './json-schema.js';

describe('JSON schemas of llm nodes', () => {
  it('check patterns with a linear-time engine, each pattern its own', () => {
    const schema = {
      type: 'object',
      properties: { v: { type: 'string', pattern: '^(a+)+$' }, w: { type: 'string', pattern: '^b$' } },
    };
    expect(schemaProblems(schema, { v: 'aaa', w: 'b' })).toEqual([]);
    expect(schemaProblems(schema, { v: `${'a'.repeat(64)}b`, w: 'c' })).toEqual([
      '/v must match pattern "^(a+)+$"',
      '/w must match pattern "^b$"',
    ]);
  });

  it('refuse a schema whose pattern the engine cannot run', () => {
    expect(() => compileSchema({ type: 'string', pattern: '(a)\\1' })).toThrow();
  });
});
