/** Starts the API: connections, services, HTTP listener; `close()` undoes all of it. */
import type { AddressInfo } from 'node:net';
import { Queue } from 'bullmq';
import {
  RunService,
  RunStore,
  RunWaiter,
  builtinTools,
  allowedToolsOf,
  connectRedis,
  createLogger,
  isModelConfigured,
  modelConfigOf,
  parseAllowHosts,
} from '@tetraloop/core';
import { createApp } from './app.js';
import type { ApiEnv } from './env.js';

export interface ApiHandle {
  readonly url: string;
  readonly port: number;
  readonly close: () => Promise<void>;
}

export async function startApi(env: ApiEnv): Promise<ApiHandle> {
  const logger = createLogger({ level: env.LOG_LEVEL, layer: 'api' });
  const redis = connectRedis(env.REDIS_URL, 'client', `tetraloop-api-${process.pid}`);
  const subscriber = connectRedis(env.REDIS_URL, 'subscriber', `tetraloop-api-sub-${process.pid}`);
  redis.on('error', (err) => logger.warn({ err: err.message }, 'redis connection error'));
  subscriber.on('error', (err) => logger.warn({ err: err.message }, 'redis subscriber error'));
  const prefix = env.TETRALOOP_PREFIX;
  const retention = {
    completedAgeSeconds: env.TETRALOOP_JOB_COMPLETED_AGE_SECONDS,
    completedCount: env.TETRALOOP_JOB_COMPLETED_COUNT,
    failedAgeSeconds: env.TETRALOOP_JOB_FAILED_AGE_SECONDS,
  };
  const store = new RunStore(redis, { prefix, retentionSeconds: env.TETRALOOP_RUN_RETENTION_SECONDS });
  const planQueue = new Queue('plan', { connection: redis, prefix });
  const toolQueue = new Queue('tool', { connection: redis, prefix });
  for (const q of [planQueue, toolQueue])
    q.on('error', (err) => logger.warn({ err: err.message }, 'queue error'));
  const waiter = await RunWaiter.listen(subscriber, store.channels.settled);
  const tools = builtinTools({ egress: parseAllowHosts('') });
  const runs = new RunService({
    store,
    planQueue,
    toolQueue,
    modelConfigured: isModelConfigured(modelConfigOf(env)),
    allowedTools: allowedToolsOf(env, tools),
    defaultBudget: {
      toolCalls: env.TETRALOOP_BUDGET_TOOL_CALLS,
      toolTimeMs: env.TETRALOOP_BUDGET_TOOL_TIME_MS,
      tokens: env.TETRALOOP_BUDGET_TOKENS,
    },
    // The API validates graphs against the tools' schemas; egress is the workers' concern.
    tools,
    limits: { maxNodes: env.TETRALOOP_MAX_NODES, maxEdges: env.TETRALOOP_MAX_EDGES },
    retention,
  });
  const app = createApp({
    redis,
    store,
    // Each open event stream blocks on a connection of its own.
    blockingConnection: () =>
      connectRedis(env.REDIS_URL, 'subscriber', `tetraloop-api-events-${process.pid}`),
    runs,
    waiter,
    logger,
    bodyLimitBytes: env.TETRALOOP_BODY_LIMIT_BYTES,
    maxWaitMs: env.TETRALOOP_MAX_WAIT_MS,
  });
  const server = app.listen(env.PORT, env.HOST);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const port = (server.address() as AddressInfo).port;
  const host = env.HOST === '0.0.0.0' || env.HOST === '::' ? '127.0.0.1' : env.HOST;
  const url = `http://${host}:${port}`;
  logger.info({ url }, 'api listening');
  return {
    url,
    port,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await planQueue.close();
      await toolQueue.close();
      await waiter.close();
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}
