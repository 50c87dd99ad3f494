/**
 * A job that fails because Redis is away goes back to its queue without using up an attempt
 * (`deferWhileRedisAway`), so an outage cannot fail a node for good and end its run `node_lost`.
 * Redis is made "away" for real: a Lua script that never ends keeps a Redis server busy, and past
 * `busy-reply-threshold` it answers every other command `BUSY`, as it would during a long script
 * in production, until `SCRIPT KILL`.
 */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { Job, Queue, QueueEvents, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createLogger } from '@tetraloop/core/logging';
import { startRedisServer, type RedisServer } from '@tetraloop/core/runtime';
import { metrics } from '@tetraloop/core/telemetry';
import { deferWhileRedisAway } from '@tetraloop/workers';
import { postRun, startStack, waitFor, type Stack } from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

/** Keeps the Redis at `url` busy until `release()`: every other client is answered `BUSY`. */
async function makeBusy(url: string): Promise<{ release(): Promise<void> }> {
  const admin = new Redis(url, { maxRetriesPerRequest: null });
  const blocker = new Redis(url, { maxRetriesPerRequest: null });
  await admin.config('SET', 'busy-reply-threshold', '10');
  const running = blocker.eval('while true do end', 0).catch((err: Error) => err);
  // Busy once a command of another client is refused (a PING sent before the script is answered).
  while (
    !(await admin.ping().then(
      () => false,
      (err: Error) => err.message.startsWith('BUSY'),
    ))
  );
  return {
    async release() {
      await admin.call('SCRIPT', 'KILL');
      await running;
      admin.disconnect();
      blocker.disconnect();
    },
  };
}

describe('a job whose Redis is away', () => {
  let away: RedisServer;
  let redis: Redis;
  const prefix = `test-${randomUUID()}`;

  beforeAll(async () => {
    // A server of its own to be busy; the queue's Redis (the suite's) stays up.
    away = await startRedisServer();
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: null });
  });
  afterAll(async () => {
    redis?.disconnect();
    await away?.stop();
  });

  /**
   * A one-attempt job whose first run reads from the busy server: answers how it ended, with its
   * attempts made, and how often the processor ran.
   */
  async function runJob(deferring: boolean): Promise<{ state: string; attemptsMade: number; runs: number }> {
    const name = `away-${deferring ? 'deferred' : 'plain'}`;
    const queue = new Queue(name, { connection: redis, prefix });
    const events = new QueueEvents(name, { connection: redis.duplicate(), prefix });
    const reader = new Redis(away.url, { maxRetriesPerRequest: null });
    const busy = await makeBusy(away.url);
    let runs = 0;
    const processor = async (): Promise<string> => {
      runs += 1;
      // The first run meets BUSY; the script is killed before the job comes back.
      const value = await reader.get('k').catch(async (err: unknown) => {
        await busy.release();
        throw err;
      });
      return value ?? 'none';
    };
    const log = createLogger({ level: 'silent', layer: 'tool' });
    const worker = new Worker(
      name,
      deferring ? deferWhileRedisAway(processor, { clustered: false, log, queue: name }) : processor,
      { connection: redis, prefix },
    );
    try {
      await events.waitUntilReady();
      const ended = new Promise<string>((resolve) => {
        events.on('completed', () => resolve('completed'));
        events.on('failed', () => resolve('failed'));
      });
      const job = await queue.add('j', {}, { attempts: 1 });
      const state = await ended;
      const done = (await Job.fromId(queue, job.id!))!;
      return { state, attemptsMade: done.attemptsMade, runs };
    } finally {
      await worker.close();
      await events.close();
      await queue.obliterate({ force: true });
      await queue.close();
      reader.disconnect();
    }
  }

  it('goes back to its queue uncounted and runs again', async () => {
    expect(await runJob(true)).toEqual({ state: 'completed', attemptsMade: 1, runs: 2 });
  });

  it('fails for good without it, its one attempt used up', async () => {
    expect(await runJob(false)).toEqual({ state: 'failed', attemptsMade: 1, runs: 1 });
  });
});

describe('a node whose completion meets Redis away', () => {
  let own: RedisServer;
  let server: ToolServer;
  let stack: Stack;
  let deferredLogged: Promise<void>;

  beforeAll(async () => {
    // The whole stack on a Redis of its own: the suite's stays up for the other tests.
    own = await startRedisServer();
    server = await startToolServer();
    let logged = (): void => undefined;
    deferredLogged = new Promise((resolve) => (logged = resolve));
    stack = await startStack({
      env: { REDIS_URL: own.url, LOG_LEVEL: 'warn' },
      logDestination: new Writable({
        write(chunk: Buffer, _enc, done) {
          if (chunk.toString().includes('Redis away: the job goes back to its queue')) logged();
          done();
        },
      }),
    });
  }, 60_000);
  afterAll(async () => {
    await stack?.close();
    await server?.close();
    await own?.stop();
  });

  it('runs the node again as the same attempt, and the run succeeds', async () => {
    const [deferredBefore, stalledBefore] = [
      await total(metrics.jobsDeferred),
      await total(metrics.jobsStalled),
    ];
    const noRetries = { network: 0, timeout: 0, server: 0, rate_limited: 0 };
    const posted = await postRun(stack.url, {
      graph: {
        nodes: [
          // One attempt: a failure BullMQ counted would end the node.
          {
            id: 'a',
            kind: 'tool',
            tool: 'http',
            args: { url: `${server.url}/gate?node=a` },
            retry: noRetries,
          },
          { id: 'b', kind: 'tool', tool: 'json', args: { value: '{{a.output.status}}' } },
        ],
        edges: [['a', 'b']],
      },
    });
    expect(posted.body, JSON.stringify(posted.body)).toHaveProperty('runId');
    const runId = posted.body.runId as string;
    await server.hitCount('a', 1);
    // Redis turns busy while the call is out: the node's completion is refused.
    const busy = await makeBusy(own.url);
    server.openGate('a');
    await deferredLogged;
    await busy.release();

    const doc = await waitFor(stack.url, runId, 30_000);
    expect(doc.status).toBe('succeeded');
    // One attempt recorded, the first: the one refused on completion was not counted.
    expect(doc.nodes.a?.status).toBe('succeeded');
    expect(doc.nodes.a?.attempts.map((a) => a.attempt)).toEqual([1]);
    expect(doc.nodes.b?.status).toBe('succeeded');
    // The call ran again: its first result was never recorded.
    expect(server.hitsOf('a')).toHaveLength(2);
    // Sent back by its worker, not found stalled after its lock lapsed.
    expect(await total(metrics.jobsDeferred)).toBeGreaterThan(deferredBefore);
    expect(await total(metrics.jobsStalled)).toBe(stalledBefore);
  }, 60_000);
});

/** A counter's count over all its labels (this process's, every test of the file). */
const total = async (counter: typeof metrics.jobsDeferred): Promise<number> =>
  (await counter.get()).values.reduce((n, v) => n + v.value, 0);
