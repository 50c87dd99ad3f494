/**
 * What the pools of one worker process share: its Redis connections, the loop queues, the tools
 * (MCP servers' included), the services, run aborts, flow control of the tool pool's calls, and the
 * executor dependencies each pool's processors are given. Opened once by `startPools`; each pool's
 * module (`plan.ts`, `node.ts`, `sense.ts`, `reflect.ts`) takes what it needs from it.
 */
import { setMaxListeners } from 'node:events';
import {
  allowedToolsOf,
  priceTableOf,
  modelConfigOf,
  flowSettingsOf,
  planCacheOptionsOf,
  planningSettingsOf,
  secretStoreOptionsOf,
} from '@tetraloop/core/config';
import {
  PlanCache,
  RunAborts,
  FlowGate,
  RemoteToolCalls,
  type ExecutorDeps,
  type ExecutorHooks,
} from '@tetraloop/core/executor';
import { loadPlugins } from '@tetraloop/core/hooks';
import { createLogger, type Logger, type DestinationStream } from '@tetraloop/core/logging';
import { ModelClient, isModelConfigured } from '@tetraloop/core/model';
import { closeQueues, findNodeJob, openQueues, type LoopQueues, type Pool } from '@tetraloop/core/queues';
import {
  buildServices,
  closeRedis,
  connectRedis,
  openTools,
  loadToolModules,
  unservedQueues,
  type ProcessTools,
  type RedisClient,
  type Services,
} from '@tetraloop/core/runtime';
import { PlanCacheStore, RunNodeSlots, TenantSlots, loadCallKey } from '@tetraloop/core/state';
import { parseAllowHosts, type CustomTool, type EgressPolicy } from '@tetraloop/core/tools';
import { executorSettingsOf, lessonSettingsOf, mcpConnectionOf, type WorkerEnv } from '../env.js';

export interface StartPoolsOptions {
  readonly pools: readonly Pool[];
  /** Overrides the pool's configured concurrency. */
  readonly concurrency?: number;
  /** Functions the executors call at set points, e.g. to refresh credentials before an `auth` retry. */
  readonly hooks?: ExecutorHooks;
  /** Where the pools' logs go; stdout when absent. */
  readonly logDestination?: DestinationStream;
  /**
   * Custom tools the tool pool serves, besides those of TETRALOOP_TOOL_MODULES (`startWorker` of
   * `@tetraloop/sdk` gives them here).
   */
  readonly tools?: readonly CustomTool[];
  /** The tool queues the tool pool serves; TETRALOOP_TOOL_QUEUES when absent. */
  readonly queues?: readonly string[];
}

export interface PoolContext {
  readonly env: WorkerEnv;
  readonly options: StartPoolsOptions;
  /** BullMQ's connection (the Workers and the queues). */
  readonly connection: RedisClient;
  /** Run and session state's connection. */
  readonly state: RedisClient;
  readonly queues: LoopQueues;
  readonly services: Services;
  /** The process's tools: the built-in ones, its MCP servers' and the custom tools it knows. */
  readonly mcp: ProcessTools;
  /** The tool queues its tool pool serves (`default`: the node queue). */
  readonly servedQueues: readonly string[];
  /** The egress policy the http tool, polled sources and webhook deliveries are held to. */
  readonly egress: EgressPolicy;
  /** Flow control of the tool pool's calls; its tick grants waiting calls and wakes their jobs. */
  readonly flow: FlowGate;
  /** The process's logger (its first pool's layer). */
  readonly log: Logger;
  readonly loggerFor: (layer: Pool) => Logger;
  /** Executor dependencies for one Worker of a pool: its own plan cache and logger layer. */
  readonly executorDeps: (layer: Pool) => ExecutorDeps;
  /**
   * Marks the process closing: node jobs stop handing off, so the tool pool drains within its grace,
   * and custom tool calls in flight are aborted, their nodes handed back to their queues.
   */
  readonly stop: () => void;
  readonly closing: () => boolean;
  /** Aborted when the process starts to shut down. */
  readonly shutdown: AbortSignal;
  /** Closes what the context opened; after the workers (active jobs may still be calling MCP tools). */
  readonly close: () => Promise<void>;
}

