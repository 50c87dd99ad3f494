/**
 * `tetraloop dev` on a machine with a Docker engine but no redis-server runs Redis in a container
 * named after its data directory, with the AOF in that directory: a restart after a crash replaces
 * the container and finds the data, and SIGTERM stops it. This machine has no Docker engine, so the
 * `docker` on PATH is a stand-in that runs a real redis-server for `docker run` (see
 * support/docker-stand-in.ts for what that does and does not show).
 */
import { existsSync, mkdtempSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { expect, it } from 'vitest';
import { containerName, freePort } from '@tetraloop/core/runtime';
import { dockerStandIn } from '../support/docker-stand-in.js';
import { spawnTetraloop, stderrMatches, type Spawned } from '../support/processes.js';
import { runToEnd } from '../support/stack.js';

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const EMBEDDED =
  /embedded Redis: redis:\/\/127\.0\.0\.1:(\d+) \(Docker container (tetraloop-redis-[0-9a-f]{12}) \(redis:7\)/;

it('runs Redis in a container with its AOF in the data directory, replaces it after a crash, stops it on SIGTERM', async () => {
  const docker = dockerStandIn();
  const cwd = realpathSync(mkdtempSync(join(tmpdir(), 'tetraloop-dev-docker-')));
  const dataDir = join(cwd, '.tetraloop', 'redis');
  const name = containerName(dataDir);
  // Only the stand-in is on PATH: no redis-server, so dev must take the Docker path.
  const env = { PATH: docker.binDir, LOG_LEVEL: 'warn', TETRALOOP_REDIS_APPENDFSYNC: 'always' };
  const start = async (): Promise<{ proc: Spawned; url: string; redisPort: number }> => {
    const port = await freePort();
    const proc = spawnTetraloop(['dev'], { ...env, PORT: String(port) }, { cwd });
    const [, redisPort, shown] = await stderrMatches(proc, EMBEDDED);
    expect(shown).toBe(name);
    await stderrMatches(proc, /Tetraloop is running/);
    return { proc, url: `http://127.0.0.1:${port}`, redisPort: Number(redisPort) };
  };

  const first = await start();
  expect(first.proc.stderr()).toContain('redis-server is not installed: starting Redis with Docker');
  // What reached the engine: the exact run command.
  const uid = `${process.getuid!()}:${process.getgid!()}`;
  expect(docker.calls().find((c) => c[0] === 'run')).toEqual([
    'run',
    '--detach',
    '--rm',
    '--name',
    name,
    '--label',
    `tetraloop.data-dir=${dataDir}`,
    '--user',
    uid,
    '--publish',
    '127.0.0.1::6379',
    '--volume',
    `${dataDir}:/data`,
    'redis:7',
    'redis-server',
    '--dir',
    '/data',
    '--appendonly',
    'yes',
    '--appendfsync',
    'always',
    '--save',
    '',
    '--maxmemory-policy',
    'noeviction',
    '--protected-mode',
    'no',
  ]);
  const doc = await runToEnd(first.url, {
    graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: { x: 7 }, pick: 'x' } }] },
  });
  expect(doc.status).toBe('succeeded');
  // The dev command talks to a real Redis, configured as asked, keeping its AOF in the data dir.
  const redis = new Redis(first.redisPort, '127.0.0.1');
  try {
    expect(await redis.config('GET', 'appendfsync')).toEqual(['appendfsync', 'always']);
    expect(await redis.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
    expect(await redis.config('GET', 'dir')).toEqual(['dir', dataDir]);
  } finally {
    redis.disconnect();
  }
  expect(existsSync(join(dataDir, 'appendonlydir'))).toBe(true);

  // A crash leaves the container running; the next dev replaces it and finds the run.
  await first.proc.kill('SIGKILL');
  const left = docker.running()[name]!;
  expect(isAlive(left.pid)).toBe(true);
  const second = await start();
  expect(isAlive(left.pid)).toBe(false);
  expect(docker.calls().filter((c) => c[0] === 'rm')).toEqual([
    ['rm', '--force', name],
    ['rm', '--force', name],
  ]);
  const again = (await fetch(`${second.url}/v1/runs/${doc.runId}`).then((r) => r.json())) as typeof doc;
  expect(again).toMatchObject({ runId: doc.runId, status: 'succeeded', output: doc.output });

  // SIGTERM stops the container and gives the data directory back.
  const container = docker.running()[name]!;
  await second.proc.kill('SIGTERM');
  expect(await second.proc.exited).toEqual({ code: 0, signal: null });
  expect(docker.calls().at(-1)).toEqual(['stop', '--time', '10', name]);
  expect(isAlive(container.pid)).toBe(false);
  expect(docker.running()[name]).toBeUndefined();
  expect(existsSync(join(dataDir, 'tetraloop.lock'))).toBe(false);
}, 90_000);
