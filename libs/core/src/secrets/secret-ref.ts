/**
 * Secret references: `{"$secret": "NAME"}` as a whole value in a tool call's declared args stands
 * for the tenant's secret NAME. It is filled in by the worker at call time, only at the places the
 * graph declared (never inside data a `$ref` brought in), and the value is scrubbed from whatever
 * comes back. Pure: no I/O.
 */
import { z } from 'zod';

/** A secret's name: a letter or `_`, then up to 63 letters, digits or `_` (an env-var-like name). */
export const SecretName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,63}$/, 'a secret name matches ^[A-Za-z_][A-Za-z0-9_]{0,63}$');
export type SecretName = z.infer<typeof SecretName>;

/** A secret reference in place, and where it sits below the args (e.g. `['headers', 'Authorization']`). */
export interface SecretRef {
  readonly name: string;
  readonly at: readonly (string | number)[];
}

/** What a secret's value is replaced with wherever it could otherwise be written down. */
export const SECRET_MASK = '[secret]';

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** `{"$secret": "NAME"}` exactly: one key, a valid name. */
export function isSecretRef(value: unknown): value is { $secret: string } {
  return (
    isObject(value) &&
    Object.keys(value).length === 1 &&
    typeof value.$secret === 'string' &&
    SecretName.safeParse(value.$secret).success
  );
}

/** Every well-formed secret reference inside `value`, in document order. */
export function findSecretRefs(value: unknown, at: (string | number)[] = []): SecretRef[] {
  const found: SecretRef[] = [];
  walkSecretObjects(value, [...at], (object, path) => {
    if (!isSecretRef(object)) return true; // a malformed one's values may hold references
    found.push({ name: object.$secret, at: [...path] });
    return false;
  });
  return found;
}

/** A problem with a `$secret` object, with its path below `value`. */
export interface SecretIssue {
  readonly at: readonly (string | number)[];
  readonly message: string;
}

/**
 * Objects that carry a `$secret` key but are not a valid reference: extra keys beside it, a name
 * that is not a string or not a valid name. Well-formed references are not reported.
 */
export function malformedSecretRefs(value: unknown, at: (string | number)[] = []): SecretIssue[] {
  const found: SecretIssue[] = [];
  walkSecretObjects(value, [...at], (object, path) => {
    if (isSecretRef(object)) return false;
    if (Object.keys(object).length !== 1)
      found.push({
        at: [...path],
        message: '{"$secret": "NAME"} must be the whole value, with no other key beside it',
      });
    else
      found.push({
        at: [...path],
        message: SecretName.safeParse(object.$secret).error?.issues[0]?.message ?? 'invalid',
      });
    return false;
  });
  return found;
}

/**
 * Calls `visit` with each object inside `value` that has a `$secret` key and its path, in document
 * order, and walks into the object only when `visit` answers true. One path grows and shrinks as
 * the walk goes and `visit` copies it to keep it, so a value without secrets allocates nothing
 * (every accepted graph is walked).
 */
function walkSecretObjects(
  value: unknown,
  at: (string | number)[],
  visit: (object: Record<string, unknown>, at: readonly (string | number)[]) => boolean,
): void {
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      at.push(i);
      walkSecretObjects(value[i], at, visit);
      at.pop();
    }
  } else if (isObject(value)) {
    if ('$secret' in value && !visit(value, at)) return;
    for (const key of Object.keys(value)) {
      at.push(key);
      walkSecretObjects(value[key], at, visit);
      at.pop();
    }
  }
}

/** `value` with each secret reference replaced by `replace(name)`; everything else as it is. */
export function replaceSecretRefs(value: unknown, replace: (name: string) => unknown): unknown {
  if (isSecretRef(value)) return replace(value.$secret);
  if (Array.isArray(value)) return value.map((item) => replaceSecretRefs(item, replace));
  if (isObject(value))
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replaceSecretRefs(v, replace)]));
  return value;
}

/** Whether `value` holds a secret reference anywhere (stops at the first). */
export function hasSecretRef(value: unknown): boolean {
  if (isSecretRef(value)) return true;
  if (Array.isArray(value)) return value.some(hasSecretRef);
  if (isObject(value)) return Object.values(value).some(hasSecretRef);
  return false;
}

