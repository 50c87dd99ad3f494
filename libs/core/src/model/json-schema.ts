/** JSON-schema checks for structured model answers (ajv: the standard validator), compiled once per schema. */
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv';

// Draft 2020-12, the dialect zod's toJSONSchema and most clients write.
const ajv = new Ajv2020({ strict: false, allErrors: true });
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
