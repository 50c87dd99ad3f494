/**
 * The services every process builds the same way from its configuration: runs, sessions and
 * sources over one Redis connection and the loop queues.
 */
import type { RedisClient } from './redis.js';
import type { Logger } from 'pino';
import { metrics } from '../telemetry/metrics.js';
import {
  allowedToolsOf,
  ceilingsOf,
  modelConfigOf,
  secretStoreOptionsOf,
  webhookDeliveryOf,
  webhookStoreOptionsOf,
  type BaseEnv,
} from '../config/env-schema.js';
import type { GraphLimits } from '../graph/limits.js';
import type { HookRegistry } from '../hooks/hook-registry.js';
import type { ModelClient } from '../model/model-client.js';
import { setSchemaCacheMax } from '../model/json-schema.js';
import { isModelConfigured } from '../model/model-config.js';
import type { LoopQueues } from '../queues/loop-queues.js';
import type { JobRetention } from '../queues/retention.js';
import { runQueuesOf, type RunQueues } from '../queues/run-jobs.js';
import { WebhookOutbox } from '../queues/webhook-jobs.js';
import { RunService } from '../runs/run-service.js';
import { modelSummarizer } from '../sessions/compaction.js';
import { SESSION_AGENT, SessionService } from '../sessions/session-service.js';
import { SourceService } from '../sessions/source-service.js';
import { CostLedger } from '../state/cost-ledger.js';
import { RunStore } from '../state/runs/run-store.js';
import { MemoryStore } from '../state/memory-store.js';
import { SecretStore } from '../state/secret-store.js';
import { SessionStore } from '../state/session-store.js';
import { WebhookStore } from '../state/webhook-store.js';
import { LessonBook } from '../reflect/lesson-book.js';
import { DEFAULT_TRIGGERS, MemoryService } from '../reflect/memory-service.js';
import type { EgressPolicy } from '../tools/egress-policy.js';
import type { ToolRegistry } from '../tools/tool.js';
import { cachedAgentFolders } from '../workspace/workspace.js';

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
  readonly memory?: MemoryServices;
}

export function retentionOf(env: BaseEnv): JobRetention {
  return {
    completedAgeSeconds: env.TETRALOOP_JOB_COMPLETED_AGE_SECONDS,
    completedCount: env.TETRALOOP_JOB_COMPLETED_COUNT,
    failedAgeSeconds: env.TETRALOOP_JOB_FAILED_AGE_SECONDS,
    nodeCompletedCount: env.TETRALOOP_NODE_JOBS_KEEP_COMPLETED,
  };
}

