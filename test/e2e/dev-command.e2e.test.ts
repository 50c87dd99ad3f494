/** `tetraloop dev`: embedded Redis it starts and stops itself, API and every pool in one process tree. */
import { execFileSync, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import type { RunDocument } from '@tetraloop/core/domain';
import { freePort } from '@tetraloop/core/runtime';
import { spawnTetraloop, stderrMatches, type Spawned } from '../support/processes.js';
import { postRun, runToEnd } from '../support/stack.js';

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

/** `tetraloop dev` in `cwd`, once it says it is running. */
async function startDev(
  cwd: string,
  env: Record<string, string> = {},
): Promise<{ proc: Spawned; url: string }> {
  const port = await freePort();
  const proc = spawnTetraloop(['dev'], { PORT: String(port), LOG_LEVEL: 'warn', ...env }, { cwd });
  await stderrMatches(proc, /Tetraloop is running/);
  return { proc, url: `http://127.0.0.1:${port}` };
}

async function stop(proc: Spawned): Promise<void> {
  await proc.kill('SIGTERM');
  expect(await proc.exited).toEqual({ code: 0, signal: null });
}

const putSecret = (url: string, name: string, value: string): Promise<Response> =>
  fetch(`${url}/v1/secrets/${name}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ value, hosts: ['*'] }),
  });

/** A run whose one call sends the secret `name` as a header: it succeeds only when the value decrypts. */
const useSecret = (url: string, name: string): Promise<RunDocument> =>
  runToEnd(url, {
    graph: {
      nodes: [
        {
          id: 'call',
          kind: 'tool',
          tool: 'http',
          args: { url: `${url}/healthz`, headers: { Authorization: { $secret: name } } },
        },
      ],
      edges: [],
    },
  });

it('makes a secret key of its own on the first start (0600, its place printed, never the key) and uses it again on the next', async () => {
  const cwd = mkdtempSync(join(tmpdir(), 'tetraloop-dev-'));
  const file = join(cwd, '.tetraloop', 'secret-key');

  const first = await startDev(cwd);
  expect(first.proc.stderr()).toContain('secret key: made .tetraloop/secret-key (mode 0600');
  expect(statSync(file).mode & 0o777).toBe(0o600);
  const key = readFileSync(file, 'utf8').trim();
  expect(Buffer.from(key, 'base64')).toHaveLength(32);
  expect(first.proc.stderr()).not.toContain(key);
  expect((await putSecret(first.url, 'TOKEN', 'Bearer dev-token')).status).toBe(204);
  const signing = await fetch(`${first.url}/v1/webhooks/secret`, { method: 'POST' });
  expect(signing.status).toBe(201);
  expect((await useSecret(first.url, 'TOKEN')).status).toBe('succeeded');
  // A run with a webhook of its own is taken: its tenant's signing secret is kept under the key.
  const hooked = await postRun(first.url, {
    graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }], edges: [] },
    webhook: { url: `${first.url}/healthz` },
  });
  expect(hooked.status, JSON.stringify(hooked.body)).toBe(202);
  await stop(first.proc);

  // The next start reads the same key back: the secret stored under it still decrypts.
  const second = await startDev(cwd);
  expect(second.proc.stderr()).toMatch(/^secret key: \.tetraloop\/secret-key$/m);
  expect(second.proc.stderr()).not.toContain('secret key: made');
  expect(readFileSync(file, 'utf8').trim()).toBe(key);
  const listed = (await (await fetch(`${second.url}/v1/secrets`)).json()) as { secrets: { name: string }[] };
  expect(listed.secrets.map((s) => s.name)).toEqual(['TOKEN']);
  const run = await useSecret(second.url, 'TOKEN');
  expect(run.status, JSON.stringify(run.nodes)).toBe('succeeded');
  await stop(second.proc);
});

it('makes no secret key when TETRALOOP_SECRET_KEY is given, and uses the one given', async () => {
  const cwd = mkdtempSync(join(tmpdir(), 'tetraloop-dev-'));
  const { proc, url } = await startDev(cwd, { TETRALOOP_SECRET_KEY: randomBytes(32).toString('hex') });
  expect(proc.stderr()).not.toContain('secret key:');
  expect(existsSync(join(cwd, '.tetraloop', 'secret-key'))).toBe(false);
  expect((await putSecret(url, 'TOKEN', 'Bearer given')).status).toBe(204);
  await stop(proc);
});

it('refuses to start on a secret-key file that holds no key, and leaves it as it was', async () => {
  const cwd = mkdtempSync(join(tmpdir(), 'tetraloop-dev-'));
  mkdirSync(join(cwd, '.tetraloop'));
  writeFileSync(join(cwd, '.tetraloop', 'secret-key'), 'not a key\n');
  const proc = spawnTetraloop(['dev'], { PORT: String(await freePort()) }, { cwd });
  const { code } = await proc.exited;
  expect(code).toBe(2);
  expect(proc.stderr()).toMatch(/\.tetraloop\/secret-key does not hold a secret key \(32 bytes/);
  expect(readFileSync(join(cwd, '.tetraloop', 'secret-key'), 'utf8')).toBe('not a key\n');
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
