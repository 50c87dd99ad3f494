/**
 * Starts the worker pools of one process: a BullMQ Worker per pool, on that loop's queue.
 * A process may run one pool (`tetraloop worker --pool tool`) or all of them (`tetraloop dev`).
 */
import { setTimeout as delay } from 'node:timers/promises';
import { UnrecoverableError, Worker, type Job, type Processor, type Queue } from 'bullmq';
import {
  BACKOFF_TYPE,
  DEFAULT_RETRIES,
  ruleSettingsOf,
  REFLECT_JOB,
  ModelClient,
  PlanCache,
  PlanCacheStore,
  TenantSlots,
  QUEUE_NAMES,
  metrics,
  RetryNodeError,
  RetryDeliveryError,
  WEBHOOK_BACKOFF_TYPE,
  egressClient,
  webhookDeliveryOf,
  RunAborts,
  SENSE_JOB,
  statusKindOf,
  allowedToolsOf,
  buildServices,
  ceilingsOf,
  priceTableOf,
  builtinTools,
  closeQueues,
  connectMcpServers,
  connectRedis,
  followMcpCatalog,
  createLogger,
  executeNodeJob,
  executePlanJob,
  settleAfterRootFailure,
  executeReflectJob,
  lifecycleOf,
  executeSenseJob,
  graphLimitsOf,
  loadCallKey,
  isModelConfigured,
  loadPlugins,
  McpCatalogStore,
  modelConfigOf,
  openQueues,
  shownQueues,
  QueueWatch,
  FlowGate,
  FlowStore,
  flowSettingsOf,
  parseAllowHosts,
  planCacheOptionsOf,
  reconcileQueuedRuns,
  secretStoreOptionsOf,
  type DestinationStream,
  type ExecutorDeps,
  type ExecutorHooks,
  type McpTools,
  type Pool,
  type RetryTable,
} from '@tetraloop/core';
import type { WorkerEnv } from './env.js';

export interface PoolsHandle {
  readonly pools: readonly Pool[];
  /** Each pool's BullMQ workers: one per shard of the run queues for `plan` and `tool`, else one. */
  readonly workers: ReadonlyMap<Pool, readonly Worker[]>;
  /** Redis reachable and every worker running. */
  readonly ready: () => Promise<boolean>;
  /** Flow control of the tool pool's calls (the limits this process has in force). */
  readonly flow: FlowGate;
  /** The process's tools: the built-in ones and its MCP servers', with their connections. */
  readonly mcp: McpTools;
  /**
   * Stops taking jobs, lets active ones finish for up to the shutdown grace
   * (TETRALOOP_SHUTDOWN_GRACE_MS), then closes anyway; closes connections.
   */
  readonly close: () => Promise<void>;
}

export interface StartPoolsOptions {
  readonly pools: readonly Pool[];
  /** Overrides the pool's configured concurrency. */
  readonly concurrency?: number;
  /** Functions the executors call at set points, e.g. to refresh credentials before an `auth` retry. */
  readonly hooks?: ExecutorHooks;
  /** Where the pools' logs go; stdout when absent. */
  readonly logDestination?: DestinationStream;
}

/** Slots per BullMQ Worker of the tool pool beyond which the pool's queue gets another Worker. */
const SLOTS_PER_FETCHER = 8;
/** At most this many Workers per tool queue in one process. */
const MAX_FETCHERS = 4;

/**
 * How many BullMQ Workers share one queue's slots in this process. A Worker fetches its jobs one
 * `moveToActive` round trip at a time, so the 32 nodes a fan-out releases at once would start one
 * round trip apart; each fetch leaves BullMQ's marker for the next, so several Workers on the
 * queue fetch side by side. Only the tool pool has such bursts; each Worker adds one blocking
 * connection and its own stalled-job check.
 */
const fetchersOf = (pool: Pool, slots: number): number =>
  pool === 'tool' ? Math.min(MAX_FETCHERS, Math.max(1, Math.ceil(slots / SLOTS_PER_FETCHER))) : 1;

const CONCURRENCY_KEY = {
  sense: 'TETRALOOP_SENSE_CONCURRENCY',
  plan: 'TETRALOOP_PLAN_CONCURRENCY',
  tool: 'TETRALOOP_TOOL_CONCURRENCY',
  reflect: 'TETRALOOP_REFLECT_CONCURRENCY',
} as const satisfies Record<Pool, keyof WorkerEnv>;

