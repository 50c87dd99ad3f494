/**
 * The composition root every process shares: the services the API and the workers build the same
 * way from their configuration (runs, sessions and sources over one Redis connection and the loop
 * queues, the stores beside them, the ceilings in force) and the tools a process knows. What each
 * service is given from the settings is mapped in `config/env-schema.ts` (`runStoreOptionsOf`,
 * `sessionConfigOf`, `ceilingsOf`, …); what only the API or the workers build is theirs.
 */
import type { RedisClient } from './redis.js';
import { DirectoryArchive, RunArchiver } from '../archive/index.js';
import type { Logger } from 'pino';
import { metrics } from '../telemetry/metrics.js';
import {
  allowedToolsOf,
  ceilingsOf,
  costLedgerOptionsOf,
  eventStoreOptionsOf,
  memoryStoreOptionsOf,
  reflectTriggersOf,
  retentionOf,
  runSettingsOf,
  runStoreOptionsOf,
  secretStoreOptionsOf,
  sessionConfigOf,
  sessionStoreOptionsOf,
  sourceSettingsOf,
  webhookDeliveryOf,
  toolCatalogOptionsOf,
  triggerStoreOptionsOf,
  webhookStoreOptionsOf,
  type BaseEnv,
} from '../config/env-schema.js';
import type { Ceilings } from '../ceilings/ceilings.js';
import type { HookRegistry } from '../hooks/hook-registry.js';
import type { ConnectionSettings } from '../mcp/server-connection.js';
import type { ModelClient } from '../model/model-client.js';
import { setSchemaCacheMax } from '../model/json-schema.js';
import type { LoopQueues } from '../queues/loop-queues.js';
import { runQueuesOf, type RunQueues } from '../queues/run-jobs.js';
import { WebhookOutbox } from '../queues/webhook-jobs.js';
import { RunService } from '../runs/run-service.js';
import { modelSummarizer } from '../sessions/compaction.js';
import { SessionService } from '../sessions/session-service.js';
import { SourceService } from '../sessions/source-service.js';
import { CostLedger } from '../state/cost-ledger.js';
import { isCluster } from '../state/redis-client.js';
import { FlowStore } from '../state/flow-store.js';
import { McpCatalogStore } from '../state/mcp-catalog-store.js';
import { RunStore } from '../state/runs/run-store.js';
import { MemoryStore } from '../state/memory-store.js';
import { SecretStore } from '../state/secret-store.js';
import { SessionStore } from '../state/session-store.js';
import { WebhookStore } from '../state/webhook-store.js';
import { ScheduleStore } from '../state/schedule-store.js';
import { ScheduleService } from '../schedules/schedule-service.js';
import { EventStore } from '../state/event-store.js';
import { TriggerStore } from '../state/trigger-store.js';
import { EventIntake } from '../triggers/event-intake.js';
import { TriggerBook } from '../triggers/trigger-book.js';
import { TriggerFiring } from '../triggers/trigger-firing.js';
import { LessonBook } from '../reflect/lesson-book.js';
import { MemoryService } from '../reflect/memory-service.js';
import { builtinTools } from '../tools/builtins.js';
import type { EgressPolicy } from '../tools/egress-policy.js';
import type { ToolRegistry } from '../tools/tool.js';
import { cachedAgentFolders } from '../workspace/workspace.js';
import { ToolCatalogStore } from '../state/tool-catalog-store.js';
import { DEFAULT_TOOL_QUEUE, isCustomTool, type CustomTool } from '../tools/custom-tool.js';
import {
  followToolCatalog,
  serveCustomTools,
  type ToolCatalogFollower,
  type ToolServing,
} from './custom-tools.js';
import { connectMcpServers, followMcpCatalog, type McpTools } from './mcp-tools.js';

/** Memory and the lessons in effect; absent with `TETRALOOP_REFLECT=off`. */
export interface MemoryServices {
  readonly store: MemoryStore;
  readonly service: MemoryService;
  readonly book: LessonBook;
}

export interface Services {
  readonly store: RunStore;
  readonly sessionStore: SessionStore;
  readonly runs: RunService;
  readonly sessions: SessionService;
  readonly sources: SourceService;
  /** Each tenant's secrets (refuses to work without `TETRALOOP_SECRET_KEY`). */
  readonly secrets: SecretStore;
  /** Where a run's jobs go, with their retention. */
  readonly runQueues: RunQueues;
  /** What each tenant's model calls cost per day, per agent, session and model. */
  readonly costs: CostLedger;
  /** Each tenant's outbound webhooks: subscriptions, signing secrets, delivery attempts. */
  readonly webhooks: WebhookStore;
  /** Turns runs' events into delivery jobs on the `sense` queue. */
  readonly outbox: WebhookOutbox;
  /** The deployment's ceilings: agents, tenants, models, budgets, rates. */
  readonly ceilings: Ceilings;
  /** Flow control's counters and the limits set through the API. */
  readonly flow: FlowStore;
  /** Each tenant's schedules, and their firings (BullMQ job schedulers on the sense queue). */
  readonly schedules: ScheduleService;
  readonly memory?: MemoryServices;
  /** Writes settled runs and session transcripts to the archive; absent without `TETRALOOP_ARCHIVE_DIR`. */
  readonly archive?: RunArchiver;
  /** Each tenant's triggers. */
  readonly triggers: TriggerBook;
  /** Where events come in (the API), and where they start runs (the sense pool). */
  readonly events: EventIntake;
  readonly firing: TriggerFiring;
}

