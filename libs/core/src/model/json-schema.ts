/**
 * JSON-schema checks for structured model answers (ajv: the standard validator), compiled once
 * per schema. A schema's `pattern`s come from the graph's author and run against model output, so
 * they run on a linear-time engine (RE2): a pattern RE2 cannot run (lookaround, backreferences)
 * makes the schema invalid, and no pattern can hang a worker.
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv';
import { linearRegExpEngine } from '../policy/linear-regex.js';

// Draft 2020-12, the dialect zod's toJSONSchema and most clients write.
const ajv = new Ajv2020({ strict: false, allErrors: true, code: { regExp: linearRegExpEngine } });
const cache = new Map<string, ValidateFunction>();

/** Compiles `schema`; throws with ajv's reason when it is not a valid JSON schema. */
export function compileSchema(schema: Record<string, unknown>): ValidateFunction {
  const key = JSON.stringify(schema);
  const known = cache.get(key);
  if (known) return known;
  const validate = ajv.compile(schema);
  cache.set(key, validate);
  return validate;
}

/** Problems of `value` against `schema`, as readable lines; empty when it conforms. */
export function schemaProblems(schema: Record<string, unknown>, value: unknown): string[] {
  const validate = compileSchema(schema);
  if (validate(value)) return [];
  return (validate.errors ?? []).map((e) => `${e.instancePath || '(root)'} ${e.message ?? 'is invalid'}`);
}
