/**
 * Log redaction by field name, case-insensitive and at any depth: pino's own `redact` takes exact,
 * case-sensitive paths, so `Authorization` three levels down in a header bag would slip through.
 * The walk copies only the objects it changes and stops at a fixed depth, so a line without
 * credentials costs one pass over its fields. Pure.
 */

export const REDACTED = '[redacted]';

/** Field names redacted wherever they appear (compared lower-cased). */
export const REDACTED_NAMES = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'apikey',
  'password',
  'passwd',
  'token',
  'secret',
  'credentials',
  'openai_api_key',
  'tetraloop_admin_token',
  'tetraloop_secret_key',
];

/** Names ending like a credential: `X-Api-Key`, `api_key`, `access_token`, `client-secret`. */
const CREDENTIAL_SUFFIX = /[-_](key|token|secret|password)$/;

/** Objects nested deeper than this are logged as they are. */
const MAX_DEPTH = 10;

/** The field name a configured entry names: a pino-style path (`*.card`, `a["x-key"]`) counts as its last name. */
export function fieldName(entry: string): string {
  const last = entry.match(/\[\s*["']?([^"'\]]+)["']?\s*\]$/)?.[1] ?? entry.split('.').at(-1) ?? entry;
  return last.trim().toLowerCase();
}

const isPlain = (value: unknown): value is Record<string, unknown> => {
  if (typeof value !== 'object' || value === null) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
};

/**
 * A function that answers its argument with every field named like a credential (built in, or
 * one of `extra`) replaced by {@link REDACTED}; the argument itself is never changed.
 */
export function redactor(extra: readonly string[] = []): <T>(value: T) => T {
  const names = new Set([...REDACTED_NAMES, ...extra.map(fieldName)]);
  const sensitive = (key: string): boolean => {
    const lower = key.toLowerCase();
    return names.has(lower) || CREDENTIAL_SUFFIX.test(lower);
  };
  const walk = (value: unknown, depth: number): unknown => {
    if (depth > MAX_DEPTH) return value;
    if (Array.isArray(value)) {
      const items = value as unknown[];
      let copy: unknown[] | undefined;
      items.forEach((item, i) => {
        const next = walk(item, depth + 1);
        if (next !== item) (copy ??= [...items])[i] = next;
      });
      return copy ?? value;
    }
    if (!isPlain(value)) return value;
    let copy: Record<string, unknown> | undefined;
    for (const key of Object.keys(value)) {
      const item = value[key];
      const next = sensitive(key) ? REDACTED : walk(item, depth + 1);
      if (next !== item) (copy ??= { ...value })[key] = next;
    }
    return copy ?? value;
  };
  return <T>(value: T): T => walk(value, 0) as T;
}
