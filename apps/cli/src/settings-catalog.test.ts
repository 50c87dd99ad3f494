/**
 * The catalog is the one home of every setting: each variable the code reads is declared in it
 * once, each config file key names one setting, the generated reference is up to date, and the
 * example config file is a valid configuration.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { checkConfiguration } from './config-command.js';
import { configurationDoc } from './config-docs.js';
import { readConfigFile } from './config-file.js';
import { CATALOG } from './settings-catalog.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'node_modules' || name === 'generated') return [];
    if (statSync(path).isDirectory()) return sources(path);
    return /\.ts$/.test(name) && !/\.test\.ts$/.test(name) ? [path] : [];
  });
}

describe('the settings catalog', () => {
  it('declares every TETRALOOP_* variable the code reads', () => {
    const read = new Set<string>();
    for (const dir of ['libs/core/src', 'apps/api/src', 'apps/workers/src', 'apps/cli/src'])
      for (const file of sources(join(ROOT, dir)))
        for (const m of readFileSync(file, 'utf8').matchAll(/\b(TETRALOOP_[A-Z0-9_]*[A-Z0-9])\b/g))
          read.add(m[1]!);
    const undeclared = [...read].filter((name) => !CATALOG.has(name)).sort();
    expect(undeclared).toEqual([]);
  });

  it('gives every config file key to one setting', () => {
    const keys = [...CATALOG.values()].map((s) => s.file).filter((f) => f !== '');
    expect(keys.filter((k, i) => keys.indexOf(k) !== i)).toEqual([]);
    // A key is never also a group of other keys.
    expect(keys.filter((k) => keys.some((other) => other.startsWith(`${k}.`)))).toEqual([]);
  });

  it('is what docs/configuration.md says (npm run docs:config writes it)', () => {
    const path = join(ROOT, 'docs/configuration.md');
    expect(readFileSync(path, 'utf8'), 'docs/configuration.md is stale: run npm run docs:config').toBe(
      configurationDoc(CATALOG),
    );
  });

  it('accepts the example config file as it is shipped', () => {
    const file = readConfigFile(join(ROOT, 'tetraloop.example.yaml'), CATALOG);
    for (const type of ['api', 'workers'] as const)
      expect(checkConfiguration(type, { REDIS_URL: 'redis://127.0.0.1:6379' }, file)).toEqual([]);
  });
});
