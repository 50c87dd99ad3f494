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
import { Redis, ReplyError } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { createLogger } from '@tetraloop/core/logging';
import { nodeJobId } from '@tetraloop/core/queues';
import { startRedisServer, type RedisServer } from '@tetraloop/core/runtime';
import { metrics } from '@tetraloop/core/telemetry';
import { deferWhileRedisAway } from '@tetraloop/workers';
import { postRun, startStack, waitFor, type Stack } from './support/stack.js';
import { startToolServer, type ToolServer } from './support/tool-server.js';

/** Keeps the Redis at `url` busy until `release()`: every other client is answered `BUSY`. */
async function makeBusy(url: string): Promise<{ release(): Promise<void> }> {
  const admin = new Redis(url, { maxRetriesPerRequest: null });
  const blocker = new Redis(url, { maxRetriesPerRequest: null });
  const [, threshold] = (await admin.config('GET', 'busy-reply-threshold')) as [string, string];
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
      await admin.config('SET', 'busy-reply-threshold', threshold);
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
   * A one-attempt job whose first `busyRuns` runs read from the busy server (the last of them
   * ends the busy spell): how it ended, its attempts made, how often the processor ran, and how
   * often it went back while Redis was away. `maxDeferrals` undefined: no wrapper.
   */
  async function runJob(
    maxDeferrals: number | undefined,
    busyRuns = 1,
  ): Promise<{ state: string; attemptsMade: number; runs: number; redisAway: unknown }> {
    const name = `away-${randomUUID()}`;
    const queue = new Queue(name, { connection: redis, prefix });
    const events = new QueueEvents(name, { connection: redis.duplicate(), prefix });
    const reader = new Redis(away.url, { maxRetriesPerRequest: null });
    const busy = await makeBusy(away.url);
    let runs = 0;
    const processor = async (): Promise<string> => {
      runs += 1;
      const value = await reader.get('k').catch(async (err: unknown) => {
        if (runs === busyRuns) await busy.release();
        throw err;
      });
      return value ?? 'none';
    };
    const log = createLogger({ level: 'silent', layer: 'tool' });
    const worker = new Worker(
      name,
      maxDeferrals === undefined
        ? processor
        : deferWhileRedisAway(processor, { clustered: false, maxDeferrals, log, queue: name }),
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
      return {
        state,
        attemptsMade: done.attemptsMade,
        runs,
        redisAway: (done.data as { redisAway?: number }).redisAway,
      };
    } finally {
      await worker.close();
      await events.close();
      await queue.obliterate({ force: true });
      await queue.close();
      reader.disconnect();
    }
  }

  it('goes back to its queue uncounted and runs again', async () => {
    expect(await runJob(20)).toEqual({ state: 'completed', attemptsMade: 1, runs: 2, redisAway: 1 });
  });

  it('fails for good without it, its one attempt used up', async () => {
    expect(await runJob(undefined)).toEqual({
      state: 'failed',
      attemptsMade: 1,
      runs: 1,
      redisAway: undefined,
    });
  });

  it('counts the attempt once the job has gone back TETRALOOP_REDIS_AWAY_MAX_DEFERRALS times', async () => {
    expect(await runJob(1, 2)).toEqual({ state: 'failed', attemptsMade: 1, runs: 2, redisAway: 1 });
  });
});

