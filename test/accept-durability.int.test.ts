/**
 * The stricter accept modes on Redis servers of the test's own (the suite's shared Redis has no
 * replica): with TETRALOOP_ACCEPT_WAIT_REPLICAS, `POST /v1/runs` answers `202` once a real replica
 * (`redis-server --replicaof`) acknowledged the run, and `503 not_replicated` while it is down —
 * the run exists, and a retry with the same Idempotency-Key finds it; concurrent accepts share
 * their waits; TETRALOOP_ACCEPT_WAITAOF=local is refused at boot by a Redis without WAITAOF.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseApiEnv, startApi } from '@tetraloop/api';
import {
  AcceptBarrier,
  AcceptDurabilityError,
  parseRedisVersion,
  redisServerFacts,
} from '@tetraloop/core/durability';
import { RunRequest } from '@tetraloop/core/runs';
import { freePort, startRedisServer, type RedisServer } from '@tetraloop/core/runtime';
import { runKeys } from '@tetraloop/core/state';
import { runTetraloop } from './support/processes.js';
import { startStack, testEnv, type Stack } from './support/stack.js';

const graph = RunRequest.parse({
  graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'json', args: { value: 1 } }] },
});

/** An accept: `POST /v1/runs` of the graph, or another route that starts a run (`path`, `body`). */
async function post(
  url: string,
  key: string,
  path = '/v1/runs',
  body: unknown = graph,
): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'idempotency-key': key },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

const portOf = (url: string): number => Number(new URL(url).port);

describe('TETRALOOP_ACCEPT_WAIT_REPLICAS', () => {
  let primary: RedisServer;
  let client: Redis;
  let replica: { child: ChildProcess; exited: Promise<void>; client: Redis } | undefined;
  let replicaPort: number;
  let stack: Stack;

  /** A writes-then-WAIT on the primary: resolves once the replica has caught up (an event, not a poll). */
  async function replicaSynced(): Promise<void> {
    await client.set(`sync-${randomUUID()}`, '1', 'PX', 10_000);
    expect(await client.call('WAIT', 1, 20_000)).toBe(1);
  }

  async function startReplica(): Promise<void> {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(replicaPort),
        '--bind',
        '127.0.0.1',
        '--replicaof',
        '127.0.0.1',
        String(portOf(primary.url)),
        '--save',
        '',
        '--appendonly',
        'no',
      ],
      { stdio: 'ignore' },
    );
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    replica = { child, exited, client: new Redis(replicaPort, '127.0.0.1', { lazyConnect: true }) };
    await replicaSynced();
  }

  async function stopReplica(): Promise<void> {
    if (!replica) return;
    replica.client.disconnect();
    replica.child.kill('SIGTERM');
    await replica.exited;
    replica = undefined;
  }

  beforeAll(async () => {
    primary = await startRedisServer();
    client = new Redis(primary.url);
    replicaPort = await freePort();
    await startReplica();
    stack = await startStack({
      pools: [],
      env: {
        REDIS_URL: primary.url,
        TETRALOOP_ACCEPT_WAIT_REPLICAS: '1',
        TETRALOOP_ACCEPT_WAIT_MS: '500',
      },
    });
  });
  afterAll(async () => {
    await stack?.close();
    await stopReplica();
    client?.disconnect();
    await primary?.stop();
  });

  it('answers 202 once the replica acknowledged the run: it is on the replica by then', async () => {
    const accepted = await post(stack.url, `order-${randomUUID()}`);
    expect(accepted.status).toBe(202);
    const runId = accepted.body.runId as string;
    // Read on the replica right after the answer, with no wait of the test's own.
    await replica!.client.connect();
    expect(await replica!.client.hget(runKeys(stack.prefix, runId).meta, 'status')).toBe('queued');
  });

  it('answers 503 not_replicated with Retry-After while the replica is down; the same key finds the run, and 202 once it is back', async () => {
    await stopReplica();
    const key = `order-${randomUUID()}`;
    const started = Date.now();
    const first = await post(stack.url, key);
    expect(Date.now() - started).toBeGreaterThanOrEqual(450);
    expect(first.status).toBe(503);
    const location = first.headers.get('location')!;
    const runId = location.replace('/v1/runs/', '');
    expect(first.headers.get('retry-after')).toBe('1');
    expect(first.body).toEqual({
      error: {
        code: 'not_replicated',
        message: `run ${runId} is stored and queued, but 0 of the 1 replicas TETRALOOP_ACCEPT_WAIT_REPLICAS asks for acknowledged it within 500 ms; retry with the same Idempotency-Key to confirm it (the retry finds this run)`,
      },
    });
    // The run exists on the primary: accepted, just not confirmed.
    const doc = (await fetch(`${stack.url}${location}`).then((r) => r.json())) as Record<string, unknown>;
    expect(doc).toMatchObject({ runId, status: 'queued' });

    const again = await post(stack.url, key);
    expect(again.status).toBe(503);
    expect(again.headers.get('location')).toBe(location);

    await startReplica();
    const confirmed = await post(stack.url, key);
    expect(confirmed.status).toBe(202);
    expect(confirmed.body).toMatchObject({ runId, status: 'queued', acceptedAt: doc.createdAt });
  });

  it('holds a schedule run now to the same barrier: 503 while the replica is down, 202 once it is back', async () => {
    const made = await post(stack.url, `schedule-${randomUUID()}`, '/v1/schedules', {
      name: 'by hand',
      everyMs: 86_400_000,
      paused: true,
      request: graph,
    });
    expect(made.status).toBe(201);
    const trigger = `/v1/schedules/${made.body.id as string}/trigger`;
    await stopReplica();
    const key = `now-${randomUUID()}`;
    const first = await post(stack.url, key, trigger, {});
    expect(first.status).toBe(503);
    expect(first.body).toMatchObject({ error: { code: 'not_replicated' } });
    expect(first.headers.get('retry-after')).toBe('1');
    const location = first.headers.get('location')!;
    await startReplica();
    const confirmed = await post(stack.url, key, trigger, {});
    expect(confirmed.status).toBe(202);
    expect(confirmed.headers.get('location')).toBe(location);
  });

  it('lets concurrent accepts share their waits: ten of them make at most two WAITs', async () => {
    await stopReplica();
    const connection = new Redis(primary.url);
    try {
      const barrier = (await AcceptBarrier.open(connection, `test-${randomUUID()}`, {
        replicas: 1,
        waitAof: 'off',
        waitMs: 300,
      }))!;
      const waits = async (): Promise<number> =>
        Number(/cmdstat_wait:calls=(\d+)/.exec(await client.info('commandstats'))?.[1] ?? 0);
      const before = await waits();
      const answers = await Promise.all(Array.from({ length: 10 }, () => barrier.confirm()));
      expect(answers).toEqual(Array(10).fill({ code: 'not_replicated', wanted: 1, acknowledged: 0 }));
      // The first call starts a round; the nine that come while it blocks share the next one.
      expect((await waits()) - before).toBeLessThanOrEqual(2);
    } finally {
      connection.disconnect();
      await startReplica();
    }
  });
});