export interface ServiceOptions {
  /**
   * The model client of a process that prepares session runs (the workers): it writes the
   * summaries of session compactions. Without it they are truncations.
   */
  readonly model?: ModelClient;
  /** The egress policy polled sources are held to (the workers'); public addresses only without it. */
  readonly egress?: EgressPolicy;
}

export function buildServices(
  env: BaseEnv,
  redis: RedisClient,
  queues: LoopQueues,
  tools: ToolRegistry,
  hooks: HookRegistry | undefined,
  logger: Logger,
  options: ServiceOptions = {},
): Services {
  const prefix = env.TETRALOOP_PREFIX;
  // Callers' schemas are compiled in both the API (validation) and the workers (answers).
  setSchemaCacheMax(env.TETRALOOP_SCHEMA_CACHE_MAX);
  const store = new RunStore(redis, runStoreOptionsOf(env));
  // Which tuning a process runs with, beside what it does: a change can be traced to it.
  metrics.configInfo.reset();
  metrics.configInfo.set({ version: env.TETRALOOP_CONFIG_VERSION }, 1);
  // A node job of a custom tool is in its tool's queue: the ones the registry knows now.
  const runQueues = runQueuesOf(queues.shards, retentionOf(env), store, () => customToolQueues(tools));
  const sessionStore = new SessionStore(redis, prefix, sessionStoreOptionsOf(env));
  const webhooks = new WebhookStore(redis, webhookStoreOptionsOf(env));
  const outbox = new WebhookOutbox({
    queue: queues.sense,
    runs: store,
    webhooks,
    retention: runQueues.retention,
    delivery: webhookDeliveryOf(env),
  });
  const ceilings = ceilingsOf(env);
  const allowedTools = allowedToolsOf(env, tools);
  const archive =
    env.TETRALOOP_ARCHIVE_DIR === undefined
      ? undefined
      : new RunArchiver({
          archive: new DirectoryArchive(env.TETRALOOP_ARCHIVE_DIR, {
            onDamage: (damage) =>
              logger.warn({ archive: damage }, 'archive entry cannot be read: skipped, as if not archived'),
          }),
          store,
          logger,
        });
  const runs = new RunService({
    ...(archive ? { archive } : {}),
    ...runSettingsOf(env),
    store,
    webhooks,
    outbox,
    queues: runQueues,
    tools,
    allowedTools,
    ceilings,
    agentFolders: cachedAgentFolders(env.TETRALOOP_WORKSPACE_DIR),
    lanePosition: (sessionKey, runId) => sessionStore.position(sessionKey, runId),
    rootJobWithCreate: queues.connection === redis && !isCluster(redis),
  });
  const memory =
    env.TETRALOOP_REFLECT === 'on' ? memoryServices(env, redis, store, queues, logger) : undefined;
  const sessions = new SessionService({
    ...(memory ? { lessons: memory.book } : {}),
    allowedTools,
    ...(archive ? { archive } : {}),
    redis,
    prefix,
    sessions: sessionStore,
    store,
    runs,
    queues: runQueues,
    senseQueue: queues.sense,
    hooks,
    ...(options.model ? { summarize: modelSummarizer(options.model) } : {}),
    logger,
    config: sessionConfigOf(env),
  });
  const sources = new SourceService({
    ...sourceSettingsOf(env),
    redis,
    prefix,
    sessions: sessionStore,
    sessionService: sessions,
    senseQueue: queues.sense,
    ...(options.egress ? { egress: options.egress } : {}),
    logger,
  });
  const secrets = new SecretStore(redis, secretStoreOptionsOf(env));
  const costs = new CostLedger(redis, costLedgerOptionsOf(env));
  const triggers = new TriggerBook(new TriggerStore(redis, triggerStoreOptionsOf(env)), runs);
  const eventStore = new EventStore(redis, eventStoreOptionsOf(env));
  const events = new EventIntake({
    events: eventStore,
    senseQueue: queues.sense,
    retention: runQueues.retention,
  });
  const firing = new TriggerFiring({
    triggers,
    events: eventStore,
    runs,
    senseQueue: queues.sense,
    retention: runQueues.retention,
    logger,
  });
  return {
    triggers,
    events,
    firing,
    store,
    sessionStore,
    runs,
    sessions,
    sources,
    secrets,
    runQueues,
    costs,
    webhooks,
    outbox,
    ceilings,
    flow: new FlowStore(redis, prefix),
    schedules: new ScheduleService({
      schedules: new ScheduleStore(redis, prefix, env.TETRALOOP_SCHEDULES_MAX),
      runs,
      store,
      senseQueue: queues.sense,
      logger,
    }),
    ...(memory ? { memory } : {}),
    ...(archive ? { archive } : {}),
  };
}

