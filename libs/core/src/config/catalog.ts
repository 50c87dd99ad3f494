/**
 * The settings catalog: every setting Tetraloop reads is declared once, with its zod schema (and so
 * its default), who reads it, the group it belongs to, where it sits in a config file and one line
 * of documentation. Each process's parser is derived from the catalogs it reads
 * ({@link envSchema}); `docs/configuration.md` is generated from them (`npm run docs:config`); a
 * config file is read through them (`config-file.ts`). Pure: no I/O.
 *
 * Settings are declared where their readers live — the shared ones in `config/env-schema.ts`
 * (`BASE_SETTINGS`), the API's, the workers' and the CLI's in their apps — and joined into one
 * catalog by the CLI, which knows every process.
 */
import { z } from 'zod';

/** Who reads a setting: the API, the worker pools (some only in named pools), the CLI. */
export const READERS = ['api', 'workers', 'dev', 'client'] as const;
export type Reader = (typeof READERS)[number];

/** The worker pools, as a setting names the ones that use it. */
export const POOL_NAMES = ['sense', 'plan', 'tool', 'reflect'] as const;
export type PoolName = (typeof POOL_NAMES)[number];

/** How a setting's value is written in the environment when the config file gives a structure. */
export type SettingForm =
  /** One value (a number, a word, a URL). */
  | 'scalar'
  /** A comma-separated list; a config file writes a YAML list. */
  | 'list'
  /** A JSON document; a config file writes it as YAML. */
  | 'json';

/** One setting, as declared. */
export interface Setting<S extends z.ZodType = z.ZodType> {
  /** Parses the environment variable's text (defaults included). */
  readonly schema: S;
  /** What it is about: the heading it is documented under. */
  readonly group: string;
  /** Its place in a config file, dotted (`secrets.maxBytes`); empty: environment only. */
  readonly file: string;
  /** Who reads it. */
  readonly readBy: readonly Reader[];
  /** The worker pools that use it, when not all of them. */
  readonly pools?: readonly PoolName[];
  /** One line (or a few sentences) of documentation. */
  readonly doc: string;
  /** @defaultValue "scalar" */
  readonly form?: SettingForm;
  /** Shown masked by `tetraloop config print`. */
  readonly secret?: boolean;
  /** The default as documented, when the schema cannot say it (it differs per process). */
  readonly defaultText?: string;
}

/** Settings by variable name. */
export type Settings = Readonly<Record<string, Setting>>;

/** Declares one setting (keeps its schema's type for the parser derived from it). */
export const setting = <S extends z.ZodType>(s: Setting<S>): Setting<S> => s;

/** The zod object that parses an environment holding `settings`. */
export function envSchema<T extends Settings>(settings: T): z.ZodObject<{ [K in keyof T]: T[K]['schema'] }> {
  const shape = Object.fromEntries(Object.entries(settings).map(([name, s]) => [name, s.schema]));
  return z.object(shape) as unknown as z.ZodObject<{ [K in keyof T]: T[K]['schema'] }>;
}

/** The default a setting takes when unset, as text (undefined: none). */
export function defaultOf(s: Setting): string | undefined {
  if (s.defaultText !== undefined) return s.defaultText;
  const parsed = s.schema.safeParse(undefined);
  if (!parsed.success || parsed.data === undefined) return undefined;
  const value: unknown = parsed.data;
  if (Array.isArray(value)) return value.length === 0 ? '' : value.map(String).join(',');
  if (typeof value === 'object' && value !== null) return JSON.stringify(value);
  return String(value);
}

/** The known name closest to `name` (fewest edits), for a warning about a misspelt variable. */
export function closestName(name: string, known: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of known) {
    const d = editDistance(name, candidate);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
    }
    previous = current;
  }
  return previous[b.length]!;
}

/**
 * `TETRALOOP_*` variables of `env` the catalog does not know, each with the closest known name:
 * what a process warns about once at start (a misspelt setting silently keeps its default).
 */
export function unknownVariables(
  env: Readonly<Record<string, string | undefined>>,
  known: ReadonlySet<string>,
): { name: string; closest: string | undefined }[] {
  return Object.keys(env)
    .filter((name) => name.startsWith('TETRALOOP_') && !known.has(name))
    .sort()
    .map((name) => ({ name, closest: closestName(name, known) }));
}
