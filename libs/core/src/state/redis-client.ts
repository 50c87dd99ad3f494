/**
 * A connection to Tetraloop's Redis as the stores see it: one server, or a Redis Cluster when
 * `REDIS_URL` names one (connections are made in `runtime/redis.ts`). Both take the same
 * commands; on a cluster every script, `MULTI` and pipeline must name keys of one slot (see
 * `keys.ts`, `slot-multi.ts`).
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { Cluster, Redis } from 'ioredis';

export type RedisClient = Redis | Cluster;

/** Whether a connection is to a Redis Cluster. */
export const isCluster = (redis: RedisClient): redis is Cluster => redis.isCluster;

/**
 * The masters of a connection: each node of a cluster, or the one server. For what must see every
 * key (SCAN, INFO): on a cluster each master holds only its slots' keys.
 */
export const mastersOf = (redis: RedisClient): Redis[] =>
  isCluster(redis) ? redis.nodes('master') : [redis];

/**
 * Closes a connection: `QUIT` (what was sent is answered first), or a hard disconnect when that
 * fails or takes longer than `timeoutMs`. A Cluster client's `QUIT` goes to every node it knows and
 * waits on one that died until its reconnects give up, so a shutdown could otherwise hang on a
 * Redis node that is gone.
 */
export async function closeRedis(redis: RedisClient, timeoutMs = 2000): Promise<void> {
  const timer = new AbortController();
  const quit = redis.quit().then(
    () => true,
    () => false,
  );
  const inTime = await Promise.race([
    quit,
    delay(timeoutMs, false, { signal: timer.signal }).catch(() => false),
  ]);
  timer.abort();
  if (!inTime) redis.disconnect();
}

/**
 * A new connection like `redis`: to the same server or cluster, with the same options; for reads
 * that block. Redis's and Cluster's `duplicate` are each generic over options of their own, so
 * TypeScript cannot call the union of the two: it is typed here by what both answer, a client.
 */
export function duplicateClient(redis: RedisClient): RedisClient {
  const duplicate: () => RedisClient = redis.duplicate.bind(redis);
  return duplicate();
}
