/**
 * JSON-schema checks for structured model answers (ajv: the standard validator), compiled once per
 * schema. A schema's `pattern`s come from the graph's author and run against model output, so
 * they run on a linear-time engine (RE2): a pattern RE2 cannot run (lookaround, backreferences)
 * makes the schema invalid, and no pattern can hang a worker. Schemas come from callers, so the
 * compiled ones are kept in a bounded LRU: past its cap the least recently used is dropped, from
 * ajv too (`removeSchema`), and compiled again if it comes back.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv';
import { linearRegExpEngine } from '../policy/linear-regex.js';

// Draft 2020-12, the dialect zod's toJSONSchema and most clients write.
const ajv = new Ajv2020({ strict: false, allErrors: true, code: { regExp: linearRegExpEngine } });
/** Compiled schemas by their JSON text, least recently used first (a Map keeps insertion order). */
const cache = new Map<
  string,
  { readonly schema: Record<string, unknown>; readonly validate: ValidateFunction }
>();

/** Compiled schemas kept by default. */
export const SCHEMA_CACHE_MAX = 500;
let max: number = SCHEMA_CACHE_MAX;

/** Sets how many compiled schemas the process keeps (at least 1), dropping the oldest past it. */
export function setSchemaCacheMax(n: number): void {
  if (!Number.isInteger(n) || n < 1) throw new Error(`schema cache size must be an integer ≥ 1, got ${n}`);
  max = n;
  evict();
}

/** How many compiled schemas are kept now. */
export const schemaCacheSize = (): number => cache.size;

function evict(): void {
  for (const [key, entry] of cache) {
    if (cache.size <= max) return;
    cache.delete(key);
    ajv.removeSchema(entry.schema);
  }
}

/** Compiles `schema`; throws with ajv's reason when it is not a valid JSON schema. */
export function compileSchema(schema: Record<string, unknown>): ValidateFunction {
  const key = JSON.stringify(schema);
  const known = cache.get(key);
  if (known) {
    cache.delete(key);
    cache.set(key, known);
    return known.validate;
  }
  let validate: ValidateFunction;
  try {
    validate = ajv.compile(schema);
  } catch (err) {
    // ajv keeps what it added before failing: drop it, so refused schemas take no room either.
    ajv.removeSchema(schema);
    throw err;
  }
  cache.set(key, { schema, validate });
  evict();
  return validate;
}

/** Problems of `value` against `schema`, as readable lines; empty when it conforms. */
export function schemaProblems(schema: Record<string, unknown>, value: unknown): string[] {
  const validate = compileSchema(schema);
  if (validate(value)) return [];
  return (validate.errors ?? []).map((e) => `${e.instancePath || '(root)'} ${e.message ?? 'is invalid'}`);
}