export async function openPoolContext(env: WorkerEnv, options: StartPoolsOptions): Promise<PoolContext> {
  // A tool pool serves the custom tools of its modules on its queues; the other pools serve none.
  // Loaded first: a module that cannot serve stops the process before it connects to anything.
  const servesTools = options.pools.includes('tool');
  const servedQueues = options.queues ?? env.TETRALOOP_TOOL_QUEUES;
  const customTools = servesTools
    ? [...(options.tools ?? []), ...(await loadToolModules(env.TETRALOOP_TOOL_MODULES))]
    : [];
  const connection = connectRedis(env.REDIS_URL, 'worker', `tetraloop-worker-${process.pid}`);
  // Run and session state get a connection of their own: ioredis copies every script defined on a
  // connection (BullMQ's) into each pipeline it builds, and the stores build theirs (`slotMulti`)
  // here. The commands of one tick leave in one write (connectRedis).
  const state = connectRedis(env.REDIS_URL, 'worker', `tetraloop-worker-state-${process.pid}`);
  const subscriber = connectRedis(env.REDIS_URL, 'subscriber', `tetraloop-worker-sub-${process.pid}`);
  const prefix = env.TETRALOOP_PREFIX;
  const loggerFor = (layer: Pool): Logger =>
    createLogger({ level: env.LOG_LEVEL, layer, redact: env.TETRALOOP_LOG_REDACT }, options.logDestination);
  const log = loggerFor(options.pools[0] ?? 'tool');
  for (const c of [connection, state])
    c.on('error', (err: Error) => log.warn({ err: err.message }, 'redis connection error'));
  subscriber.on('error', (err: Error) => log.warn({ err: err.message }, 'redis subscriber error'));

  const queues = openQueues(connection, prefix, log, env.TETRALOOP_QUEUE_SHARDS);
  const egress = parseAllowHosts(env.TETRALOOP_HTTP_ALLOW_HOSTS, env.TETRALOOP_HTTP_MAX_BYTES);
  // A process that runs the tool pool calls tools: it connects to every MCP server. The other
  // pools only validate and plan: they read the servers' lists from Redis, as the API does.
  const unserved = unservedQueues(customTools, servedQueues);
  if (unserved.length > 0)
    log.warn(
      { tools: unserved, queues: servedQueues },
      'tools on queues this process does not serve: their nodes run elsewhere (add the queue to --queues); an agent or loop here may still call them',
    );
  const mcp = await openTools(env, {
    redis: state,
    subscriber,
    logger: log.child({ component: 'mcp' }),
    egress,
    ...(options.pools.includes('tool') ? { connect: mcpConnectionOf(env) } : {}),
    ...(customTools.length > 0 ? { serve: { tools: customTools, queues: servedQueues } } : {}),
  });
  const tools = mcp.tools;
  const registry = options.hooks?.registry ?? (await loadPlugins(env.TETRALOOP_PLUGINS, process.env, log));
  // A plugin's refreshCredentials serves when the embedding program passes none.
  const refreshCredentials = options.hooks?.refreshCredentials ?? registry.credentialRefresh();
  const hooks = { ...options.hooks, registry, ...(refreshCredentials ? { refreshCredentials } : {}) };
  const settings = executorSettingsOf(env);
  const modelConfig = modelConfigOf(env);
  const model = isModelConfigured(modelConfig) ? new ModelClient(modelConfig, settings.backoff) : undefined;
  // The sense pool (and the plan pool, for merged collect runs) prepares session runs, whose
  // history compactions the model summarises.
  const services = buildServices(env, state, queues, tools, registry, log, {
    egress,
    ...(model ? { model } : {}),
  });
  const { store } = services;
  const aborts = await RunAborts.listen(subscriber, store.channels.abort);
  await services.webhooks.followChanges(subscriber);
  // First plans of repeated tasks, shared by every plan worker through Redis.
  const planCache = new PlanCacheStore(state, planCacheOptionsOf(env));
  // Every worker of the deployment signs outbound Idempotency-Keys with the same key.
  const callKey = await loadCallKey(state, prefix, secretStoreOptionsOf(env).key);
  const { ceilings } = services;
  const slots = new TenantSlots(state, prefix);
  const nodeSlots = new RunNodeSlots(state, prefix);
  const flow = new FlowGate(
    services.flow,
    flowSettingsOf(env),
    // A member is a node job's id, `<runId>.<nodeId>[@generation]`; node ids hold no '.'.
    (jobId) => findNodeJob(services.runQueues, jobId.slice(0, jobId.lastIndexOf('.')), jobId),
    log.child({ layer: 'flow' }),
  );
  // An agent's or a loop's call of a custom tool without code here goes to the tool's queue; with
  // no live worker serving it there (as the catalog says) it fails at once.
  const remoteCalls = new RemoteToolCalls({
    queues: services.runQueues,
    connection,
    liveWorkers: (tool, queue) =>
      mcp.catalog
        .snapshot()
        .workers.filter((w) => w.queues.includes(queue) && w.tools.some((t) => t.name === tool)).length,
  });
  // Model calls are priced once per process from the same table, and booked per tenant and day.
  const cost = { prices: priceTableOf(env), ledger: services.costs, ceilings };

  let closing = false;
  // Aborted at the start of shutdown; every custom tool call in flight listens to it.
  const shutdown = new AbortController();
  setMaxListeners(0, shutdown.signal);
  const allowedTools = allowedToolsOf(env, tools);
  // One cache for the process: every pool, shard and Worker of it reads a run's plan once.
  const plans = new PlanCache(store);
  const executorDeps = (layer: Pool): ExecutorDeps => ({
    store,
    plans,
    queues: services.runQueues,
    ...settings,
    stopping: () => closing,
    shutdown: shutdown.signal,
    hooks,
    tools,
    allowedTools,
    servedQueues,
    toolOutputSchema: (tool, hash) => mcp.tools.outputSchemaOf(tool, hash),
    remoteCalls,
    secrets: services.secrets,
    callKey,
    ...(model ? { model } : {}),
    planning: {
      ...planningSettingsOf(env),
      ...(model ? { model } : {}),
      tools,
      allowedTools,
      ceilings,
      ...(services.memory ? { lessons: services.memory.book } : {}),
      cache: planCache,
      hooks: registry,
    },
    admission: { ceilings, slots },
    nodeSlots,
    cost,
    webhooks: services.outbox,
    ...(services.archive ? { archive: services.archive } : {}),
    sessions: {
      onRunSettled: (runId: string) => services.sessions.onRunSettled(runId),
      environmentVersion: async (sessionKey: string) =>
        (await services.sessionStore.environment(sessionKey)).version,
    },
    aborts,
    ...(services.memory
      ? {
          memory: services.memory.service,
          lessons: { ...lessonSettingsOf(env), book: services.memory.book, memory: services.memory.store },
        }
      : {}),
    logger: loggerFor(layer),
  });

  return {
    env,
    options,
    connection,
    state,
    queues,
    services,
    mcp,
    servedQueues,
    egress,
    flow,
    log,
    loggerFor,
    executorDeps,
    stop: () => {
      closing = true;
      shutdown.abort();
    },
    closing: () => closing,
    shutdown: shutdown.signal,
    async close() {
      await remoteCalls.close();
      await mcp.close();
      await services.sources.close();
      await closeQueues(queues);
      await aborts.close();
      await Promise.all([connection, state].map((c) => closeRedis(c)));
    },
  };
}
