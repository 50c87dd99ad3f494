import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { layered, readConfigFile } from './config-file.js';
import { checkConfiguration, takeConfigFlag } from './config-command.js';
import { CATALOG } from './settings-catalog.js';

function file(text: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'tetraloop-config-')), 'tetraloop.yaml');
  writeFileSync(path, text);
  return path;
}

describe('a config file', () => {
  it('sets each setting by its group key, lists as comma lists and documents as JSON, with their lines', () => {
    const path = file(
      [
        'version: 1.10',
        'secrets:',
        '  maxBytes: 4096',
        'ceilings:',
        '  modelsAllow: [gpt-4o-mini, o3]',
        'agents:',
        '  analyst: { tools: [http], secrets: [CRM_TOKEN] }',
      ].join('\n'),
    );
    const read = readConfigFile(path, CATALOG);
    expect(read.problems).toEqual([]);
    expect(Object.fromEntries([...read.values].map(([name, v]) => [name, [v.text, v.line, v.path]]))).toEqual(
      {
        TETRALOOP_CONFIG_VERSION: ['1.10', 1, 'version'],
        TETRALOOP_SECRET_MAX_BYTES: ['4096', 3, 'secrets.maxBytes'],
        TETRALOOP_MODELS_ALLOW: ['gpt-4o-mini,o3', 5, 'ceilings.modelsAllow'],
        TETRALOOP_AGENTS: ['{"analyst":{"tools":["http"],"secrets":["CRM_TOKEN"]}}', 6, 'agents'],
      },
    );
  });

  it('names every key that is not a setting, and YAML errors, with their lines', () => {
    const read = readConfigFile(file('secrets:\n  maxByte: 1\nnope: 2\n'), CATALOG);
    expect(read.problems).toEqual([
      expect.stringMatching(
        /:2: secrets\.maxByte is not a setting \(secrets holds key, maxBytes, maxCount\)$/,
      ),
      expect.stringMatching(/:3: nope is not a setting$/),
    ]);
    expect(readConfigFile(file('a: [1,\n'), CATALOG).problems[0]).toMatch(/tetraloop\.yaml:\d+: /);
  });

  it('yields to the environment, and says where each value came from', () => {
    const read = readConfigFile(file('secrets:\n  maxBytes: 4096\n  maxCount: 9\n'), CATALOG);
    const { env, sources } = layered(
      { TETRALOOP_SECRET_MAX_COUNT: '7', TETRALOOP_SECRET_MAX_BYTES: '' },
      read,
      CATALOG,
    );
    // An empty variable is an unset one: the file's value holds.
    expect([env.TETRALOOP_SECRET_MAX_BYTES, env.TETRALOOP_SECRET_MAX_COUNT]).toEqual(['4096', '7']);
    expect(sources.get('TETRALOOP_SECRET_MAX_BYTES')).toBe('file');
    expect(sources.get('TETRALOOP_SECRET_MAX_COUNT')).toBe('environment');
    expect(sources.get('TETRALOOP_PREFIX')).toBe('default');
  });

  it('is checked whole: every bad field named with its file, line and variable', () => {
    const path = file('secrets:\n  maxBytes: -1\nsessions:\n  mode: sometimes\n');
    const problems = checkConfiguration(
      'api',
      { REDIS_URL: 'redis://127.0.0.1:6379' },
      readConfigFile(path, CATALOG),
    );
    expect(problems).toEqual([
      `${path}:2 secrets.maxBytes (TETRALOOP_SECRET_MAX_BYTES): Too small: expected number to be >=1`,
      expect.stringMatching(
        new RegExp(`^${path}:4 sessions\\.mode \\(TETRALOOP_SESSION_MODE\\): Invalid option`),
      ),
    ]);
    // The environment's own bad values are named by their variable.
    expect(
      checkConfiguration('workers', { REDIS_URL: 'redis://h:1', TETRALOOP_TOOL_CONCURRENCY: '0' }, undefined),
    ).toEqual(['TETRALOOP_TOOL_CONCURRENCY: Too small: expected number to be >=1']);
  });

  it('is named by --config anywhere on the command line', () => {
    expect(takeConfigFlag(['api', '--config', 'a.yaml'])).toEqual({ argv: ['api'], config: 'a.yaml' });
    expect(takeConfigFlag(['--config=b.yaml', 'worker', '--pool', 'tool'])).toEqual({
      argv: ['worker', '--pool', 'tool'],
      config: 'b.yaml',
    });
  });
});
