import { Redis } from 'ioredis';

/**
 * Connection roles differ in how they behave when Redis is away:
 * - `worker`: BullMQ workers wait and retry forever (`maxRetriesPerRequest: null`, required by BullMQ);
 * - `client`: request handlers fail fast (no offline queue) so the API answers 503 instead of hanging;
 * - `subscriber`: pub/sub listeners reconnect and resubscribe on their own.
 */
export type ConnectionRole = 'worker' | 'client' | 'subscriber';

export function connectRedis(url: string, role: ConnectionRole, name: string): Redis {
  const common = { connectionName: name, retryStrategy: (times: number) => Math.min(times * 200, 2000) };
  switch (role) {
    case 'worker':
      return new Redis(url, { ...common, maxRetriesPerRequest: null });
    case 'client':
      return new Redis(url, { ...common, enableOfflineQueue: false, maxRetriesPerRequest: 1 });
    case 'subscriber':
      return new Redis(url, { ...common, maxRetriesPerRequest: null });
  }
}

/** Resolves once the connection is ready, or rejects with the connection error. */
export async function whenReady(redis: Redis, timeoutMs = 10_000): Promise<void> {
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
export async function connectRedisOnce(url: string, name: string, timeoutMs = 5000): Promise<Redis> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectionName: name,
    connectTimeout: timeoutMs,
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
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