export const graphLimitsOf = (env: BaseEnv): GraphLimits => ({
  maxNodes: env.TETRALOOP_MAX_NODES,
  maxEdges: env.TETRALOOP_MAX_EDGES,
});

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
  const store = new RunStore(redis, {
    prefix,
    retentionSeconds: env.TETRALOOP_RUN_RETENTION_SECONDS,
    eventsMax: env.TETRALOOP_RUN_EVENTS_MAX,
    configVersion: env.TETRALOOP_CONFIG_VERSION,
  });
  // Which tuning a process runs with, beside what it does: a change can be traced to it.
  metrics.configInfo.reset();
  metrics.configInfo.set({ version: env.TETRALOOP_CONFIG_VERSION }, 1);
  const runQueues = runQueuesOf(queues.shards, retentionOf(env), store);
  const sessionStore = new SessionStore(redis, prefix, {
    idleTtlSeconds: env.TETRALOOP_SESSION_IDLE_TTL_SECONDS,
    transcriptMaxLines: env.TETRALOOP_TRANSCRIPT_MAX_LINES,
  });
  const webhooks = new WebhookStore(redis, webhookStoreOptionsOf(env));
  const outbox = new WebhookOutbox({
    queue: queues.sense,
    runs: store,
    webhooks,
    retention: runQueues.retention,
    delivery: webhookDeliveryOf(env),
  });
  const runs = new RunService({
    store,
    webhooks,
    outbox,
    queues: runQueues,
    tools,
    limits: graphLimitsOf(env),
    modelConfigured: isModelConfigured(modelConfigOf(env)),
    allowedTools: allowedToolsOf(env, tools),
    ceilings: ceilingsOf(env),
    agentFolders: cachedAgentFolders(env.TETRALOOP_WORKSPACE_DIR),
    defaultBudget: {
      toolCalls: env.TETRALOOP_BUDGET_TOOL_CALLS,
      toolTimeMs: env.TETRALOOP_BUDGET_TOOL_TIME_MS,
      tokens: env.TETRALOOP_BUDGET_TOKENS,
      ...(env.TETRALOOP_BUDGET_COST_USD ? { costUsd: env.TETRALOOP_BUDGET_COST_USD } : {}),
    },
    windowDefaults: { size: env.TETRALOOP_PLAN_WINDOW, maxWindows: env.TETRALOOP_PLAN_MAX_WINDOWS },
    lanePosition: (sessionKey, runId) => sessionStore.position(sessionKey, runId),
  });
  const memory =
    env.TETRALOOP_REFLECT === 'on' ? memoryServices(env, redis, store, queues, logger) : undefined;
  const sessions = new SessionService({
    ...(memory ? { lessons: memory.book } : {}),
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
    config: {
      defaultMode: env.TETRALOOP_SESSION_MODE,
      collectDebounceMs: env.TETRALOOP_COLLECT_DEBOUNCE_MS,
      collectCap: env.TETRALOOP_COLLECT_CAP,
      collectDrop: env.TETRALOOP_COLLECT_DROP,
      followupCap: env.TETRALOOP_FOLLOWUP_CAP,
      runMode: env.TETRALOOP_SESSION_RUN_MODE,
      environmentCap: 100,
      dedupeWindowSeconds: env.TETRALOOP_DEDUPE_WINDOW_SECONDS,
      contentDedupeMs: env.TETRALOOP_MESSAGE_DEDUPE_MS,
      compactTokens: env.TETRALOOP_SESSION_COMPACT_TOKENS,
      compactLines: 1000,
      compactTimeoutMs: Math.min(30_000, env.TETRALOOP_MODEL_TIMEOUT_MS),
      workspaceDir: env.TETRALOOP_WORKSPACE_DIR,
      workspaceFileChars: env.TETRALOOP_WORKSPACE_FILE_CHARS,
      agentId: SESSION_AGENT,
    },
  });
  const sources = new SourceService({
    redis,
    prefix,
    sessions: sessionStore,
    sessionService: sessions,
    senseQueue: queues.sense,
    burstWindowMs: env.TETRALOOP_BURST_WINDOW_MS,
    environmentCap: 100,
    ...(options.egress ? { egress: options.egress } : {}),
    statusTtlSeconds: env.TETRALOOP_SESSION_IDLE_TTL_SECONDS,
    logger,
  });
  const secrets = new SecretStore(redis, secretStoreOptionsOf(env));
  const costs = new CostLedger(redis, { prefix, days: env.TETRALOOP_COST_LEDGER_DAYS });
  return {
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
    ...(memory ? { memory } : {}),
  };
}

function memoryServices(
  env: BaseEnv,
  redis: RedisClient,
  store: RunStore,
  queues: LoopQueues,
  logger: Logger,
): MemoryServices {
  const memory = new MemoryStore(redis, {
    prefix: env.TETRALOOP_PREFIX,
    hotRuns: env.TETRALOOP_MEMORY_HOT_RUNS,
    useBonus: 0.05,
    idleTtlSeconds: env.TETRALOOP_MEMORY_IDLE_TTL_SECONDS,
  });
  const service = new MemoryService({
    store,
    memory,
    reflectQueue: queues.reflect,
    triggers: { ...DEFAULT_TRIGGERS, everyRuns: env.TETRALOOP_REFLECT_EVERY_RUNS },
    logger,
  });
  return { store: memory, service, book: new LessonBook(memory, env.TETRALOOP_LESSON_REFRESH_MS) };
}
