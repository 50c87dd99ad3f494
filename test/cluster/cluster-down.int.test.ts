/**
 * A Redis Cluster whose state is `fail` (a master down, no replica to promote): a Tetraloop
 * connection still becomes ready, and a `connect()` after a `disconnect()` — what BullMQ does to a
 * worker's blocking connection after each interrupted wait — settles. With ioredis's ready check,
 * that `connect()` never settled while a failover was under way, and the worker took no job again.
 */
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { Redis } from 'ioredis';
import {
  connectRedis,
  isRedisUnavailable,
  startRedisCluster,
  type RedisClient,
  type RedisClusterServer,
} from '@tetraloop/core/runtime';

let cluster: RedisClusterServer;
const clients: RedisClient[] = [];

beforeAll(async () => {
  cluster = await startRedisCluster({ masters: 3, nodeTimeoutMs: 1000 });
  // One master killed: with no replica to take its slots, the others mark the cluster failed.
  process.kill(cluster.pids[cluster.nodes.indexOf(cluster.masters[0]!)]!, 'SIGKILL');
  const survivor = new Redis(cluster.masters[1]!);
  try {
    await vi.waitFor(
      async () => {
        if (!(await survivor.cluster('INFO')).includes('cluster_state:fail'))
          throw new Error('the cluster was not marked failed within 20 s');
      },
      { timeout: 20_000, interval: 100 },
    );
  } finally {
    survivor.disconnect();
  }
}, 60_000);
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await cluster?.stop();
}, 30_000);

it('connects while the cluster is failed, and connects again after a disconnect', async () => {
  const client = connectRedis(cluster.url, 'worker', 'cluster-down-test');
  client.on('error', () => undefined);
  clients.push(client);
  await vi.waitFor(() => expect(client.status).toBe('ready'), { timeout: 10_000, interval: 50 });

  // BullMQ's reconnect of a blocking connection: disconnect, wait for `end`, connect.
  const ended = new Promise((resolve) => client.once('end', resolve));
  client.disconnect();
  await ended;
  await expect(client.connect()).resolves.toBeUndefined();
  expect(client.status).toBe('ready');
  // Commands are refused while the cluster is failed (every slot, as it does not cover them all),
  // in words Tetraloop reads as Redis away: the API answers 503, a job tries again.
  const refused = await client.set('k', '1').then(
    () => new Error('the command succeeded'),
    (err: unknown) => err,
  );
  expect(String(refused)).toMatch(/CLUSTERDOWN|Too many Cluster redirections/);
  expect(isRedisUnavailable(refused)).toBe(true);
});
