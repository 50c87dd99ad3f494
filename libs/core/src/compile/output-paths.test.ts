import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { missingPathIndex } from './output-paths.js';

describe('references into an output schema', () => {
  const schema = z.toJSONSchema(
    z.object({
      id: z.string(),
      address: z.object({ city: z.string() }).optional(),
      orders: z.array(z.object({ total: z.number() })),
      tags: z.record(z.string(), z.string()),
      either: z.union([z.object({ a: z.string() }), z.object({ b: z.string() })]),
    }),
    { io: 'output' },
  );
  it('refuses only a path the schema rules out, at the first segment it cannot have', () => {
    expect(missingPathIndex(schema, ['id'])).toBe(-1);
    expect(missingPathIndex(schema, ['nmae'])).toBe(0);
    expect(missingPathIndex(schema, ['address', 'city'])).toBe(-1);
    expect(missingPathIndex(schema, ['address', 'zip'])).toBe(1);
    expect(missingPathIndex(schema, ['orders', 0, 'total'])).toBe(-1);
    expect(missingPathIndex(schema, ['orders', '3', 'sum'])).toBe(2);
    expect(missingPathIndex(schema, ['tags', 'anything'])).toBe(-1);
    expect(missingPathIndex(schema, ['either', 'b'])).toBe(-1);
    expect(missingPathIndex(schema, ['either', 'c'])).toBe(1);
    expect(missingPathIndex(schema, ['id', 'length'])).toBe(1);
    expect(missingPathIndex({}, ['any', 'thing'])).toBe(-1);
  });
});