/**
 * `value` with each secret reference standing as {@link SECRET_MASK}: how a call is read before it
 * is filled in. A value without one is answered as it is (no copy: most calls carry none).
 */
export const withSecretsMasked = (value: unknown): unknown =>
  hasSecretRef(value) ? replaceSecretRefs(value, () => SECRET_MASK) : value;

/**
 * `args` with the value of each declared reference filled in at its place. A place that no longer
 * holds that reference (a plugin rewrote the args) is left as it is. `args` is not changed.
 */
export function fillSecrets(
  args: unknown,
  refs: readonly SecretRef[],
  values: ReadonlyMap<string, string>,
): unknown {
  if (refs.length === 0) return args;
  const copy = structuredClone(args);
  for (const { name, at } of refs) {
    const key = at.at(-1);
    if (key === undefined) continue;
    let parent: unknown = copy;
    for (const step of at.slice(0, -1)) parent = (parent as Record<string | number, unknown> | null)?.[step];
    if (typeof parent !== 'object' || parent === null) continue;
    const holder = parent as Record<string | number, unknown>;
    const value = values.get(name);
    const current = holder[key];
    if (value !== undefined && isSecretRef(current) && current.$secret === name) holder[key] = value;
  }
  return copy;
}

/** The shortest run of base64 characters looked for inside a longer base64 text. */
const MIN_BASE64_CORE = 8;

/**
 * The base64 runs that any base64 text holding `bytes` at some offset must contain: one per
 * alignment (the value may start at any of a 3-byte group's places), without the characters it
 * shares with its neighbours. Masking these hides the value inside a larger encoded body.
 */
function base64Cores(bytes: Buffer): string[] {
  const cores: string[] = [];
  for (let skip = 0; skip < 3; skip++) {
    const whole = Math.floor((bytes.length - skip) / 3) * 3;
    if (whole <= 0) continue;
    const core = bytes.subarray(skip, skip + whole).toString('base64');
    if (core.length >= MIN_BASE64_CORE) cores.push(core, core.replace(/\+/g, '-').replace(/\//g, '_'));
  }
  return cores;
}

/**
 * Every form in which a call may carry `value` and a server may echo it back: as it is,
 * URL-encoded (query, path, form; either case of hex digits), JSON-escaped (with and without `\/`
 * and `\uXXXX` escapes) and base64 (standard and URL-safe, whole and inside a longer text).
 */
export function secretForms(value: string): string[] {
  const forms = new Set<string>([value]);
  const percent = [
    encodeURIComponent(value),
    encodeURI(value),
    new URLSearchParams([['', value]]).toString().slice(1),
  ];
  for (const p of percent) {
    forms.add(p);
    forms.add(p.replace(/%[0-9A-F]{2}/g, (h) => h.toLowerCase()));
  }
  const json = JSON.stringify(value).slice(1, -1);
  forms.add(json);
  forms.add(json.replace(/\//g, '\\/'));
  forms.add(json.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
  const bytes = Buffer.from(value, 'utf8');
  const b64 = bytes.toString('base64');
  forms.add(b64);
  forms.add(b64.replace(/=+$/, ''));
  forms.add(bytes.toString('base64url'));
  for (const core of base64Cores(bytes)) forms.add(core);
  return [...forms];
}

/**
 * `value` with every occurrence of a secret's value, in any of its {@link secretForms}, in its
 * strings (and keys) replaced by {@link SECRET_MASK}: for outputs and errors of a call that carried
 * secrets (a server that echoes a request, encoded or not). Values shorter than 4 characters are
 * not looked for (they would mask at random).
 */
export function scrubSecrets<T>(value: T, secrets: Iterable<string>): T {
  const values = [...new Set(secrets)].filter((s) => s.length >= 4);
  const needles = [...new Set(values.flatMap(secretForms))]
    .filter((s) => s.length >= 4)
    .sort((a, b) => b.length - a.length);
  if (needles.length === 0) return value;
  const scrubText = (text: string): string =>
    needles.reduce((t, n) => (t.includes(n) ? t.split(n).join(SECRET_MASK) : t), text);
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return scrubText(v);
    if (Array.isArray(v)) return v.map(walk);
    if (isObject(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [scrubText(k), walk(x)]));
    return v;
  };
  return walk(value) as T;
}
