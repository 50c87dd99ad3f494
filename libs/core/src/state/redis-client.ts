/**
 * A connection to Tetraloop's Redis as the stores see it: one server, or a Redis Cluster when
 * `REDIS_URL` names one (connections are made in `runtime/redis.ts`). Both take the same
 * commands; on a cluster every script, `MULTI` and pipeline must name keys of one slot (see
 * `keys.ts`, `slot-multi.ts`).
 */
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
