/** Starts the API: connections, services, HTTP listener; `close()` undoes all of it. */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as delay } from 'node:timers/promises';
import { QueueEvents } from 'bullmq';
import { AcceptBarrier, waitsForDurability } from '@tetraloop/core/durability';
import { type DestinationStream, type Logger, createLogger } from '@tetraloop/core/logging';
import { QUEUE_NAMES, closeQueues, openQueues, shownQueues } from '@tetraloop/core/queues';
import { RunEventHub, RunWaiter, type RunService } from '@tetraloop/core/runs';
import {
  buildServices,
  closeRedis,
  connectRedis,
  openTools,
  whenReady,
  type RedisClient,
} from '@tetraloop/core/runtime';
import { ApiKeyStore, ItemStore, RateLimitStore, purgeTenant } from '@tetraloop/core/state';
import { metrics, QueueWatch } from '@tetraloop/core/telemetry';
import { parseAllowHosts } from '@tetraloop/core/tools';
import { adminBoard } from './admin.js';
import { createApp, registeredRoutes, type RegisteredRoute } from './app.js';
import {
  acceptDurabilityOf,
  apiKeyStoreOptionsOf,
  appSettingsOf,
  eventHubSettingsOf,
  longRequestsOf,
  type ApiEnv,
} from './env.js';
import { refreshLessonGauge } from './lesson-metrics.js';
import { LongRequests } from './long-requests.js';

export interface ApiHandle {
  readonly url: string;
  readonly port: number;
  /** The runs the HTTP handlers serve, for a process that embeds the API and submits in-process. */
  readonly runs: RunService;
  /** Wakes on settled runs, as `GET /v1/runs/:id/wait` does. */
  readonly waiter: RunWaiter;
  /** The method and path of every route the app registers (what the OpenAPI contract test checks). */
  readonly routes: readonly RegisteredRoute[];
  readonly close: () => Promise<void>;
}

export interface StartApiOptions {
  /** Where the API's logs go; stdout when absent. */
  readonly logDestination?: DestinationStream;
}

export async function startApi(env: ApiEnv, options: StartApiOptions = {}): Promise<ApiHandle> {
  const logger = createLogger(
    { level: env.LOG_LEVEL, layer: 'api', redact: env.TETRALOOP_LOG_REDACT },
    options.logDestination,
  );
  // First, so a Redis that cannot give the accept durability asked for stops the API before it opens anything else.
  const barrier = await openAcceptBarrier(env, logger);
  // Run state, keys, indexes and BullMQ's queues: one connection every request shares. A new run's
  // create and its root job's add are sent on it in that order, and Redis runs them so: one round
  // trip per accept. What one iteration of the event loop wrote — the commands of every request
  // it read — leaves in one write: a write per request cost more CPU, here and in Redis, than the
  // commands in it.
  const redis = connectRedis(env.REDIS_URL, 'client', `tetraloop-api-${process.pid}`, {
    writes: 'iteration',
  });
  const subscriber = connectRedis(env.REDIS_URL, 'subscriber', `tetraloop-api-sub-${process.pid}`);
  const eventsConnection = connectRedis(env.REDIS_URL, 'worker', `tetraloop-api-qe-${process.pid}`);
  for (const c of [redis, subscriber, eventsConnection]) {
    c.on('error', (err: Error) => logger.warn({ err: err.message }, 'redis connection error'));
  }
  // What the API has opened, in order: a start that fails and `close()` both close it last first,
  // so an API that cannot start leaves no connection retrying and no listener behind it.
  const opened: Closer[] = [
    () => {
      for (const c of [subscriber, eventsConnection]) c.disconnect();
      barrier?.connection.disconnect();
      // What was sent on it is answered first (a client's connection fails fast when Redis is gone).
      return closeRedis(redis);
    },
  ];
  try {
    // It fails fast (no offline queue): what starting reads from Redis waits until it can be sent.
    await whenReady(redis);
    return await openApi(env, logger, { redis, subscriber, eventsConnection, barrier }, opened);
  } catch (err) {
    await closeAll(opened, logger);
    throw err;
  }
}

