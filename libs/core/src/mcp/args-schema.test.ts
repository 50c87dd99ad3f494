import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { argsSchemaCompiler, withoutForeignPatterns } from './args-schema.js';

const issues = (schema: z.ZodType, value: unknown): { path: PropertyKey[]; message: string }[] => {
  const parsed = schema.safeParse(value);
  return parsed.success ? [] : parsed.error.issues.map((i) => ({ path: i.path, message: i.message }));
};

describe('an MCP tool args schema', () => {
  const sum = {
    $schema: 'http://json-schema.org/draft-07/schema#',
    type: 'object',
    properties: {
      a: { type: 'number' },
      b: { type: 'number' },
      tags: { type: 'array', items: { type: 'string' } },
    },
    required: ['a', 'b'],
    additionalProperties: false,
  };

  it('accepts args that fit and puts each problem at its path below the args', () => {
    const { input, problem } = argsSchemaCompiler()(sum);
    expect(problem).toBeUndefined();
    expect(issues(input, { a: 1, b: 2 })).toEqual([]);
    expect(issues(input, { a: 1, b: 'two', tags: ['x', 3], c: true })).toEqual(
      expect.arrayContaining([
        { path: ['b'], message: 'must be number' },
        { path: ['tags', 1], message: 'must be string' },
        { path: ['c'], message: 'is not an argument of this tool' },
      ]),
    );
    expect(issues(input, { a: 1 })).toEqual([{ path: ['b'], message: 'is required' }]);
  });

  it('reads a schema without $schema as draft 2020-12', () => {
    const { input, problem } = argsSchemaCompiler()({
      type: 'object',
      properties: {
        pair: { type: 'array', prefixItems: [{ type: 'string' }], items: { type: 'integer', minimum: 1 } },
      },
    });
    expect(problem).toBeUndefined();
    expect(issues(input, { pair: ['a', 2] })).toEqual([]);
    expect(issues(input, { pair: [1, 0] })).toEqual([
      { path: ['pair', 0], message: 'must be string' },
      { path: ['pair', 1], message: 'must be >= 1' },
    ]);
  });

  it('runs patterns on RE2 and leaves the ones RE2 cannot run to the server', () => {
    const { input, problem } = argsSchemaCompiler()({
      type: 'object',
      properties: {
        code: { type: 'string', pattern: '^[A-Z]{3}$' },
        email: { type: 'string', pattern: '^(?!\\.)[^@]+@[^@]+$' },
      },
    });
    expect(problem).toBeUndefined();
    expect(issues(input, { code: 'abc' })).toEqual([
      { path: ['code'], message: 'must match pattern "^[A-Z]{3}$"' },
    ]);
    expect(issues(input, { code: 'ABC', email: '.x@y' })).toEqual([]);
    // ^(a+)+$ would backtrack for ever in JavaScript's engine; RE2 answers at once.
    const { input: nested } = argsSchemaCompiler()({
      type: 'object',
      properties: { s: { pattern: '^(a+)+$' } },
    });
    expect(issues(nested, { s: `${'a'.repeat(50_000)}b` })).toHaveLength(1);
  });

  it('keeps the patterns in data keywords as they are', () => {
    expect(withoutForeignPatterns({ default: { pattern: '(?!x)' }, pattern: '(?!x)' })).toEqual({
      default: { pattern: '(?!x)' },
    });
  });

  it('takes any args when the schema does not compile, and says why', () => {
    const { input, problem } = argsSchemaCompiler()({
      type: 'object',
      properties: { a: { type: 'nonsense' } },
    });
    expect(problem).toMatch(/type/);
    expect(issues(input, { a: 1 })).toEqual([]);
  });
});
