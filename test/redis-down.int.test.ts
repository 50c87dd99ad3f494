/**
 * With Redis gone, the API answers 503 (with Retry-After) at once instead of hanging or failing
 * with 500 — also for requests Redis dies under, when the connection's status may still say
 * `ready`.
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Queue, QueueEvents } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { parseApiEnv, startApi, waitForJob, type ApiHandle } from '@tetraloop/api';
import {
  connectRedis,
  isRedisUnavailable,
  startRedisServer,
  whenReady,
  type RedisServer,
} from '@tetraloop/core/runtime';
import { postRun, testEnv } from './support/stack.js';

const body = { graph: { nodes: [{ id: 'a', kind: 'tool', tool: 'wait', args: { ms: 1 } }] } };

describe('Redis stopped', () => {
  let redis: RedisServer;
  let api: ApiHandle;

  beforeAll(async () => {
    // A Redis of its own, so stopping it leaves the rest of the suite alone.
    redis = await startRedisServer();
    api = await startApi(parseApiEnv(testEnv({ REDIS_URL: redis.url })));
  });
  afterAll(async () => {
    await api?.close();
    await redis?.stop();
  });

  it('answers 503 from POST /v1/runs and /readyz when Redis is down', async () => {
    expect((await postRun(api.url, body)).status).toBe(202);

    await redis.stop();
    const res = await fetch(`${api.url}/v1/runs`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(503);
    expect(res.headers.get('retry-after')).toBe('1');
    expect(await res.json()).toEqual({ error: { code: 'unavailable', message: 'Redis is unavailable' } });
    expect((await fetch(`${api.url}/readyz`)).status).toBe(503);
    expect((await fetch(`${api.url}/healthz`)).status).toBe(200);
  });
});

describe('Redis killed mid-request', () => {
  let redis: RedisServer;
  let api: ApiHandle;

  beforeAll(async () => {
    redis = await startRedisServer();
    api = await startApi(parseApiEnv(testEnv({ REDIS_URL: redis.url })));
  });
  afterAll(async () => {
    await api?.close();
    await redis?.stop();
  });

  it('answers every request in flight with 202 or 503, never 500', async () => {
    expect((await postRun(api.url, body)).status).toBe(202);
    // Requests on their way through the API (some before their first command, some between the
    // create and the enqueue) when Redis dies without a goodbye.
    const inFlight = Array.from({ length: 30 }, (_, i) =>
      postRun(api.url, body, { 'idempotency-key': `k-${i}` }),
    );
    process.kill(redis.pid, 'SIGKILL');
    const statuses = (await Promise.all(inFlight)).map((r) => r.status);
    expect(statuses.filter((s) => s !== 202 && s !== 503)).toEqual([]);
    expect(statuses).toContain(503);
  });
});

describe('isRedisUnavailable', () => {
  let redis: RedisServer;
  const clients: ReturnType<typeof connectRedis>[] = [];
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterEach(() => {
    for (const c of clients.splice(0)) c.disconnect();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  const failure = (p: Promise<unknown>): Promise<unknown> =>
    p.then(
      () => {
        throw new Error('the command succeeded');
      },
      (err: unknown) => err,
    );

  it('recognises what a closed connection rejects with, and not what a bad command does', async () => {
    const client = connectRedis(redis.url, 'client', 'unavailable-test');
    clients.push(client);
    await whenReady(client);
    // A real Redis error of the request's own making is not unavailability.
    expect(isRedisUnavailable(await failure(client.call('NO-SUCH-COMMAND')))).toBe(false);
    expect(isRedisUnavailable(new Error('something else'))).toBe(false);

    client.disconnect();
    // Closed on purpose: the status says `end`, and the command's rejection says so too.
    expect(isRedisUnavailable(await failure(client.get('k')))).toBe(true);
    // A wrapped one (BullMQ and others keep the cause).
    const wrapped = new Error('enqueue failed', { cause: await failure(client.get('k')) });
    expect(isRedisUnavailable(wrapped)).toBe(true);

    await redis.stop();
    const refused = connectRedis(redis.url, 'client', 'unavailable-test-2');
    clients.push(refused);
    refused.on('error', () => undefined);
    expect(isRedisUnavailable(await failure(refused.get('k')))).toBe(true);
  });
});

describe('waiting for a sense job', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  it('rejects the wait when Redis is gone as it looks at the job, and leaves nothing unhandled', async () => {
    // BullMQ's job.waitUntilFinished looks at the job inside an async Promise executor: a Redis
    // error there was an unhandled rejection, and it ended the API process (npm run chaos: every
    // request after a Redis kill was refused). The session message route now waits with
    // waitForJob, whose look rejects the wait itself; the route answers it 503.
    const prefix = `test-${randomUUID()}`;
    const connection = connectRedis(redis.url, 'client', 'job-wait-test');
    const eventsConnection = connectRedis(redis.url, 'worker', 'job-wait-events');
    for (const c of [connection, eventsConnection]) c.on('error', () => undefined);
    const events = new QueueEvents('sense', { connection: eventsConnection, prefix });
    events.on('error', () => undefined);
    const queue = new Queue('sense', { connection, prefix });
    queue.on('error', () => undefined);
    await events.waitUntilReady();
    const job = await queue.add('message', {});
    expect(await waitForJob(queue, events, job.id!, 50)).toEqual({ state: 'pending' });

    process.kill(redis.pid, 'SIGKILL');
    const failure = await waitForJob(queue, events, job.id!, 5000).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(isRedisUnavailable(failure)).toBe(true);
    connection.disconnect();
    eventsConnection.disconnect();
  });
});

describe('an API that cannot start', () => {
  let redis: RedisServer;
  let taken: Server;
  beforeAll(async () => {
    redis = await startRedisServer();
    taken = createServer().listen(0, '127.0.0.1');
    await once(taken, 'listening');
  });
  afterAll(async () => {
    taken?.close();
    await redis?.stop();
  });

  it('rejects, and leaves no connection to Redis behind it', async () => {
    // Its port is taken: the start fails at its last step, after every connection and listener opened.
    const port = String((taken.address() as AddressInfo).port);
    await expect(
      startApi(parseApiEnv(testEnv({ REDIS_URL: redis.url, PORT: port, HOST: '127.0.0.1' }))),
    ).rejects.toThrow(/EADDRINUSE/);
    const check = connectRedis(redis.url, 'client', 'start-failure-check');
    try {
      await whenReady(check);
      // A connection closed by QUIT or disconnect leaves Redis's list once Redis has seen it close.
      await vi.waitFor(
        async () => {
          const clients = ((await check.client('LIST')) as string).trim().split('\n');
          expect(clients.filter((c) => !c.includes('name=start-failure-check'))).toEqual([]);
        },
        { timeout: 10_000, interval: 100 },
      );
    } finally {
      check.disconnect();
    }
  });
});
