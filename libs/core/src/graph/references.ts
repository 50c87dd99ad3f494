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
  const path = expr.split('.');
  const root = path.shift() ?? '';
  return { root, path, at };
}

/** Every reference inside `value`, in document order. */
export function findReferences(value: unknown, at: (string | number)[] = []): Reference[] {
  const found: Reference[] = [];
  collectReferences(value, [...at], found);
  return found;
}

// One walk with one path that grows and shrinks as it goes: a reference found copies it, nothing
// else allocates (graphs are validated on every accept, and most of their values hold none).
function collectReferences(value: unknown, at: (string | number)[], found: Reference[]): void {
  if (typeof value === 'string') {
    if (!value.includes('{{')) return;
    for (const m of value.matchAll(TEMPLATE)) found.push(parse(m[1] ?? '', [...at]));
  } else if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      at.push(i);
      collectReferences(value[i], at, found);
      at.pop();
    }
  } else if (typeof value === 'object' && value !== null) {
    if (isRefObject(value)) {
      found.push(parse(value.$ref, [...at]));
      return;
    }
    for (const key of Object.keys(value)) {
      at.push(key);
      collectReferences((value as Record<string, unknown>)[key], at, found);
      at.pop();
    }
  }
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
  const resolve = (v: unknown): unknown => {
    if (typeof v === 'string') {
      return v.includes('{{') ? v.replace(TEMPLATE, (_m, expr: string) => stringify(lookup(expr))) : v;
    }
    if (Array.isArray(v)) return v.map(resolve);
    if (typeof v === 'object' && v !== null) {
      if (isRefObject(v)) return lookup(v.$ref);
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(v)) setOwn(out, key, resolve((v as Record<string, unknown>)[key]));
      return out;
    }
    return v;
  };
  return resolve(value);
}

/** `target[key] = value` as an own property, `__proto__` included (as `Object.fromEntries` would). */
export function setOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  } else {
    target[key] = value;
  }
}

/**
 * Text taken literally (a task, a chat message): `{{…}}` in it must not read as a reference, so a
 * zero-width space goes between the braces. The model still reads the text as written.
 */
export const literalText = (text: string): string => text.replaceAll('{{', '{\u200b{');
