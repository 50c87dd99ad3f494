/**
 * The whole settings catalog: the shared settings and each process's own, joined here because the
 * CLI starts every process. What `config check`, `config print`, `config docs` and the unknown
 * variable warning read.
 */
import { API_SETTINGS } from '@tetraloop/api/env';
import { BASE_SETTINGS, type Setting } from '@tetraloop/core/config';
import { WORKER_SETTINGS } from '@tetraloop/workers/env';
import { DEV_SETTINGS } from './dev-env.js';
import { CLI_SETTINGS } from './settings.js';

const PARTS: readonly Readonly<Record<string, Setting>>[] = [
  BASE_SETTINGS,
  API_SETTINGS,
  WORKER_SETTINGS,
  DEV_SETTINGS,
  CLI_SETTINGS,
];

function join(): ReadonlyMap<string, Setting> {
  const all = new Map<string, Setting>();
  for (const part of PARTS)
    for (const [name, s] of Object.entries(part)) {
      // One declaration per setting: a second one is a mistake the tests catch at once.
      if (all.has(name)) throw new Error(`setting ${name} is declared twice`);
      all.set(name, s);
    }
  return all;
}

/** Every setting, by variable name. */
export const CATALOG: ReadonlyMap<string, Setting> = join();

/** The groups in the order the docs list them. */
export const GROUP_ORDER = [
  'process',
  'redis',
  'api',
  'auth',
  'models',
  'runs',
  'budgets',
  'ceilings',
  'flow control',
  'retries',
  'tools',
  'secrets',
  'mcp',
  'planning',
  'sessions',
  'sources',
  'outbound webhooks',
  'reflect',
  'plugins and workspace',
  'workers',
  'jobs',
  'logs',
  'tracing',
  'dev',
  'client',
] as const;