describe('TETRALOOP_ACCEPT_WAITAOF=local', () => {
  let server: RedisServer;
  let version: string;
  let hasWaitAof: boolean;

  beforeAll(async () => {
    // AOF on, so the version is the only thing that can be missing.
    server = await startRedisServer({ dataDir: mkdtempSync(join(tmpdir(), 'tetraloop-waitaof-')) });
    const client = new Redis(server.url);
    version = (await redisServerFacts(client)).version;
    client.disconnect();
    const [major, minor] = parseRedisVersion(version)!;
    hasWaitAof = major > 7 || (major === 7 && minor >= 2);
  });
  afterAll(async () => {
    await server?.stop();
  });

  const env = (): Record<string, string> =>
    testEnv({ REDIS_URL: server.url, TETRALOOP_ACCEPT_WAITAOF: 'local', TETRALOOP_ACCEPT_WAIT_MS: '1000' });

  it('is refused at boot by a Redis before 7.2, naming its version (in process and as `tetraloop api`)', async (ctx) => {
    if (hasWaitAof) ctx.skip();
    const refusal = `TETRALOOP_ACCEPT_WAITAOF=local needs Redis 7.2.0 or later (WAITAOF); the Redis at REDIS_URL is ${version}.`;
    const started = startApi(parseApiEnv(env()));
    await expect(started).rejects.toBeInstanceOf(AcceptDurabilityError);
    await expect(started).rejects.toThrow(refusal);

    const cli = await runTetraloop(['api'], env());
    expect(cli.code).toBe(2);
    expect(cli.stderr).toContain(refusal);
  });

  it('waits for the AOF fsync on Redis 7.2 and later', async (ctx) => {
    if (!hasWaitAof) ctx.skip();
    const api = await startApi(parseApiEnv(env()));
    try {
      expect((await post(api.url, `order-${randomUUID()}`)).status).toBe(202);
    } finally {
      await api.close();
    }
  });
});
