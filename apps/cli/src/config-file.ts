/**
 * A config file: the catalog's settings in nested groups, in YAML (`tetraloop.example.yaml`).
 * Each value becomes the text of its environment variable (a list joined with commas, a JSON
 * setting written as JSON), so one parser — the catalog's — reads both; a variable set in the
 * environment wins. Every problem names the file, the line and the setting.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type * as Yaml from 'yaml';
import type { Node as YamlNode, Scalar } from 'yaml';
import type { Setting } from '@tetraloop/core/config';

/** The YAML parser, loaded when a file is read: a command without a config file never loads it. */
let yamlModule: typeof Yaml | undefined;
const yaml = (): typeof Yaml => (yamlModule ??= createRequire(import.meta.url)('yaml') as typeof Yaml);

/** One value the file sets: its variable's text and the line it is on. */
export interface FileValue {
  readonly text: string;
  readonly line: number;
  /** The dotted path in the file (`secrets.maxBytes`). */
  readonly path: string;
}

export interface ConfigFile {
  readonly path: string;
  /** By variable name. */
  readonly values: ReadonlyMap<string, FileValue>;
  /** What is wrong with the file itself (YAML, unknown keys), each with its line. */
  readonly problems: readonly string[];
}

/** The variable each file path sets. */
function byFilePath(catalog: ReadonlyMap<string, Setting>): Map<string, string> {
  const paths = new Map<string, string>();
  for (const [name, s] of catalog) if (s.file !== '') paths.set(s.file, name);
  return paths;
}

/**
 * A value as its variable's text, as the setting's form writes it. A scalar keeps the text it was
 * written with (`version: 1.10` stays `1.10`, `0123` keeps its zero), a list is joined with commas,
 * a JSON setting's document is written as JSON.
 */
function textOf(node: YamlNode | null, s: Setting): string {
  if (node === null) return '';
  const { isScalar, isSeq } = yaml();
  if (s.form !== 'json') {
    if (isScalar(node)) return scalarText(node);
    if (isSeq(node))
      return node.items.map((item) => (isScalar(item) ? scalarText(item) : JSON.stringify(item))).join(',');
  }
  return JSON.stringify(node.toJSON());
}

function scalarText(node: Scalar): string {
  if (node.value === null) return '';
  if (typeof node.source === 'string') return node.source;
  const value: unknown = node.value;
  return typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean'
    ? String(value)
    : JSON.stringify(value);
}

/** Reads `path` against `catalog`; throws only when the file cannot be read at all. */
export function readConfigFile(path: string, catalog: ReadonlyMap<string, Setting>): ConfigFile {
  const source = readFileSync(path, 'utf8');
  const { isMap, isScalar, LineCounter, parseDocument } = yaml();
  const lines = new LineCounter();
  const doc = parseDocument(source, { lineCounter: lines, prettyErrors: false });
  const lineOf = (node: YamlNode | null | undefined): number =>
    node?.range ? lines.linePos(node.range[0]).line : 1;
  const problems = doc.errors.map((e) => `${path}:${lines.linePos(e.pos[0]).line}: ${e.message}`);
  const values = new Map<string, FileValue>();
  if (problems.length > 0 || doc.contents === null) return { path, values, problems };
  if (!isMap(doc.contents))
    return { path, values, problems: [`${path}:1: the file must be a map of settings`] };
  const paths = byFilePath(catalog);
  const groups = new Set(
    [...paths.keys()].flatMap((p) =>
      p
        .split('.')
        .slice(0, -1)
        .map((_, i, a) => a.slice(0, i + 1).join('.')),
    ),
  );

  const walk = (node: YamlNode, prefix: string): void => {
    if (!isMap(node)) return;
    for (const pair of node.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
      const at = prefix === '' ? key : `${prefix}.${key}`;
      const name = paths.get(at);
      const valueNode = pair.value as YamlNode | null;
      const line = lineOf((pair.key as YamlNode | null) ?? valueNode);
      if (name !== undefined) {
        values.set(name, { text: textOf(valueNode, catalog.get(name)!), line, path: at });
      } else if (groups.has(at) && valueNode && isMap(valueNode)) {
        walk(valueNode, at);
      } else {
        const near = [...paths.keys()].filter((p) => p.startsWith(prefix === '' ? '' : `${prefix}.`));
        problems.push(
          `${path}:${line}: ${at} is not a setting${near.length > 0 && prefix !== '' ? ` (${prefix} holds ${near.map((p) => p.slice(prefix.length + 1)).join(', ')})` : ''}`,
        );
      }
    }
  };
  walk(doc.contents, '');
  return { path, values, problems };
}

/** Where a setting's value came from. */
export type SettingSource = 'default' | 'file' | 'environment';

/**
 * The environment a process parses: `env`, with each value the file sets and `env` does not,
 * and where each catalog setting's value came from.
 */
export function layered(
  env: Readonly<Record<string, string | undefined>>,
  file: ConfigFile | undefined,
  catalog: ReadonlyMap<string, Setting>,
): { env: Record<string, string | undefined>; sources: Map<string, SettingSource> } {
  const merged: Record<string, string | undefined> = { ...env };
  const sources = new Map<string, SettingSource>();
  for (const name of catalog.keys()) {
    const fromEnv = env[name];
    const fromFile = file?.values.get(name);
    // An empty variable is an unset one (a Compose `VAR:` with no value): the file's value holds.
    if (fromEnv !== undefined && fromEnv !== '') sources.set(name, 'environment');
    else if (fromFile !== undefined) {
      merged[name] = fromFile.text;
      sources.set(name, 'file');
    } else sources.set(name, 'default');
  }
  return { env: merged, sources };
}