/** Closes one part of the API; a part that fails to close does not keep the others open. */
type Closer = () => unknown;

/**
 * Closes what was opened, last first, each after the one opened after it has closed. A part that
 * fails to close is logged and the rest still close.
 */
async function closeAll(opened: readonly Closer[], logger: Logger): Promise<void> {
  for (const close of [...opened].reverse())
    await Promise.resolve()
      .then(close)
      .catch((err: unknown) => logger.warn({ err }, 'a part of the API failed to close'));
}

interface ApiConnections {
  readonly redis: RedisClient;
  readonly subscriber: RedisClient;
  readonly eventsConnection: RedisClient;
  readonly barrier: Awaited<ReturnType<typeof openAcceptBarrier>>;
}

/** The API on its ready connections; each part it opens is added to `opened` as it opens. */
async function openApi(
  env: ApiEnv,
  logger: Logger,
  { redis, subscriber, eventsConnection, barrier }: ApiConnections,
  opened: Closer[],
): Promise<ApiHandle> {
  const prefix = env.TETRALOOP_PREFIX;
  const queues = openQueues(redis, prefix, logger, env.TETRALOOP_QUEUE_SHARDS);
  opened.push(() => closeQueues(queues));
  // Finished sense jobs answer session messages; one listener per API process.
  const senseEvents = new QueueEvents(QUEUE_NAMES.sense, {
    connection: eventsConnection,
    prefix: queues.sense.opts.prefix!,
  });
  senseEvents.on('error', (err) => logger.warn({ err: err.message }, 'queue events error'));
  // A blocking reader's close waits for Redis; with Redis gone it would wait forever.
  opened.push(() => Promise.race([senseEvents.close(), delay(1000, undefined, { ref: false })]));
  // The API validates graphs against the tools' schemas; egress is the workers' concern. MCP
  // servers' tools it knows from the lists workers publish to Redis: it starts no server.
  const mcp = await openTools(env, { redis, subscriber, logger, egress: parseAllowHosts('') });
  opened.push(() => mcp.close());
  const services = buildServices(env, redis, queues, mcp.tools, undefined, logger);
  const waiter = await RunWaiter.listen(subscriber, services.store.channels.settled);
  opened.push(() => waiter.close());
  await services.webhooks.followChanges(subscriber);
  // Every event stream of the process is fed from these few blocking connections.
  const hub = new RunEventHub(services.store, {
    client: redis,
    connect: () => {
      const c = connectRedis(env.REDIS_URL, 'subscriber', `tetraloop-api-events-${process.pid}`);
      c.on('error', (err: Error) => logger.warn({ err: err.message }, 'redis connection error'));
      return c;
    },
    ...eventHubSettingsOf(env),
    onError: (err) => logger.warn({ err: err.message }, 'event stream read failed; retrying'),
  });
  opened.push(() => hub.close());
  const longRequests = new LongRequests(longRequestsOf(env));
  const watch = new QueueWatch(shownQueues(queues));
  // A custom tool's queue is watched (and shown in Bull Board) once the catalog names it.
  mcp.catalog.onQueues((names) => watch.add(shownQueues(queues, names)));
  const stopWatch = await watch.start(env.TETRALOOP_QUEUE_CHECK_MS, () => undefined);
  opened.push(stopWatch);
  const memory = services.memory;
  // Scrape-time gauges: queue depths, and the lessons of every agent when the API has memory.
  const refreshMetrics = async (): Promise<void> => {
    await Promise.all([
      watch.refresh(),
      services.sessionStore.laneLoad().then(
        ({ busy, waiting }) => {
          metrics.lanesBusy.set(busy);
          metrics.laneWaiting.set(waiting);
        },
        (err: Error) => logger.debug({ err: err.message }, 'lane gauges not refreshed'),
      ),
      memory &&
        refreshLessonGauge(memory.store).catch((err: Error) =>
          logger.debug({ err: err.message }, 'lessons gauge not refreshed'),
        ),
    ]);
  };
  const keys = new ApiKeyStore(redis, apiKeyStoreOptionsOf(env));
  if (env.TETRALOOP_AUTH === 'off') {
    logger.warn({ host: env.HOST }, 'auth is off: every request may do anything (TETRALOOP_AUTH=off)');
  } else if (!env.TETRALOOP_ADMIN_TOKEN) {
    logger.warn('no TETRALOOP_ADMIN_TOKEN: keys can only be made with `tetraloop keys create` on Redis');
  }
  const app = createApp({
    ...appSettingsOf(env),
    refreshMetrics,
    ...(env.TETRALOOP_ADMIN_TOKEN
      ? {
          admin: adminBoard({
            token: env.TETRALOOP_ADMIN_TOKEN,
            redis,
            prefix,
            queues: watch.watched,
            follow: (show) => mcp.catalog.onQueues((names) => show(shownQueues(queues, names))),
            readOnly: env.TETRALOOP_ADMIN_READ_ONLY,
          }),
        }
      : {}),
    auth: {
      mode: env.TETRALOOP_AUTH,
      ...(env.TETRALOOP_ADMIN_TOKEN ? { rootToken: env.TETRALOOP_ADMIN_TOKEN } : {}),
      keys,
    },
    purgeTenant: async (tenant) => {
      await services.schedules.removeTenant(tenant);
      // Its archived records go with it, as far as anyone asking is concerned.
      await services.archive?.archive.forgetTenant(tenant, new Date());
      return purgeTenant({ redis, prefix, store: services.store, keys }, tenant);
    },
    redis,
    store: services.store,
    hub,
    longRequests,
    runs: services.runs,
    ...(services.archive ? { archive: services.archive.archive } : {}),
    ...(barrier ? { acceptBarrier: barrier.barrier } : {}),
    sessionStore: services.sessionStore,
    ...(services.memory ? { memory: services.memory } : {}),
    sources: services.sources,
    secrets: services.secrets,
    outboundWebhooks: services.webhooks,
    schedules: services.schedules,
    costs: services.costs,
    triggers: services.triggers,
    events: services.events,
    tools: mcp.tools,
    toolCatalog: () => mcp.catalog.snapshot(),
    senseQueue: queues.sense,
    senseEvents,
    waiter,
    logger,
    ceilings: services.ceilings,
    rateLimits: new RateLimitStore(redis, prefix),
    items: new ItemStore(redis, { prefix, maxPerTenant: env.TETRALOOP_STORE_ITEMS_MAX }),
    flow: services.flow,
  });
  const server = app.listen(env.PORT, env.HOST);
  opened.push(() => closeServer(server, env.TETRALOOP_SHUTDOWN_GRACE_MS));
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
    runs: services.runs,
    waiter,
    routes: registeredRoutes(app),
    close: () => closeAll(opened, logger),
  };
}

