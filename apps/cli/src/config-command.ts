/**
 * `tetraloop config check|print|docs`: the whole configuration of a process type checked at once
 * (every bad field named, with the file and line it came from), the effective settings and where
 * each came from, and `docs/configuration.md` generated from the catalog. Also what every other
 * command does first: read the config file into the environment and warn about unknown variables.
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ApiEnv, checkAuthExposure } from '@tetraloop/api/env';
import { defaultOf, envSchema, unknownVariables, type Setting } from '@tetraloop/core/config';
import { WorkerEnv } from '@tetraloop/workers/env';
import type { z } from 'zod';
import { configurationDoc } from './config-docs.js';
import { layered, readConfigFile, type ConfigFile, type SettingSource } from './config-file.js';
import { DevEnv } from './dev-env.js';
import { CATALOG } from './settings-catalog.js';
import { CLI_SETTINGS } from './settings.js';

const USAGE = `usage: tetraloop config check [--config <file>] [--process api|workers|dev|client|all]
       tetraloop config print [--config <file>] [--process api|workers|dev|client|all] [--json]
       tetraloop config docs [--out <file>]

check   validates the whole configuration a process type reads (file and environment); exits 1
        naming every bad field, with the file and line it came from
print   the effective settings and where each came from (default, file, environment), secrets masked
docs    the settings reference (docs/configuration.md), generated from the catalog`;

const PROCESS_TYPES = ['api', 'workers', 'dev', 'client'] as const;
type ProcessType = (typeof PROCESS_TYPES)[number];

/** The schema each process type parses its environment with. */
const SCHEMAS: Record<ProcessType, z.ZodType> = {
  api: ApiEnv,
  workers: WorkerEnv,
  dev: DevEnv,
  client: envSchema(CLI_SETTINGS),
};

/** The config file `--config` or TETRALOOP_CONFIG names, read; undefined when none is named. */
export function namedConfigFile(path: string | undefined): ConfigFile | undefined {
  const named = path ?? process.env.TETRALOOP_CONFIG;
  if (named === undefined || named === '') return undefined;
  try {
    return readConfigFile(named, CATALOG);
  } catch (err) {
    return { path: named, values: new Map(), problems: [`${named}: ${(err as Error).message}`] };
  }
}

export { takeConfigFlag } from './config-flag.js';

/**
 * What every command does before it parses its settings: the config file's values become the
 * environment's where the environment sets none, and each `TETRALOOP_*` variable nobody reads is
 * named once (a misspelt setting otherwise keeps its default in silence). Throws a ConfigError
 * when the file is unreadable or names what is not a setting.
 */
export function applyConfig(configFlag: string | undefined, warn: (line: string) => void): void {
  const file = namedConfigFile(configFlag);
  if (file && file.problems.length > 0) throw new ConfigFileError(file.problems);
  if (file) {
    const { env } = layered(process.env, file, CATALOG);
    // An empty variable counts as unset: the file's value holds (as `layered` decided).
    for (const [name, value] of Object.entries(env))
      if (!process.env[name] && value !== undefined) process.env[name] = value;
  }
  for (const { name, closest } of unknownVariables(process.env, new Set(CATALOG.keys()))) {
    warn(
      `warning: ${name} is not a Tetraloop setting and is ignored${closest ? ` (did you mean ${closest}?)` : ''}`,
    );
  }
}

/** A config file that cannot be used: unreadable, not YAML, or naming what is not a setting. */
export class ConfigFileError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid config file:\n${problems.map((p) => `  ${p}`).join('\n')}`);
    this.name = 'ConfigFileError';
  }
}

/** Where a variable's value came from, as a problem names it: the file's line, or the environment. */
function whereOf(name: string, file: ConfigFile | undefined, sources: Map<string, SettingSource>): string {
  const fromFile = file?.values.get(name);
  if (sources.get(name) === 'file' && fromFile && file)
    return `${file.path}:${fromFile.line} ${fromFile.path} (${name})`;
  return name;
}

/** Every problem of the configuration of `type`, each naming the field and where it came from. */
export function checkConfiguration(
  type: ProcessType,
  env: Readonly<Record<string, string | undefined>>,
  file: ConfigFile | undefined,
): string[] {
  const problems = [...(file?.problems ?? [])];
  const { env: merged, sources } = layered(env, file, CATALOG);
  const parsed = SCHEMAS[type].safeParse(merged);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      const name = String(issue.path[0] ?? '(env)');
      const below = issue.path.slice(1).join('.');
      problems.push(`${whereOf(name, file, sources)}${below ? ` at ${below}` : ''}: ${issue.message}`);
    }
  } else if (type === 'api') {
    try {
      checkAuthExposure(parsed.data as Parameters<typeof checkAuthExposure>[0]);
    } catch (err) {
      problems.push((err as Error).message.replace(/^invalid configuration:\n\s*/, ''));
    }
  }
  return problems;
}

/** The settings `type` reads, by name. */
function readBy(type: ProcessType | 'all'): [string, Setting][] {
  return [...CATALOG].filter(([, s]) => type === 'all' || s.readBy.includes(type));
}

export function configCommand(args: string[]): number {
  const [sub, ...rest] = args;
  const { values } = parseArgs({
    args: rest,
    options: {
      config: { type: 'string' },
      process: { type: 'string', default: 'all' },
      json: { type: 'boolean', default: false },
      out: { type: 'string' },
    },
  });
  const type = values.process as ProcessType | 'all';
  if (type !== 'all' && !(PROCESS_TYPES as readonly string[]).includes(type)) {
    process.stderr.write(`--process must be one of ${PROCESS_TYPES.join(', ')}, all\n`);
    return 2;
  }
  switch (sub) {
    case 'check': {
      const file = namedConfigFile(values.config);
      const types = type === 'all' ? (['api', 'workers'] as const) : [type];
      const problems = [...new Set(types.flatMap((t) => checkConfiguration(t, process.env, file)))];
      if (problems.length === 0) {
        process.stdout.write(`configuration ok (${types.join(', ')}${file ? `, ${file.path}` : ''})\n`);
        return 0;
      }
      process.stderr.write(`invalid configuration:\n${problems.map((p) => `  ${p}`).join('\n')}\n`);
      return 1;
    }
    case 'print': {
      const file = namedConfigFile(values.config);
      const { env, sources } = layered(process.env, file, CATALOG);
      const rows = readBy(type).map(([name, s]) => {
        const from = sources.get(name) ?? 'default';
        const text = from === 'default' ? defaultOf(s) : env[name];
        const value =
          text === undefined ? null : s.secret && from !== 'default' && text !== '' ? '****' : text;
        return { name, value, from, file: s.file || null };
      });
      if (values.json) process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
      else {
        const width = Math.max(...rows.map((r) => r.name.length));
        for (const r of rows)
          process.stdout.write(`${r.name.padEnd(width)}  ${r.from.padEnd(11)}  ${r.value ?? '(unset)'}\n`);
      }
      return 0;
    }
    case 'docs': {
      const text = configurationDoc(CATALOG);
      if (values.out) writeFileSync(values.out, text);
      else process.stdout.write(text);
      return 0;
    }
    default:
      process.stderr.write(`${USAGE}\n`);
      return 2;
  }
}
