/**
 * A remote custom tool call answered before its caller's first read of the queue's events reaches
 * Redis is still heard. The caller's event connection goes through a proxy that keeps its blocking
 * read back; Redis's MONITOR shows when the caller has read the job's state (not finished yet);
 * only then does a worker answer the call, and only then is the read let through.
 */
import { randomUUID } from 'node:crypto';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { RemoteToolCalls } from '@tetraloop/core/executor';
import {
  DEFAULT_JOB_RETENTION,
  toolCallJobId,
  toolQueueName,
  type ToolCallJobData,
} from '@tetraloop/core/queues';
import { connectRedis, whenReady, type RedisClient } from '@tetraloop/core/runtime';
import type { CustomTool } from '@tetraloop/core/tools';
import { watchCommands } from './support/monitor.js';
import { startTcpProxy, type TcpProxy } from './support/tcp-proxy.js';

let redis: Redis;
let proxy: TcpProxy;
let proxied: RedisClient;
beforeAll(async () => {
  redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: null });
  proxy = await startTcpProxy(inject('redisUrl'));
  proxied = connectRedis(proxy.url.replace(/^http:/, 'redis:'), 'worker', 'remote-tool-call-proxied');
  await Promise.all([whenReady(redis), whenReady(proxied)]);
});
afterAll(async () => {
  proxied?.disconnect();
  redis?.disconnect();
  await proxy?.close();
});

const call = (runId: string): Omit<ToolCallJobData, 'deadlineAt'> => ({
  runId,
  nodeId: 'ask',
  generation: 0,
  attempt: 1,
  callId: 'c1',
  index: '1.0',
  tool: 'remote.fast',
  args: {},
  idempotencyKey: `${runId}-key`,
  tenant: 'default',
  agentId: 'agent',
  timeoutMs: 1_000,
});

/** Resolves when Redis runs BullMQ's `isFinished` script for `jobKey` (the caller reading its state). */
async function stateRead(jobKey: string): Promise<{ seen: Promise<void>; stop: () => void }> {
  let resolve!: () => void;
  const seen = new Promise<void>((r) => (resolve = r));
  const stop = await watchCommands(inject('redisUrl'), (args) => {
    const script = args[0]?.toLowerCase();
    if ((script === 'evalsha' || script === 'eval') && args[2] === '3' && args[5] === jobKey) resolve();
  });
  return { seen, stop };
}

describe('a remote tool call', () => {
  it('hears an answer that came before its first read of the queue events', async () => {
    const prefix = `test-${randomUUID()}`;
    const name = toolQueueName('remote');
    const queue = new Queue(name, { connection: redis, prefix });
    const remote = new RemoteToolCalls({
      queues: {
        retention: DEFAULT_JOB_RETENTION,
        shardOf: () => Promise.resolve({ toolQueue: () => queue } as never),
      },
      connection: proxied,
    });
    const data = call(randomUUID());
    const read = await stateRead(queue.toKey(toolCallJobId(data)));
    const xread = proxy.hold(/\bxread\b/i);
    let worker: Worker | undefined;
    try {
      const answer = remote.call({ name: 'remote.fast', custom: { queue: 'remote' } } as CustomTool, data, {
        runSignal: new AbortController().signal,
      });
      await read.seen;
      worker = new Worker(name, () => Promise.resolve({ ok: true, output: { fast: true } }), {
        connection: redis.duplicate(),
        prefix,
      });
      const w = worker;
      await new Promise((resolve) => w.once('completed', resolve));
      xread.release();
      expect(await answer).toEqual({ ok: true, output: { fast: true } });
    } finally {
      xread.release();
      read.stop();
      await worker?.close();
      await remote.close();
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });
});
