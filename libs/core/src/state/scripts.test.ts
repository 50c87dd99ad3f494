import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SCRIPT_FILES, scriptShas, type ScriptName } from './scripts.js';

const folderOf = (folder: string): URL => new URL(`./${folder}/`, import.meta.url);

describe('the script table', () => {
  it('lists every script file of every script folder, and no other', () => {
    const folders = readdirSync(new URL('./', import.meta.url)).filter((f) => /^lua(-[a-z]+)?$/.test(f));
    expect(folders.sort()).toEqual(Object.keys(SCRIPT_FILES).sort());
    for (const [folder, names] of Object.entries(SCRIPT_FILES)) {
      const files = readdirSync(folderOf(folder)).filter(
        (f) => f.endsWith('.lua') && !f.endsWith('.lib.lua'),
      );
      expect(files.sort(), folder).toEqual(names.map((n) => `${n}.lua`).sort());
    }
    expect(scriptShas().size).toBe(Object.values(SCRIPT_FILES).flat().length);
  });

  it('types a script’s name: a name not in the table does not compile', () => {
    const known: ScriptName = 'flow-acquire-5';
    // @ts-expect-error -- not a script
    const unknown: ScriptName = 'flow-acquire-1';
    expect([known, unknown]).toHaveLength(2);
  });

  it('names each script by its number of keys, and no script reads a key past them', () => {
    for (const [folder, names] of Object.entries(SCRIPT_FILES)) {
      for (const name of names) {
        const count = Number(/-(\d+)$/.exec(name)?.[1]);
        expect(count, name).toBeGreaterThan(0);
        const body = readFileSync(new URL(`${name}.lua`, folderOf(folder)), 'utf8');
        const used = [...body.matchAll(/KEYS\[(\d+)\]/g)].map((m) => Number(m[1]));
        expect(Math.max(0, ...used), name).toBeLessThanOrEqual(count);
      }
    }
  });
});