function memoryServices(
  env: BaseEnv,
  redis: RedisClient,
  store: RunStore,
  queues: LoopQueues,
  logger: Logger,
): MemoryServices {
  const memory = new MemoryStore(redis, memoryStoreOptionsOf(env));
  const service = new MemoryService({
    store,
    memory,
    reflectQueue: queues.reflect,
    triggers: reflectTriggersOf(env),
    logger,
  });
  return { store: memory, service, book: new LessonBook(memory, env.TETRALOOP_LESSON_REFRESH_MS) };
}

/** The queues of the custom tools in `tools`, other than the shared node queue. */
export function customToolQueues(tools: ToolRegistry): string[] {
  const queues = new Set<string>();
  for (const tool of tools.values())
    if (isCustomTool(tool) && tool.custom.queue !== DEFAULT_TOOL_QUEUE) queues.add(tool.custom.queue);
  return [...queues];
}

export interface ToolsOptions {
  /** Its state connection (where the MCP servers' tool lists are kept) and its subscriber. */
  readonly redis: RedisClient;
  readonly subscriber: RedisClient;
  readonly logger: Logger;
  /** The egress policy the built-in http tool is held to. */
  readonly egress: EgressPolicy;
  /**
   * Connect to every MCP server (a process that calls tools: the workers with the tool pool) with
   * these settings; without them the process follows the lists published to Redis.
   */
  readonly connect?: ConnectionSettings;
  /**
   * The custom tools whose code this process loaded (a tool pool given tool modules) and the
   * queues it serves: those on its queues are published to the catalog, with a heartbeat, while
   * the process runs; all of them can run here.
   */
  readonly serve?: { readonly tools: readonly CustomTool[]; readonly queues: readonly string[] };
}

/** The tools of a process: MCP servers' and built-ins, and the custom tool catalog it follows. */
export interface ProcessTools extends McpTools {
  readonly catalog: ToolCatalogFollower;
  readonly catalogStore: ToolCatalogStore;
  /** What this process serves, when it serves custom tools. */
  readonly serving?: ToolServing;
}

/**
 * The tools a process knows: the built-in ones and every MCP server's. A process that calls tools
 * connects to each server (a stdio server is its child process; one that cannot be reached is
 * retried in the background and never stops the process) and publishes the lists; the others (the
 * API, the pools that only validate and plan) read the lists from Redis.
 */
export async function openTools(env: BaseEnv, options: ToolsOptions): Promise<ProcessTools> {
  const common = {
    servers: env.TETRALOOP_MCP_SERVERS,
    builtins: builtinTools({ egress: options.egress }),
    store: new McpCatalogStore(options.redis, env.TETRALOOP_PREFIX),
    logger: options.logger,
  };
  const mcp = options.connect
    ? await connectMcpServers({ ...common, settings: options.connect })
    : await followMcpCatalog({ ...common, subscriber: options.subscriber });
  const { heartbeatMs, ...storeOptions } = toolCatalogOptionsOf(env);
  const catalogStore = new ToolCatalogStore(options.redis, storeOptions);
  // Every tool whose code is loaded runs here (an agent's or a loop's call of it included); those
  // on the queues this process serves are published as served by it.
  const local = options.serve?.tools ?? [];
  const queues = options.serve?.queues ?? [];
  const published = local.filter((t) => queues.includes(t.custom.queue));
  mcp.tools.setCustomTools({ local, remote: [] });
  // Published before the catalog is first read: this process's tools are in its own first read.
  const serving =
    published.length > 0
      ? await serveCustomTools({
          store: catalogStore,
          tools: published,
          queues,
          heartbeatMs,
          logger: options.logger,
        })
      : undefined;
  const catalog = await followToolCatalog({
    registry: mcp.tools,
    store: catalogStore,
    subscriber: options.subscriber,
    refreshMs: heartbeatMs,
    logger: options.logger,
  });
  return {
    ...mcp,
    catalog,
    catalogStore,
    ...(serving ? { serving } : {}),
    async close() {
      catalog.close();
      await serving?.close();
      await mcp.close();
    },
  };
}
