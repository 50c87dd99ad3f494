/**
 * A config file through the real `tetraloop` command: `tetraloop api --config <file>` runs with
 * the file's settings, the environment winning over it; every run records the file's version and
 * /metrics exports it; a misspelt variable is named at start; `tetraloop config check` exits 1
 * naming the bad field with its file and line.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { runTetraloop, spawnTetraloop, stderrMatches, type Spawned } from '../support/processes.js';

const dir = mkdtempSync(join(tmpdir(), 'tetraloop-config-e2e-'));
const prefix = `test-${randomUUID()}`;
let api: Spawned | undefined;

afterAll(async () => {
  await api?.kill();
});

function write(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe('a config file', () => {
  it('configures a process, the environment winning, and its version is on every run and in /metrics', async () => {
    const file = write(
      'tetraloop.yaml',
      [
        'version: tuning-42',
        'redis:',
        `  prefix: ${prefix}`,
        'api:',
        '  host: 127.0.0.1',
        '  port: 1', // the environment's PORT wins
        'auth:',
        '  mode: "off"',
        'log:',
        '  level: info',
      ].join('\n'),
    );
    api = spawnTetraloop(['api', '--config', file], {
      REDIS_URL: inject('redisUrl'),
      PORT: '0',
      TETRALOOP_SESION_MODE: 'steer',
    });
    await stderrMatches(
      api,
      /TETRALOOP_SESION_MODE is not a Tetraloop setting and is ignored \(did you mean TETRALOOP_SESSION_MODE\?\)/,
    );
    const [, url] = await new Promise<RegExpMatchArray>((resolve, reject) => {
      const check = (): void => {
        const m = /"url":"(http:\/\/127\.0\.0\.1:\d+)"/.exec(logs());
        if (m) resolve(m);
      };
      let out = '';
      const logs = (): string => out;
      api!.child.stdout?.on('data', (d: Buffer) => {
        out += d.toString();
        check();
      });
      void api!.exited.then(() => reject(new Error(`api exited:\n${api!.stderr()}`)));
    });
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toContain('tetraloop_config_info{version="tuning-42"} 1');
    const posted = await fetch(`${url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] },
      }),
    });
    expect(posted.status).toBe(202);
    const { runId } = (await posted.json()) as { runId: string };
    const doc = (await (await fetch(`${url}/v1/runs/${runId}`)).json()) as { configVersion: string };
    expect(doc.configVersion).toBe('tuning-42');
  });

  it('is checked whole by tetraloop config check, each bad field with its file and line', async () => {
    const file = write('bad.yaml', ['secrets:', '  maxBytes: 0', 'sesions:', '  mode: steer'].join('\n'));
    const checked = await runTetraloop(['config', 'check', '--config', file, '--process', 'api'], {
      REDIS_URL: inject('redisUrl'),
    });
    expect(checked.code).toBe(1);
    expect(checked.stderr).toContain(`${file}:3: sesions is not a setting`);
    expect(checked.stderr).toContain(`${file}:2 secrets.maxBytes (TETRALOOP_SECRET_MAX_BYTES)`);
    // A process refuses to start on it, naming the same.
    const started = await runTetraloop(['api', '--config', file], { REDIS_URL: inject('redisUrl') });
    expect(started.code).not.toBe(0);
    expect(started.stderr).toContain(`${file}:3: sesions is not a setting`);
  });
});
