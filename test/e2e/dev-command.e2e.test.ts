/** `tetraloop dev`: embedded Redis it starts and stops itself, API and every pool in one process tree. */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { freePort } from '@tetraloop/core';
import { spawnTetraloop, stderrMatches } from '../support/processes.js';
import { runToEnd } from '../support/stack.js';

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

it('starts an embedded Redis, runs a graph, and leaves no redis-server behind on SIGTERM', async () => {
  const port = await freePort();
  const cwd = mkdtempSync(join(tmpdir(), 'tetraloop-dev-'));
  const proc = spawnTetraloop(['dev'], { PORT: String(port), LOG_LEVEL: 'warn' }, { cwd });
  const [, redisPort] = await stderrMatches(proc, /embedded Redis: redis:\/\/127\.0\.0\.1:(\d+)/);
  await stderrMatches(proc, /Tetraloop is running/);

  const url = `http://127.0.0.1:${port}`;
  const doc = await runToEnd(url, {
    graph: {
      nodes: [
        { id: 'self', kind: 'tool', tool: 'http', args: { url: `${url}/healthz` } },
        {
          id: 'pick',
          kind: 'tool',
          tool: 'json',
          args: { value: { $ref: 'self.output.body' }, pick: 'status' },
        },
      ],
      edges: [['self', 'pick']],
    },
  });
  expect(doc.status).toBe('succeeded');
  expect(doc.output).toEqual({ pick: 'ok' });

  // The console, as `npm start` serves it: the process bundles its script at the first request.
  const [, consoleUrl] = await stderrMatches(proc, /console (http:\/\/\S+\/console\/)/);
  expect((await fetch(consoleUrl!)).status).toBe(200);
  const script = await fetch(`${url}/console/console.js`);
  expect(script.status).toBe(200);
  expect(script.headers.get('content-type')).toMatch(/^text\/javascript/);
  expect((await script.text()).length).toBeGreaterThan(10_000);

  const redisPid = Number(
    execFileSync('sh', ['-c', `pgrep -f "redis-server 127.0.0.1:${redisPort}" || true`])
      .toString()
      .trim()
      .split('\n')[0],
  );
  expect(redisPid).toBeGreaterThan(0);
  await proc.kill('SIGTERM');
  expect(await proc.exited).toEqual({ code: 0, signal: null });
  expect(isAlive(redisPid)).toBe(false);
});

it('says how to get Redis when neither redis-server nor docker is installed and REDIS_URL is unset', async () => {
  const proc = spawnTetraloop(['dev'], { PATH: '/nonexistent' });
  const { code } = await proc.exited;
  expect(code).toBe(2);
  expect(proc.stderr()).toMatch(
    /no Redis to start: redis-server is not installed, and docker is not installed\..*apt-get install -y redis-server.*start Docker.*REDIS_URL=/s,
  );
});

const dockerClient = spawnSync('sh', ['-c', 'command -v docker']).stdout?.toString().trim() ?? '';

it.skipIf(!dockerClient)('says so when the docker client is there but no engine answers', async () => {
  // The real docker client alone on PATH (no redis-server), pointed at a socket nobody serves.
  const bin = mkdtempSync(join(tmpdir(), 'tetraloop-bin-'));
  symlinkSync(dockerClient, join(bin, 'docker'));
  const proc = spawnTetraloop(['dev'], { PATH: bin, DOCKER_HOST: `unix://${join(bin, 'no-engine.sock')}` });
  const { code } = await proc.exited;
  expect(code).toBe(2);
  expect(proc.stderr()).toMatch(
    /no Redis to start: redis-server is not installed, and no Docker engine answers \(docker version: .+\)\. Do one of:/,
  );
});

it('refuses TETRALOOP_WORKER_SHARDS, which would leave the other shards without a worker, and leaves no redis-server behind', async () => {
  const cwd = mkdtempSync(join(tmpdir(), 'tetraloop-dev-'));
  const proc = spawnTetraloop(
    ['dev'],
    { PORT: String(await freePort()), TETRALOOP_QUEUE_SHARDS: '2', TETRALOOP_WORKER_SHARDS: '0' },
    { cwd },
  );
  const { code } = await proc.exited;
  expect(code).toBe(2);
  expect(proc.stderr()).toMatch(/TETRALOOP_WORKER_SHARDS: dev runs every pool on every shard/);
  const [, redisPort] = /embedded Redis: redis:\/\/127\.0\.0\.1:(\d+)/.exec(proc.stderr()) ?? [];
  if (redisPort) {
    const left = spawnSync('redis-cli', ['-p', redisPort, 'ping'], { encoding: 'utf8' });
    expect(left.stdout.trim()).not.toBe('PONG');
  }
});