/**
 * Stops accepting, gives open requests and event streams the grace period, then cuts them. The
 * grace timer is cancelled once the server has closed, so it keeps no process alive.
 */
async function closeServer(server: Server, graceMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  const grace = new AbortController();
  await Promise.race([closed, delay(graceMs, undefined, { signal: grace.signal }).catch(() => undefined)]);
  grace.abort();
  server.closeAllConnections();
  await closed;
}

/**
 * The accept barrier on a connection of its own (its waits block the connection), when
 * `POST /v1/runs` is to wait for replicas or the AOF; throws AcceptDurabilityError when Redis
 * cannot give what is asked.
 */
async function openAcceptBarrier(
  env: ApiEnv,
  logger: Logger,
): Promise<{ barrier: AcceptBarrier; connection: RedisClient } | undefined> {
  const durability = acceptDurabilityOf(env);
  if (!waitsForDurability(durability)) return undefined;
  const connection = connectRedis(env.REDIS_URL, 'client', `tetraloop-api-barrier-${process.pid}`);
  connection.on('error', (err: Error) => logger.warn({ err: err.message }, 'redis connection error'));
  try {
    const barrier = await AcceptBarrier.open(connection, env.TETRALOOP_PREFIX, durability);
    logger.info({ durability }, 'accepted runs wait for replicas or the AOF');
    return barrier && { barrier, connection };
  } catch (err) {
    connection.disconnect();
    throw err;
  }
}
