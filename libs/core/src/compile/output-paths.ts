/**
 * Whether a path can be read in values a JSON Schema describes: how a reference into a custom
 * tool's output (`customer.output.nmae`) is refused before anything runs. Answers "no" only where
 * the schema rules the path out (an object with its properties listed and no others); anything it
 * leaves open (no schema, `additionalProperties`, unions that may hold it) is "yes". Pure.
 */
type Schema = Readonly<Record<string, unknown>>;

const isSchema = (value: unknown): value is Schema =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const INDEX = /^(0|[1-9]\d*)$/;

/** The path's first segment that the schema rules out, as its index; -1 when the path may be read. */
export function missingPathIndex(schema: unknown, path: readonly (string | number)[], at = 0): number {
  if (at >= path.length || !isSchema(schema)) return -1;
  for (const union of ['anyOf', 'oneOf'] as const) {
    const branches = schema[union];
    if (Array.isArray(branches)) {
      const results = branches.map((b) => missingPathIndex(b, path, at));
      // Readable through any branch: readable. Otherwise the deepest refusal says most.
      return results.includes(-1) ? -1 : Math.max(...results);
    }
  }
  if (Array.isArray(schema.allOf)) {
    for (const part of schema.allOf) {
      const result = missingPathIndex(part, path, at);
      if (result !== -1) return result;
    }
  }
  const segment = String(path[at]);
  const properties = isSchema(schema.properties) ? schema.properties : undefined;
  if (properties && Object.hasOwn(properties, segment))
    return missingPathIndex(properties[segment], path, at + 1);
  const type = schema.type;
  if ((type === 'array' || (Array.isArray(type) && type.includes('array'))) && INDEX.test(segment)) {
    if (Array.isArray(schema.prefixItems) && Number(segment) < schema.prefixItems.length)
      return missingPathIndex(schema.prefixItems[Number(segment)], path, at + 1);
    return missingPathIndex(schema.items, path, at + 1);
  }
  if (isSchema(schema.additionalProperties))
    return missingPathIndex(schema.additionalProperties, path, at + 1);
  const closedObject = properties !== undefined && schema.additionalProperties === false;
  // A scalar type has nothing below it.
  const scalar =
    typeof type === 'string' && ['string', 'number', 'integer', 'boolean', 'null'].includes(type);
  return closedObject || scalar ? at : -1;
}