describe('a node whose completion meets Redis away', () => {
  let own: RedisServer;
  let server: ToolServer;
  let stack: Stack;
  const lines: string[] = [];
  const watchers: { match: (line: string) => boolean; found: () => void }[] = [];
  /** Resolves once a log line that `match` accepts has been written (or already was). */
  const logged = (match: (line: string) => boolean): Promise<void> =>
    lines.some(match) ? Promise.resolve() : new Promise((found) => watchers.push({ match, found }));

  beforeAll(async () => {
    // The whole stack on a Redis of its own: the suite's stays up for the other tests.
    own = await startRedisServer();
    server = await startToolServer();
    stack = await startStack({
      // No lesson may add retries: a node job's BullMQ attempts are its own (one, below).
      env: { REDIS_URL: own.url, LOG_LEVEL: 'warn', TETRALOOP_LESSON_RATE_LIMIT_RETRIES: '0' },
      logDestination: new Writable({
        write(chunk: Buffer, _enc, done) {
          const line = chunk.toString();
          lines.push(line);
          for (const w of watchers) if (w.match(line)) w.found();
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
    // Node a's own job, not another job the busy spell caught (a schedule's, say).
    const jobId = nodeJobId(runId, 'a', 0);
    await logged(
      (line) => line.includes('Redis away: the job goes back') && line.includes(`"jobId":"${jobId}"`),
    );
    await busy.release();

    const doc = await waitFor(stack.url, runId, 30_000);
    expect(doc.status).toBe('succeeded');
    // One attempt recorded, the first: the one refused on completion was not counted.
    expect(doc.nodes.a?.status).toBe('succeeded');
    expect(doc.nodes.a?.attempts.map((a) => a.attempt)).toEqual([1]);
    expect(doc.nodes.b?.status).toBe('succeeded');
    // The call ran again: its first result was never recorded. It re-entered its begun attempt,
    // so it was charged once: a's call and b's.
    expect(server.hitsOf('a')).toHaveLength(2);
    expect(doc.usage.toolCalls).toBe(2);
    // Sent back by its worker, not found stalled after its lock lapsed.
    expect(await total(metrics.jobsDeferred)).toBeGreaterThan(deferredBefore);
    expect(await total(metrics.jobsStalled)).toBe(stalledBefore);
  }, 60_000);
});

describe('a node skipped for its TTL whose completion meets Redis away', () => {
  let server: ToolServer;
  let stack: Stack;

  beforeAll(async () => {
    server = await startToolServer();
    // One tool slot: the late node waits behind the held one, past its TTL.
    stack = await startStack({ env: { TETRALOOP_TOOL_CONCURRENCY: '1', LOG_LEVEL: 'silent' } });
  }, 60_000);
  afterAll(async () => {
    vi.restoreAllMocks();
    await stack?.close();
    await server?.close();
  });

  it('decides its TTL again when its job comes back: it never runs its call', async () => {
    const deferredBefore = await total(metrics.jobsDeferred);
    const posted = await postRun(stack.url, {
      graph: {
        nodes: [
          { id: 'hold', kind: 'tool', tool: 'http', args: { url: `${server.url}/gate?node=hold` } },
          {
            id: 'late',
            kind: 'tool',
            tool: 'http',
            args: { url: `${server.url}/work?node=late` },
            ttlMs: 100,
            onExpire: 'skip',
          },
        ],
      },
    });
    const runId = posted.body.runId as string;
    await server.hitCount('hold', 1);
    // The late node's step between its begin and its completion (the expiry's count, after its
    // node.expired event) meets the reply a busy Redis gives, once: the job goes back uncounted,
    // as when a Redis that turned busy refuses the completion. Only a node that ran its call
    // re-enters its attempt as begun; this one must decide its TTL again and stay unrun.
    const expired = vi.spyOn(metrics.nodesExpired, 'inc').mockImplementationOnce(() => {
      throw new (ReplyError as ErrorConstructor)(
        'BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.',
      );
    });
    // Past the late node's TTL before the slot frees.
    await new Promise((resolve) => setTimeout(resolve, 150));
    server.openGate('hold');

    const doc = await waitFor(stack.url, runId, 30_000);
    expect(expired).toHaveBeenCalledTimes(2);
    expect(await total(metrics.jobsDeferred)).toBe(deferredBefore + 1);
    expect(doc.status).toBe('succeeded');
    expect(doc.nodes.late).toMatchObject({ status: 'skipped', output: { expired: true } });
    expect(server.hitsOf('late')).toHaveLength(0);
    // The held node's call alone is charged.
    expect(doc.usage.toolCalls).toBe(1);
  }, 60_000);
});

/** A counter's count over all its labels (this process's, every test of the file). */
const total = async (counter: typeof metrics.jobsDeferred): Promise<number> =>
  (await counter.get()).values.reduce((n, v) => n + v.value, 0);
