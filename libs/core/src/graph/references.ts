/**
 * References let a node's args use its dependencies' results:
 * `{"$ref": "nodeId.output.path"}` replaces a whole value, `"…{{nodeId.output.path}}…"` interpolates
 * into a string, and `input.*` reads the run's input. Pure functions: no I/O.
 */

export interface Reference {
  /** `input` or a node id. */
  readonly root: string;
  /** Path below the root, e.g. `['output', 'body']`. */
  readonly path: readonly string[];
  /** Where in `args` the reference sits, e.g. `['headers', 'x-id']`. */
  readonly at: readonly (string | number)[];
}

const TEMPLATE = /\{\{\s*([^{}\s]+)\s*\}\}/g;

/** A whole-value reference: an object whose one key is `$ref`, naming a string. */
export function isRefObject(value: unknown): value is { $ref: string } {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.keys(value).length === 1 &&
    typeof (value as { $ref?: unknown }).$ref === 'string'
  );
}

function parse(expr: string, at: readonly (string | number)[]): Reference {
  const [root = '', ...path] = expr.split('.');
  return { root, path, at };
}

/** Every reference inside `value`, in document order. */
export function findReferences(value: unknown, at: (string | number)[] = []): Reference[] {
  if (isRefObject(value)) return [parse(value.$ref, at)];
  if (typeof value === 'string') {
    return [...value.matchAll(TEMPLATE)].map((m) => parse(m[1] ?? '', at));
  }
  if (Array.isArray(value)) return value.flatMap((item, i) => findReferences(item, [...at, i]));
  if (typeof value === 'object' && value !== null) {
    return Object.entries(value).flatMap(([k, v]) => findReferences(v, [...at, k]));
  }
  return [];
}

export function getPath(value: unknown, path: readonly string[]): unknown {
  let current: unknown = value;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

function stringify(value: unknown): string {
  if (value === undefined || value === null) return '';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/**
 * Replaces every reference in `value` with data from `scope` (keys: `input` and node ids, each
 * holding that node's snapshot). A missing path resolves to `undefined` (`""` inside a string).
 */
export function resolveReferences(value: unknown, scope: Readonly<Record<string, unknown>>): unknown {
  const lookup = (expr: string): unknown => {
    const { root, path } = parse(expr, []);
    return getPath(scope[root], path);
  };
  if (isRefObject(value)) return lookup(value.$ref);
  if (typeof value === 'string') {
    return value.replace(TEMPLATE, (_m, expr: string) => stringify(lookup(expr)));
  }
  if (Array.isArray(value)) return value.map((item) => resolveReferences(item, scope));
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveReferences(v, scope)]));
  }
  return value;
}

/**
 * Text taken literally (a task, a chat message): `{{…}}` in it must not read as a reference, so a
 * zero-width space goes between the braces. The model still reads the text as written.
 */
export const literalText = (text: string): string => text.replaceAll('{{', '{\u200b{');