/** Periodic plan-loop job: compare session environments with what running plans have seen. */
const ENV_CHECK_JOB = 'env-check';
/** Periodic plan-loop job: enqueue accepted runs whose root job was never enqueued. */
const RECONCILE_JOB = 'reconcile';

export async function startPools(env: WorkerEnv, options: StartPoolsOptions): Promise<PoolsHandle> {
  const connection = connectRedis(env.REDIS_URL, 'worker', `tetraloop-worker-${process.pid}`);
  // Run and session state get a connection of their own: ioredis copies every script defined on a
  // connection into each pipeline it builds, so keeping Tetraloop's scripts off BullMQ's
  // connection keeps BullMQ's pipelines cheap.
  const state = connectRedis(env.REDIS_URL, 'worker', `tetraloop-worker-state-${process.pid}`, {
    autoPipeline: true,
  });
  const subscriber = connectRedis(env.REDIS_URL, 'subscriber', `tetraloop-worker-sub-${process.pid}`);
  const prefix = env.TETRALOOP_PREFIX;
  const loggerFor = (layer: Pool) =>
    createLogger({ level: env.LOG_LEVEL, layer, redact: env.TETRALOOP_LOG_REDACT }, options.logDestination);
  const log = loggerFor(options.pools[0] ?? 'tool');
  for (const c of [connection, state])
    c.on('error', (err: Error) => log.warn({ err: err.message }, 'redis connection error'));
  subscriber.on('error', (err: Error) => log.warn({ err: err.message }, 'redis subscriber error'));

  const queues = openQueues(connection, prefix, log, env.TETRALOOP_QUEUE_SHARDS);
  const egress = parseAllowHosts(env.TETRALOOP_HTTP_ALLOW_HOSTS, env.TETRALOOP_HTTP_MAX_BYTES);
  // Every MCP server's tools join the built-in ones. A process that runs the tool pool calls
  // tools: it connects to each server (a stdio server is its child process; one that cannot be
  // reached is retried in the background and never stops the process) and publishes the lists.
  // The other pools only validate and plan: they read the lists from Redis, as the API does.
  const mcpOptions = {
    servers: env.TETRALOOP_MCP_SERVERS,
    builtins: builtinTools({ egress }),
    store: new McpCatalogStore(state, prefix),
    logger: log.child({ component: 'mcp' }),
  };
  const mcp = options.pools.includes('tool')
    ? await connectMcpServers({
        ...mcpOptions,
        settings: {
          connectTimeoutMs: env.TETRALOOP_MCP_CONNECT_TIMEOUT_MS,
          reconnectMinMs: env.TETRALOOP_MCP_RECONNECT_MIN_MS,
          reconnectMaxMs: env.TETRALOOP_MCP_RECONNECT_MAX_MS,
        },
      })
    : await followMcpCatalog({ ...mcpOptions, subscriber });
  const tools = mcp.tools;
  const registry = options.hooks?.registry ?? (await loadPlugins(env.TETRALOOP_PLUGINS, process.env, log));
  // A plugin's refreshCredentials serves when the embedding program passes none.
  const refreshCredentials = options.hooks?.refreshCredentials ?? registry.credentialRefresh();
  const hooks = { ...options.hooks, registry, ...(refreshCredentials ? { refreshCredentials } : {}) };
  const retries = { ...DEFAULT_RETRIES, ...env.TETRALOOP_RETRIES } as RetryTable;
  const backoff = {
    baseMs: env.TETRALOOP_BACKOFF_BASE_MS,
    minMs: env.TETRALOOP_BACKOFF_MIN_MS,
    maxMs: env.TETRALOOP_BACKOFF_MAX_MS,
    jitter: env.TETRALOOP_BACKOFF_JITTER,
    retryAfterMaxMs: env.TETRALOOP_RETRY_AFTER_MAX_MS,
  };
  const modelConfig = modelConfigOf(env);
  const model = isModelConfigured(modelConfig) ? new ModelClient(modelConfig, backoff) : undefined;
  // The sense pool (and the plan pool, for merged collect runs) prepares session runs, whose
  // history compactions the model summarises.
  const services = buildServices(env, state, queues, tools, registry, log, {
    egress,
    ...(model ? { model } : {}),
  });
  const { store } = services;
  const aborts = await RunAborts.listen(subscriber, store.channels.abort);
  const polled = new Map(env.TETRALOOP_SOURCES.map((s) => [s.name, s]));
  // First plans of repeated tasks, shared by every plan worker through Redis.
  const planCache = new PlanCacheStore(state, planCacheOptionsOf(env));
  // Every worker of the deployment signs outbound Idempotency-Keys with the same key.
  const callKey = await loadCallKey(state, prefix, secretStoreOptionsOf(env).key);
  const ceilings = ceilingsOf(env);
  const slots = new TenantSlots(state, prefix);
  // Flow control of the tool pool's calls; its tick grants waiting calls and wakes their jobs.
  const flow = new FlowGate(
    new FlowStore(state, prefix),
    flowSettingsOf(env),
    // A member is a node job's id, `<runId>.<nodeId>[@generation]`; node ids hold no '.'.
    async (jobId) => (await services.runQueues.shardOf(jobId.slice(0, jobId.lastIndexOf('.')))).node,
    log.child({ layer: 'flow' }),
  );
  // Model calls are priced once per process from the same table, and booked per tenant and day.
  const cost = { prices: priceTableOf(env), ledger: services.costs, ceilings };

  // Set by close(): node jobs stop handing off, so the tool pool drains within its grace.
  let closing = false;
  // One set of executor dependencies per pool: each gets its own plan cache and logger layer.
  const depsFor = (layer: Pool): ExecutorDeps => ({
    store,
    plans: new PlanCache(store),
    queues: services.runQueues,
    retries,
    backoff,
    maxNodeExecutions: env.TETRALOOP_MAX_NODE_EXECUTIONS,
    handoff: env.TETRALOOP_NODE_HANDOFF,
    stopping: () => closing,
    hooks,
    tools,
    secrets: services.secrets,
    callKey,
    ...(model ? { model } : {}),
    defaultTimeoutMs: env.TETRALOOP_TOOL_TIMEOUT_MS,
    modelInputChars: env.TETRALOOP_MODEL_INPUT_CHARS,
    blobMinBytes: env.TETRALOOP_BLOB_MIN_BYTES,
    planning: {
      ...(model ? { model } : {}),
      tools,
      limits: graphLimitsOf(env),
      allowedTools: allowedToolsOf(env, tools),
      ceilings,
      workspaceDir: env.TETRALOOP_WORKSPACE_DIR,
      workspaceFileChars: env.TETRALOOP_WORKSPACE_FILE_CHARS,
      ...(services.memory ? { lessons: services.memory.book } : {}),
      cache: planCache,
      hooks: registry,
    },
    admission: { ceilings, slots },
    cost,
    webhooks: services.outbox,
    sessions: {
      onRunSettled: (runId: string) => services.sessions.onRunSettled(runId),
      environmentVersion: async (sessionKey: string) =>
        (await services.sessionStore.environment(sessionKey)).version,
    },
    aborts,
    ...(services.memory
      ? {
          memory: services.memory.service,
          lessons: {
            book: services.memory.book,
            memory: services.memory.store,
            probeIntervalMs: env.TETRALOOP_LESSON_PROBE_INTERVAL_MS,
            maxRetries: ruleSettingsOf(env).rateLimitRetries,
          },
        }
      : {}),
    logger: loggerFor(layer),
  });

  const processors: Record<Pool, () => Processor> = {
    plan: () => {
      const deps = depsFor('plan');
      const reconcile = {
        store,
        queues: services.runQueues,
        laneHolder: (sessionKey: string) => services.sessionStore.running(sessionKey),
      };
      return async (job: Job, token?: string) => {
        if (job.name === ENV_CHECK_JOB) return services.sessions.checkEnvironment();
        if (job.name === RECONCILE_JOB) {
          const report = await reconcileQueuedRuns(reconcile, { graceMs: env.TETRALOOP_RECONCILE_GRACE_MS });
          if (report.enqueue + report.retry > 0)
            deps.logger.warn(report, 'enqueued runs left without a root job');
          return report;
        }
        return executePlanJob(deps, job, token);
      };
    },
    tool: () => {
      const deps = { ...depsFor('tool'), flow };
      flow.start();
      return (job: Job, token?: string) => executeNodeJob(deps, job, token);
    },
    sense: () => {
      const deps = {
        sessions: services.sessions,
        sources: services.sources,
        polled,
        // Deliveries go through the egress policy the http tool and polled sources are held to.
        webhooks: {
          runs: store,
          webhooks: services.webhooks,
          egress: egressClient(egress),
          settings: webhookDeliveryOf(env, env.TETRALOOP_BACKOFF_JITTER),
          logger: loggerFor('sense'),
        },
      };
      return (job: Job) => executeSenseJob(deps, job);
    },
    reflect: () => {
      const memory = services.memory;
      // With the reflect loop off, its workers refuse anything they get.
      if (!memory) return unknownJob;
      const deps = {
        memory: memory.store,
        reflectQueue: queues.reflect,
        rules: ruleSettingsOf(env),
        lifecycle: lifecycleOf(env),
        logger: loggerFor('reflect'),
      };
      return (job: Job) => executeReflectJob(deps, job);
    },
  };

  // A root job that failed for good leaves its run to be settled here (see settleAfterRootFailure).
  const settleDeps = depsFor('plan');
  const settleAbandoned = async (job: Job): Promise<void> => {
    try {
      if ((await job.getState()) !== 'failed') return;
      const status = await settleAfterRootFailure(settleDeps, job);
      if (status !== null)
        settleDeps.logger.error({ jobId: job.id, status }, 'run settled after its root job failed for good');
    } catch (err) {
      settleDeps.logger.error({ jobId: job.id, err }, 'run of a failed root job not settled');
    }
  };

  // The plan and tool pools consume every shard of the run queues (or those of
  // TETRALOOP_WORKER_SHARDS), a Worker each, sharing the pool's concurrency among them (at least 1
  // each); the other pools have one queue.
  const assigned = env.TETRALOOP_WORKER_SHARDS;
  const runShards = queues.shards
    .map((s, shard) => ({ ...s, shard }))
    .filter(({ shard }) => assigned.length === 0 || assigned.includes(shard));
  const queuesOf = (pool: Pool): { queue: Queue; shard: number }[] => {
    switch (pool) {
      case 'plan':
        return runShards.map((s) => ({ queue: s.plan, shard: s.shard }));
      case 'tool':
        return runShards.map((s) => ({ queue: s.node, shard: s.shard }));
      case 'sense':
        return [{ queue: queues.sense, shard: 0 }];
      case 'reflect':
        return [{ queue: queues.reflect, shard: 0 }];
    }
  };
  if (options.pools.includes('plan') && assigned.length > 0 && !assigned.includes(0)) {
    loggerFor('plan').warn(
      { shards: assigned },
      'this plan pool does not consume shard 0, which holds the reconcile and env-check schedules: another plan worker must',
    );
  }
  const workers = new Map<Pool, Worker[]>();
  for (const pool of options.pools) {
    const targets = queuesOf(pool);
    const perQueue = Math.max(
      1,
      Math.ceil((options.concurrency ?? env[CONCURRENCY_KEY[pool]]) / targets.length),
    );
    const fetchers = fetchersOf(pool, perQueue);
    const concurrency = Math.ceil(perQueue / fetchers);
    const poolLog = loggerFor(pool);
    const poolWorkers = targets.flatMap(({ queue, shard }) =>
      Array.from({ length: fetchers }, () => {
        const worker = new Worker(QUEUE_NAMES[pool], processors[pool](), {
          connection,
          prefix: queue.opts.prefix!,
          concurrency,
          lockDuration: env.TETRALOOP_LOCK_DURATION_MS,
          stalledInterval: env.TETRALOOP_STALLED_INTERVAL_MS,
          maxStalledCount: env.TETRALOOP_MAX_STALLED_COUNT,
          // The node executor (and a webhook delivery) computes each retry's delay (class, jitter,
          // Retry-After) and hands it over here.
          settings: {
            backoffStrategy: (_attempts, type, err) =>
              type === BACKOFF_TYPE && err instanceof RetryNodeError
                ? err.delayMs
                : type === WEBHOOK_BACKOFF_TYPE && err instanceof RetryDeliveryError
                  ? err.delayMs
                  : 1000,
          },
        });
        worker.on('error', (err) => poolLog.error({ err, shard }, 'worker error'));
        // A job whose worker died (or missed its lock) goes back to run again elsewhere.
        worker.on('stalled', (jobId) => {
          metrics.jobsStalled.inc({ queue: QUEUE_NAMES[pool] });
          poolLog.warn({ jobId, shard }, 'job stalled: moved back to run again');
        });
        worker.on('failed', (job, err) => {
          if (!(err instanceof RetryNodeError) && !(err instanceof RetryDeliveryError))
            poolLog.warn({ jobId: job?.id, err, shard }, 'job failed');
          if (pool === 'plan' && job) void settleAbandoned(job);
        });
        return worker;
      }),
    );
    workers.set(pool, poolWorkers);
  }
  const allWorkers = [...workers.values()].flat();
  await Promise.all(allWorkers.map((w) => w.waitUntilReady()));

  // Periodic work, as BullMQ job schedulers: one schedule however many processes run the pool.
  const keepSchedules = { removeOnComplete: true, removeOnFail: { count: 100 } };
  if (options.pools.includes('sense')) {
    await queues.sense.upsertJobScheduler(
      'lane-sweep',
      { every: env.TETRALOOP_LANE_SWEEP_MS },
      { name: SENSE_JOB.laneSweep, opts: keepSchedules },
    );
    for (const source of polled.values()) {
      await services.sources.register(source.name, statusKindOf(source), source.tenant);
      await queues.sense.upsertJobScheduler(
        `poll:${source.name}`,
        { every: source.intervalMs },
        { name: SENSE_JOB.poll, data: { source: source.name }, opts: keepSchedules },
      );
    }
  }
  if (options.pools.includes('reflect') && services.memory) {
    await queues.reflect.upsertJobScheduler(
      'reflect-sweep',
      { every: env.TETRALOOP_REFLECT_INTERVAL_MS },
      { name: REFLECT_JOB.sweep, opts: keepSchedules },
    );
  }
  if (options.pools.includes('plan')) {
    await queues.plan.upsertJobScheduler(
      'env-check',
      { every: env.TETRALOOP_ENV_CHECK_MS },
      { name: ENV_CHECK_JOB, opts: keepSchedules },
    );
    await queues.plan.upsertJobScheduler(
      'reconcile',
      { every: env.TETRALOOP_RECONCILE_INTERVAL_MS },
      { name: RECONCILE_JOB, opts: keepSchedules },
    );
  }

  // Queue depths, the stall alarm and Redis's health come from where the work is too, so they stay
  // true (and autoscaling keeps seeing the backlog) while every API process is down.
  const watch = new QueueWatch(shownQueues(queues));
  const stopWatch = await watch.start(env.TETRALOOP_QUEUE_CHECK_MS, (err) =>
    log.debug({ err: err.message }, 'queue check failed'),
  );

  return {
    pools: options.pools,
    workers,
    flow,
    mcp,
    async ready() {
      if (closing || connection.status !== 'ready' || state.status !== 'ready') return false;
      await Promise.all([connection.ping(), state.ping()]);
      return allWorkers.every((w) => w.isRunning());
    },
    async close() {
      closing = true;
      stopWatch();
      flow.stop();
      // From the innermost loop outward, each pool with its grace: no outer loop stops while an
      // inner one still works for it.
      for (const pool of SHUTDOWN_ORDER) {
        const stage = workers.get(pool) ?? [];
        if (stage.length === 0) continue;
        if (!(await closeWithin(stage, env.TETRALOOP_SHUTDOWN_GRACE_MS))) {
          log.warn(
            { pool, graceMs: env.TETRALOOP_SHUTDOWN_GRACE_MS },
            'shutdown grace passed; closing with jobs still active',
          );
        }
      }
      // After the workers: active jobs may still be calling MCP tools.
      await mcp.close();
      await services.sources.close();
      await closeQueues(queues);
      await aborts.close();
      await Promise.all([connection, state].map((c) => c.quit().catch(() => c.disconnect())));
    },
  };
}

/**
 * The order pools stop taking work on shutdown: the innermost loop first (tool), then the loops
 * around it (plan, sense), the slowest (reflect) last.
 */
export const SHUTDOWN_ORDER: readonly Pool[] = ['tool', 'plan', 'sense', 'reflect'];

/**
 * Closes workers: they stop fetching and their active jobs get `graceMs` to finish, then they are
 * closed anyway (those jobs are recovered as after a crash). True when they finished in time.
 */
async function closeWithin(stage: readonly Worker[], graceMs: number): Promise<boolean> {
  const graceful = Promise.all(stage.map((w) => w.close()));
  // The grace timer is cancelled once the workers are closed, so it keeps no process alive.
  const grace = new AbortController();
  const inTime = await Promise.race([
    graceful.then(() => true),
    delay(graceMs, false, { signal: grace.signal }).catch(() => false),
  ]);
  grace.abort();
  if (!inTime) await Promise.all(stage.map((w) => w.close(true)));
  return inTime;
}

function unknownJob(job: Job): Promise<never> {
  return Promise.reject(new UnrecoverableError(`no handler for job "${job.name}" yet`));
}
