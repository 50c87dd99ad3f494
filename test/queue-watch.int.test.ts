/**
 * The queue watch on a worker's connection, which queues commands while Redis is away instead of
 * failing them: a check still answers within its timeout, says Redis is down, and stops reporting
 * depths and stalls it cannot see; once Redis is back the next check reports them again.
 */
import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { connectRedis, startRedisServer, whenReady, type RedisServer } from '@tetraloop/core/runtime';
import { QueueWatch, metrics } from '@tetraloop/core/telemetry';

let redis: RedisServer;
let port: number;
const prefix = `test-${randomUUID()}`;

beforeAll(async () => {
  redis = await startRedisServer();
  port = Number(new URL(redis.url).port);
});
afterAll(async () => {
  await redis?.stop();
});

const series = async (): Promise<{ redisUp: number[]; waiting: number[]; stalled: number[] }> => {
  const values = async (metric: { get(): Promise<{ values: { value: number; labels: object }[] }> }) =>
    (await metric.get()).values;
  return {
    redisUp: (await values(metrics.redisUp)).map((v) => v.value),
    waiting: (await values(metrics.queueJobs))
      .filter((v) => (v.labels as { state?: string }).state === 'waiting')
      .map((v) => v.value),
    stalled: (await values(metrics.queueStalled)).map((v) => v.value),
  };
};

it('says Redis is down within its timeout on a connection that waits for Redis, and forgets the depths', async () => {
  const connection = connectRedis(redis.url, 'worker', 'queue-watch-test');
  connection.on('error', () => undefined);
  const queue = new Queue('tool', { connection, prefix });
  queue.on('error', () => undefined);
  try {
    await queue.addBulk([1, 2, 3].map((i) => ({ name: 'node', data: { i } })));
    const watch = new QueueWatch([queue], { timeoutMs: 300 });
    expect(await watch.check()).toEqual([]);
    expect(await series()).toEqual({ redisUp: [1], waiting: [3], stalled: [0] });

    await redis.stop();
    const started = Date.now();
    await expect(watch.check()).rejects.toThrow(/not read within 300 ms/);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(await series()).toEqual({ redisUp: [0], waiting: [], stalled: [] });
    // A scrape meanwhile shares the read in flight and says the same.
    await watch.refresh();
    expect(await series()).toEqual({ redisUp: [0], waiting: [], stalled: [] });

    // The same port: the connection finds Redis again (without persistence, empty).
    redis = await startRedisServer({ port });
    await whenReady(connection);
    expect(await watch.check()).toEqual([]);
    expect(await series()).toEqual({ redisUp: [1], waiting: [0], stalled: [0] });
  } finally {
    await queue.close();
    connection.disconnect();
  }
});
