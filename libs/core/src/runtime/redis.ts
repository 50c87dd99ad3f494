import { CONNECTION_CLOSED_ERROR_MSG, ConnectionClosedError } from 'bullmq';
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { isClusterUrl, parseClusterUrl } from '../config/redis-url.js';
import type { RedisClient } from '../state/redis-client.js';

export {
  closeRedis,
  duplicateClient,
  isCluster,
  mastersOf,
  type RedisClient,
} from '../state/redis-client.js';

/**
 * Connection roles differ in how they behave when Redis is away:
 * - `worker`: BullMQ workers wait and retry forever (`maxRetriesPerRequest: null`, required by BullMQ);
 * - `client`: request handlers fail fast (no offline queue) so the API answers 503 instead of hanging;
 * - `subscriber`: pub/sub listeners reconnect and resubscribe on their own.
 */
export type ConnectionRole = 'worker' | 'client' | 'subscriber';

const roleOptions = (role: ConnectionRole): RedisOptions => {
  switch (role) {
    case 'worker':
    case 'subscriber':
      return { maxRetriesPerRequest: null };
    case 'client':
      return { enableOfflineQueue: false, maxRetriesPerRequest: 1 };
  }
};

const retryStrategy = (times: number): number => Math.min(times * 200, 2000);

/**
 * When a connection sends what it was given: `tick`, once the callback that wrote it and the
 * promise continuations it set off have run (`process.nextTick`); `iteration`, at the end of the
 * event loop's iteration (`setImmediate`), so the commands of every callback the iteration ran —
 * each request an HTTP server read — share one write.
 */
export type WriteBatch = 'tick' | 'iteration';

/**
 * Every connection (each node's, on a cluster) sends what one tick, or one iteration of the event
 * loop, wrote in one write (`batchWrites`). None auto-pipelines (ioredis's `enableAutoPipelining`):
 * building a pipeline per iteration cost more CPU than the writes it saved, in the workers and in
 * the API (each copies every script defined on the connection, BullMQ's among them).
 */
export function connectRedis(
  url: string,
  role: ConnectionRole,
  name: string,
  { writes = 'tick' }: { writes?: WriteBatch } = {},
): RedisClient {
  const options: RedisOptions = {
    connectionName: name,
    retryStrategy,
    ...roleOptions(role),
  };
  if (isClusterUrl(url)) {
    const cluster = connectCluster(url, options);
    cluster.on('+node', (node: Redis) => batchWrites(node, writes));
    return cluster;
  }
  const redis = new Redis(url, options);
  batchWrites(redis, writes);
  return redis;
}

/** Sockets whose writes are batched already (a second `connect` for one socket changes nothing). */
const batchedSockets = new WeakSet<object>();

/**
 * Makes each socket of `redis` (a new one on every reconnect) send what one tick (or iteration,
 * `writes`) writes in one write: the first command corks it, and it is uncorked at the end of the
 * tick or iteration. Commands issued while one batch of replies is handled — the completions of
 * concurrent jobs, a BullMQ job's finish and the next one's fetch — then share a `writev`. A write
 * to a socket costs far more CPU, in this process and in Redis, than the bytes in it. Commands keep
 * the order they were issued in; a command issued before long synchronous work leaves after it
 * (nothing here does that while awaiting Redis). Closing the socket (`quit`, `disconnect`) sends
 * what is corked first.
 */
function batchWrites(redis: Redis, writes: WriteBatch): void {
  const defer =
    writes === 'tick' ? (f: () => void) => process.nextTick(f) : (f: () => void) => void setImmediate(f);
  redis.on('connect', () => {
    const socket = redis.stream;
    if (batchedSockets.has(socket)) return;
    batchedSockets.add(socket);
    const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
    let corked = false;
    const uncork = (): void => {
      corked = false;
      socket.uncork();
    };
    socket.write = (...args: unknown[]): boolean => {
      if (!corked) {
        corked = true;
        socket.cork();
        defer(uncork);
      }
      return write(...args);
    };
  });
}

/**
 * A Cluster client from some of its nodes. The per-node options are the role's; the cluster's own
 * offline queue follows the role's (a `client` fails fast while the slots are not known yet), and
 * every command goes to a master (reads from replicas could miss a write just made).
 *
 * No ready check (`CLUSTER INFO` answering `cluster_state:ok`): a client that connects while a
 * master is down and its replica not yet promoted fails that check and reconnects on its own, but
 * the promise of the `connect()` that started it then never settles (ioredis 6). BullMQ reconnects
 * a worker's blocking connection with `connect()` after each interrupted wait, so a worker that did
 * so during a failover stopped taking jobs for good (its root jobs waited, never taken). Without the
 * check, the client is ready once it knows the slots; a command to a slot without a master answers
 * `CLUSTERDOWN` until the failover ends, which ioredis retries and Tetraloop reads as Redis away.
 */
function connectCluster(url: string, options: RedisOptions): Cluster {
  const { nodes, username, password, tls } = parseClusterUrl(url);
  // The cluster takes these itself; each node's connection takes the rest.
  const { retryStrategy: clusterRetryStrategy, enableOfflineQueue, lazyConnect, ...perNode } = options;
  return new Cluster(
    nodes.map((n) => ({ host: n.host, port: n.port })),
    {
      redisOptions: {
        ...perNode,
        ...(username ? { username } : {}),
        ...(password ? { password } : {}),
        ...(tls ? { tls: {} } : {}),
      },
      ...(clusterRetryStrategy ? { clusterRetryStrategy } : {}),
      enableOfflineQueue: enableOfflineQueue ?? true,
      lazyConnect: lazyConnect ?? false,
      enableReadyCheck: false,
      scaleReads: 'master',
    },
  );
}

/** Resolves once the connection is ready, or rejects once `timeoutMs` have passed without it. */
export async function whenReady(redis: RedisClient, timeoutMs = 10_000): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`Redis not ready after ${timeoutMs} ms`));
    }, timeoutMs);
    const onReady = (): void => {
      cleanup();
      resolve();
    };
    const cleanup = (): void => {
      clearTimeout(timer);
      redis.off('ready', onReady);
    };
    redis.on('ready', onReady);
  });
}

/**
 * A connection for a command-line tool: one attempt, no reconnects, no offline queue, so a Redis
 * that is not there is said at once. Resolves once connected, or rejects with the reason.
 */
export async function connectRedisOnce(url: string, name: string, timeoutMs = 5000): Promise<RedisClient> {
  const options: RedisOptions = {
    lazyConnect: true,
    connectionName: name,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  };
  const redis = isClusterUrl(url) ? connectCluster(url, options) : new Redis(url, options);
  let lastError: Error | undefined;
  redis.on('error', (err: Error) => (lastError = err));
  try {
    await redis.connect();
    return redis;
  } catch (err) {
    redis.disconnect();
    throw lastError ?? err;
  }
}

/** Socket error codes of a Redis connection that is down or going down. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTCONN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ENOTFOUND',
]);
/** Redis replies that say the server cannot serve now (the first word of a reply error is its code). */
const UNAVAILABLE_REPLIES = new Set(['LOADING', 'MASTERDOWN', 'CLUSTERDOWN', 'TRYAGAIN', 'BUSY']);
/**
 * On a cluster client, `MOVED` and `ASK` reach the caller when it could not follow a slot that is
 * moving (or whose master just failed over), and `READONLY` when it wrote to a master demoted to a
 * replica: each passes once the client has learnt the new owners. From a plain client they mean a
 * `REDIS_URL` that names one node of a cluster, or a replica: a configuration error, not an outage.
 */
const CLUSTER_MOVING_REPLIES = new Set(['MOVED', 'ASK', 'READONLY']);
/** ioredis's Cluster gives up following redirections (during a failover) with this message. */
const CLUSTER_REDIRECTIONS_MSG = 'Too many Cluster redirections.';
/**
 * ioredis rejects a command on a closed connection with a plain `Error` carrying this message (the
 * constant BullMQ mirrors from ioredis); it has no class or code to recognise it by, so this one
 * message is compared whole. A closed connection can reject this way while `status` still says
 * `ready`, before the close event has been handled.
 */
const PLAIN_CONNECTION_ERRORS = new Set([
  CONNECTION_CLOSED_ERROR_MSG,
  "Stream isn't writeable and enableOfflineQueue options is false",
  // A Redis Cluster client that has not (or no longer) learnt the cluster's slots.
  "Cluster isn't ready and enableOfflineQueue options is false",
  'None of startup nodes is available',
]);

/**
 * Whether `err` (or an error it wraps as its `cause`) says Redis is unreachable rather than that
 * the request or the code is wrong: BullMQ's `ConnectionClosedError`, ioredis' aborts
 * (`MaxRetriesPerRequestError`, a command aborted by a closing connection), socket errors by
 * code, Redis' own "not now" replies (`LOADING`, `MASTERDOWN`…, and on a cluster client the
 * redirections it could not follow), and ioredis' closed-connection rejection.
 */
export function isRedisUnavailable(
  err: unknown,
  /** The error came from a Redis Cluster client (a `redis+cluster://` URL). */
  { clustered = false }: { readonly clustered?: boolean } = {},
): boolean {
  for (let e = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof ConnectionClosedError) return true;
    // redis-errors' AbortError and its subclass MaxRetriesPerRequestError: the command never ran.
    if (e.name === 'AbortError' || e.name === 'MaxRetriesPerRequestError') return true;
    // A cluster client that could reach none of the nodes it knows.
    if (e.name === 'ClusterAllFailedError') return true;
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && SOCKET_CODES.has(code)) return true;
    if (e.name === 'ReplyError') {
      const reply = e.message.split(' ', 1)[0] ?? '';
      if (UNAVAILABLE_REPLIES.has(reply) || (clustered && CLUSTER_MOVING_REPLIES.has(reply))) return true;
    }
    if (PLAIN_CONNECTION_ERRORS.has(e.message) || e.message.startsWith(CLUSTER_REDIRECTIONS_MSG)) return true;
  }
  return false;
}
