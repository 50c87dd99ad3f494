/**
 * Pieces shared by the apps' env modules. Each app parses `process.env` once at boot with its own
 * schema; a bad value stops the process with a message naming the variable.
 */
import { redisUrlProblem } from './redis-url.js';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { envSchema, setting, type Settings } from './catalog.js';
import { DEFAULT_FLOW_SETTINGS, type FlowSettings } from '../executor/flow-gate.js';
import { LimitsDocument, parseLimitsSetting } from '../flow/limits.js';
import { AgentCeiling, AgentId, Ceilings, TenantCeiling } from '../ceilings/ceilings.js';
import { ModelPrices, PriceTable } from '../cost/price-table.js';
import { MAX_BUDGET_COST_USD } from '../domain/node-snapshot.js';
import {
  DEFAULT_APPROVAL_TIMEOUT_SECONDS,
  DEFAULT_BUDGET_DECISION_TIMEOUT_SECONDS,
  DEFAULT_MAX_WAIT_DAYS,
  MAX_RUN_SECONDS,
  MAX_WAIT_DAYS_CEILING,
  maxRunSeconds,
} from '../domain/wait-limits.js';
import { TenantId } from '../domain/tenant.js';
import {
  MAX_CYCLE_BUDGET_MS,
  MAX_PARALLEL_NODES,
  MAX_WINDOWS,
  MAX_WINDOW_SIZE,
} from '../runs/run-request.js';
import { DEFAULT_LIFECYCLE, EVIDENCE_KEPT, type LifecycleSettings } from '../memory/lesson-lifecycle.js';
import { DEFAULT_RULE_SETTINGS, type RuleSettings } from '../memory/lesson-rules.js';
import { isModelConfigured, type ModelConfig } from '../model/model-config.js';
import type { PlanCacheOptions } from '../state/plan-cache-store.js';
import { SECRET_KEY_FORMAT, parseSecretKey } from '../secrets/secret-cipher.js';
import { McpServers } from '../mcp/server-config.js';
import { PolledSources } from '../sessions/source-service.js';
import type { SecretStoreOptions } from '../state/secret-store.js';
import type { WebhookStoreOptions } from '../state/webhook-store.js';
import { DEFAULT_WEBHOOK_DELIVERY, type WebhookDeliverySettings } from '../webhooks/delivery-rules.js';
import { DEFAULT_SUBSCRIPTION_CACHE } from '../webhooks/subscription-cache.js';
import { RETRY_FLOOR_MS } from '../policy/retry-policy.js';
import type { ToolRegistry } from '../tools/tool.js';
import type { GraphLimits } from '../graph/limits.js';
import type { PlanningDeps } from '../planning/plan-run.js';
import type { JobRetention } from '../queues/retention.js';
import { DEFAULT_TRIGGERS, type ReflectTriggers } from '../reflect/memory-service.js';
import type { RunServiceDeps } from '../runs/run-service.js';
import { SESSION_AGENT, type SessionConfig } from '../sessions/session-service.js';
import type { SourceDeps } from '../sessions/source-service.js';
import type { CostLedgerOptions } from '../state/cost-ledger.js';
import type { EventStoreOptions } from '../state/event-store.js';
import type { TriggerStoreOptions } from '../state/trigger-store.js';
import type { MemoryStoreOptions } from '../state/memory-store.js';
import type { RunStoreOptions } from '../state/runs/run-store.js';
import type { SessionStoreOptions } from '../state/session-store.js';
import type { SkillLimits } from '../workspace/skills.js';

export const LogLevel = z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

/** A variable holding JSON, parsed and then checked by `schema`; `fallback` when unset. */
export function jsonEnv<S extends z.ZodType>(schema: S, fallback: string) {
  return z
    .string()
    .default(fallback)
    .transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: 'custom', message: 'must be JSON' });
        return z.NEVER;
      }
    })
    .pipe(schema);
}

/** How long a custom tool stays known after its last worker stopped, unless set. */
const TOOL_CATALOG_TTL_DEFAULT = '24h';

/** A duration in seconds, or with a unit (`s`, `m`, `h`, `d`), parsed to milliseconds. */
const durationEnv = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((v, ctx) => {
      const m = /^\s*(\d+)\s*(s|m|h|d)?\s*$/.exec(v);
      if (!m) {
        ctx.addIssue({ code: 'custom', message: 'must be seconds, or a number with s, m, h or d (24h)' });
        return z.NEVER;
      }
      const unit = { s: 1, m: 60, h: 3600, d: 86_400 }[(m[2] ?? 's') as 's' | 'm' | 'h' | 'd'];
      return Number(m[1]) * unit * 1000;
    })
    .refine((ms) => ms >= 60_000 && ms <= 90 * 86_400_000, 'must be from 1 minute to 90 days');

/** A comma-separated list. */
export const listEnv = () =>
  z
    .string()
    .default('')
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    );

/** What TETRALOOP_SHUTDOWN_GRACE_MS is when unset: an API closes its streams sooner than a worker its jobs. */
export const SHUTDOWN_GRACE_DEFAULT_MS = { api: 10_000, workers: 30_000 } as const;

/** Settings every process reads (the API and the workers). */
export const BASE_SETTINGS = {
  TETRALOOP_CONFIG_VERSION: setting({
    group: 'process',
    file: 'version',
    readBy: ['api', 'workers'],
    doc: "The configuration's version tag: every run document records it (`configVersion`) and `/metrics` exposes it (`tetraloop_config_info{version}`), so a change in behaviour can be traced to a tuning change. Unset: `unversioned`.",
    schema: z.string().trim().min(1).max(100).default('unversioned'),
  }),
  TETRALOOP_SHUTDOWN_GRACE_MS: setting({
    group: 'process',
    file: 'shutdownGraceMs',
    readBy: ['api', 'workers'],
    defaultText: '10000 (api), 30000 (workers)',
    doc: 'On SIGTERM: how long open requests and event streams (api) or in-flight jobs (workers) get to finish before the process closes anyway.',
    schema: z.coerce.number().int().min(0).optional(),
  }),
  REDIS_URL: setting({
    group: 'redis',
    file: 'redis.url',
    readBy: ['api', 'workers'],
    secret: true,
    doc: 'One Redis (`redis://`, `rediss://`), or a Redis Cluster by some of its nodes: `redis+cluster://[user:password@]host:port,host:port` (`rediss+cluster://` for TLS).',
    schema: z.string().superRefine((url, ctx) => {
      const problem = redisUrlProblem(url);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
  }),
  TETRALOOP_PREFIX: setting({
    group: 'redis',
    file: 'redis.prefix',
    readBy: ['api', 'workers'],
    doc: 'Prefix of every Redis key and queue: letters, digits, `_ - { }`, up to 64 (no `{ }` on a Redis Cluster). Every process of a deployment uses the same.',
    schema: z
      .string()
      .regex(/^[A-Za-z0-9_{}-]{1,64}$/, 'letters, digits, _ - { } only')
      .default('tetraloop'),
  }),
  TETRALOOP_QUEUE_SHARDS: setting({
    group: 'redis',
    file: 'redis.queueShards',
    readBy: ['api', 'workers'],
    doc: 'How many shards the run queues (`plan` and `tool`) are split into, each its own BullMQ queues under its own hash tag (see `queues/queue-shards.ts`); on a Redis Cluster, at least its number of masters spreads the queues over all of them. Every process of a deployment must use the same value: changing it is a migration (docs/operations.md#redis-cluster).',
    schema: z.coerce.number().int().min(1).max(64).default(1),
  }),
  LOG_LEVEL: setting({
    group: 'logs',
    file: 'log.level',
    readBy: ['api', 'workers'],
    doc: 'How much the processes log: `fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent` (JSON lines, pino).',
    schema: LogLevel.default('info'),
  }),
  TETRALOOP_LOG_REDACT: setting({
    group: 'logs',
    file: 'log.redact',
    readBy: ['api', 'workers'],
    form: 'list',
    doc: 'Extra field names to redact in logs, wherever they appear and in any case (comma-separated; a path such as `*.customerCard` counts as its last name), beside the built-in credentials.',
    schema: listEnv(),
  }),
  TETRALOOP_SECRET_KEY: setting({
    group: 'secrets',
    file: 'secrets.key',
    readBy: ['api', 'workers'],
    secret: true,
    doc: 'The key secrets are encrypted under (AES-256-GCM): 32 bytes, as base64 or as 64 hex digits. Unset: the secret routes answer 409 and a run that uses a `{"$secret"}` fails its node; `tetraloop dev` alone makes one of its own instead (`<TETRALOOP_DATA_DIR>/secret-key`).',
    schema: z
      .string()
      .optional()
      .transform((v) => (v === '' ? undefined : v))
      .refine((v) => v === undefined || parseSecretKey(v) !== undefined, `must be ${SECRET_KEY_FORMAT}`),
  }),
  TETRALOOP_SECRET_MAX_BYTES: setting({
    group: 'secrets',
    file: 'secrets.maxBytes',
    readBy: ['api', 'workers'],
    doc: 'Largest secret value, in UTF-8 bytes.',
    schema: z.coerce.number().int().min(1).max(1_048_576).default(8192),
  }),
  TETRALOOP_SECRET_MAX_COUNT: setting({
    group: 'secrets',
    file: 'secrets.maxCount',
    readBy: ['api', 'workers'],
    doc: 'Most secrets one tenant may hold.',
    schema: z.coerce.number().int().min(1).max(100_000).default(500),
  }),
  TETRALOOP_TRIGGERS_MAX: setting({
    group: 'events and triggers',
    file: 'triggers.maxPerTenant',
    readBy: ['api', 'workers'],
    doc: 'Most triggers one tenant may hold (`POST /v1/triggers` answers `409 too_many_triggers` beyond).',
    schema: z.coerce.number().int().min(1).max(10_000).default(100),
  }),
  TETRALOOP_EVENTS_DEDUPE_SECONDS: setting({
    group: 'events and triggers',
    file: 'triggers.eventsDedupeSeconds',
    readBy: ['api', 'workers'],
    doc: 'How long an event (and its id) is kept: an id sent again within it is a duplicate and starts nothing.',
    schema: z.coerce
      .number()
      .int()
      .min(60)
      .max(7 * 86_400)
      .default(86_400),
  }),
  TETRALOOP_EVENT_PAYLOAD_MAX_BYTES: setting({
    group: 'events and triggers',
    file: 'triggers.eventPayloadMaxBytes',
    readBy: ['api', 'workers'],
    doc: "Largest event `payload`, as JSON in UTF-8 bytes (a batch's run holds up to `maxSize` of them).",
    schema: z.coerce.number().int().min(1).max(1_048_576).default(65_536),
  }),
  TETRALOOP_TRIGGER_BATCH_PENDING_MAX: setting({
    group: 'events and triggers',
    file: 'triggers.batchPendingMax',
    readBy: ['api', 'workers'],
    doc: 'Most events one batch of a trigger holds waiting; more are dropped for that trigger (counted, logged).',
    schema: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
  }),
  TETRALOOP_WEBHOOK_SUBSCRIPTIONS_MAX: setting({
    group: 'outbound webhooks',
    file: 'outboundWebhooks.maxPerTenant',
    readBy: ['api', 'workers'],
    doc: 'Most outbound webhook subscriptions one tenant may hold (`POST /v1/webhooks`).',
    schema: z.coerce.number().int().min(1).max(1000).default(20),
  }),
  TETRALOOP_WEBHOOK_CACHE_TTL_MS: setting({
    group: 'outbound webhooks',
    file: 'outboundWebhooks.cacheTtlMs',
    readBy: ['api', 'workers'],
    doc: "How long a process uses its copy of a tenant's subscriptions before it reads them again. A change is published and drops every copy at once: this bounds only a change a process missed while its subscriber reconnected. 0: no copy (each run's announcement reads them from Redis).",
    schema: z.coerce.number().int().min(0).max(3_600_000).default(DEFAULT_SUBSCRIPTION_CACHE.ttlMs),
  }),
  TETRALOOP_WEBHOOK_CACHE_MAX_TENANTS: setting({
    group: 'outbound webhooks',
    file: 'outboundWebhooks.cacheMaxTenants',
    readBy: ['api', 'workers'],
    doc: 'Most tenants whose subscriptions a process keeps a copy of; the least recently read go first.',
    schema: z.coerce.number().int().min(1).max(1_000_000).default(DEFAULT_SUBSCRIPTION_CACHE.maxTenants),
  }),
  TETRALOOP_SCHEDULES_MAX: setting({
    group: 'schedules',
    file: 'schedules.maxPerTenant',
    readBy: ['api', 'workers'],
    doc: 'Most schedules one tenant may hold (`POST /v1/schedules`).',
    schema: z.coerce.number().int().min(1).max(10_000).default(100),
  }),
  TETRALOOP_WEBHOOK_ATTEMPTS: setting({
    group: 'outbound webhooks',
    file: 'outboundWebhooks.attempts',
    readBy: ['api', 'workers'],
    doc: 'Attempts of one outbound webhook delivery, the first included (set when it is enqueued).',
    schema: z.coerce.number().int().min(1).max(50).default(DEFAULT_WEBHOOK_DELIVERY.attempts),
  }),
  TETRALOOP_WEBHOOK_TIMEOUT_MS: setting({
    group: 'outbound webhooks',
    file: 'outboundWebhooks.timeoutMs',
    readBy: ['api', 'workers'],
    doc: 'Time a receiver has to answer a delivery (its headers, and between body chunks).',
    schema: z.coerce.number().int().min(100).max(60_000).default(DEFAULT_WEBHOOK_DELIVERY.timeoutMs),
  }),
  TETRALOOP_WEBHOOK_BACKOFF_BASE_MS: setting({
    group: 'outbound webhooks',
    file: 'outboundWebhooks.backoffBaseMs',
    readBy: ['api', 'workers'],
    doc: "Delay before a delivery's first retry; each further one doubles it (± TETRALOOP_BACKOFF_JITTER).",
    schema: z.coerce
      .number()
      .int()
      .min(RETRY_FLOOR_MS)
      .max(3_600_000)
      .default(DEFAULT_WEBHOOK_DELIVERY.backoff.baseMs),
  }),
  TETRALOOP_WEBHOOK_BACKOFF_MAX_MS: setting({
    group: 'outbound webhooks',
    file: 'outboundWebhooks.backoffMaxMs',
    readBy: ['api', 'workers'],
    doc: 'Longest delay between two attempts of a delivery.',
    schema: z.coerce
      .number()
      .int()
      .min(RETRY_FLOOR_MS)
      .max(86_400_000)
      .default(DEFAULT_WEBHOOK_DELIVERY.backoff.maxMs),
  }),
  TETRALOOP_WEBHOOK_DELIVERIES_KEPT: setting({
    group: 'outbound webhooks',
    file: 'outboundWebhooks.deliveriesKept',
    readBy: ['api', 'workers'],
    doc: 'Delivery attempts kept per subscription and per run.',
    schema: z.coerce.number().int().min(1).max(10_000).default(100),
  }),
  TETRALOOP_WEBHOOK_DELIVERIES_TTL_SECONDS: setting({
    group: 'outbound webhooks',
    file: 'outboundWebhooks.deliveriesTtlSeconds',
    readBy: ['api', 'workers'],
    doc: 'How long a list of delivery attempts outlives its last attempt.',
    schema: z.coerce
      .number()
      .int()
      .min(60)
      .default(7 * 24 * 3600),
  }),
  TETRALOOP_RUN_RETENTION_SECONDS: setting({
    group: 'runs',
    file: 'runs.retentionSeconds',
    readBy: ['api', 'workers'],
    doc: 'Retention of settled run records.',
    schema: z.coerce
      .number()
      .int()
      .positive()
      .default(7 * 24 * 3600),
  }),
  TETRALOOP_ARCHIVE_DIR: setting({
    group: 'runs',
    file: 'runs.archiveDir',
    readBy: ['api', 'workers', 'client'],
    pools: ['plan', 'tool', 'sense'],
    doc: 'The archive: a directory where settled runs (document, node snapshots, events) and session transcripts are appended as gzip JSON Lines, one file per kind per UTC day (`runs-2026-12-02.jsonl.gz`), so they outlive `TETRALOOP_RUN_RETENTION_SECONDS`. The plan and sense pools write it, the tool pool a session transcript when the job of the last node of a run settles it (the API too, for a run cancelled before it started), the API serves an expired run from it (`GET /v1/runs/:id`), `tetraloop archive export` reads it; every process that does must see the same directory. Unset: no archive, and nothing is written or read.',
    schema: z
      .string()
      .optional()
      .transform((v) => (v === '' ? undefined : v)),
  }),
  TETRALOOP_MAX_WAIT_DAYS: setting({
    group: 'runs',
    file: 'runs.maxWaitDays',
    readBy: ['api', 'workers'],
    doc: 'How long a run may last, its waits included (a wait for a signal, an approval, a budget decision or a time holds no worker): the largest `timeoutSeconds` a run request may ask for (more is refused with `400` at `timeoutSeconds`) and the longest wait a wait node may state. A running run keeps its record until its deadline plus `TETRALOOP_RUN_RETENTION_SECONDS`.',
    schema: z.coerce.number().int().min(1).max(MAX_WAIT_DAYS_CEILING).default(DEFAULT_MAX_WAIT_DAYS),
  }),
  TETRALOOP_APPROVAL_TIMEOUT_SECONDS: setting({
    group: 'runs',
    file: 'runs.approvalTimeoutSeconds',
    readBy: ['workers'],
    pools: ['tool'],
    doc: "How long a tool call held for approval (`requireApproval` from a `before_tool_call` hook) waits for its signal before the call fails `timeout`; the wait holds no worker. Never past the run's deadline, and at most `TETRALOOP_MAX_WAIT_DAYS` (a longer value is cut to it).",
    schema: z.coerce.number().int().positive().max(MAX_RUN_SECONDS).default(DEFAULT_APPROVAL_TIMEOUT_SECONDS),
  }),
  TETRALOOP_BUDGET_DECISION_TIMEOUT_SECONDS: setting({
    group: 'runs',
    file: 'runs.budgetDecisionTimeoutSeconds',
    readBy: ['workers'],
    pools: ['tool'],
    doc: 'How long a model call paused at its run\'s money budget (`onBudget: "pause"`) waits for a budget decision before the node fails `budget_exhausted`; the wait holds no worker. Never past the run\'s deadline, and at most `TETRALOOP_MAX_WAIT_DAYS` (a longer value is cut to it).',
    schema: z.coerce
      .number()
      .int()
      .positive()
      .max(MAX_RUN_SECONDS)
      .default(DEFAULT_BUDGET_DECISION_TIMEOUT_SECONDS),
  }),
  TETRALOOP_RUN_EVENTS_MAX: setting({
    group: 'runs',
    file: 'runs.eventsMax',
    readBy: ['api', 'workers'],
    doc: "Events kept in a run's event stream: past it the oldest are trimmed (`XTRIM MAXLEN ~` at every 64th event), and a client resuming before them is told by an `events.truncated` event.",
    schema: z.coerce.number().int().min(100).max(10_000_000).default(10_000),
  }),
  TETRALOOP_JOB_COMPLETED_AGE_SECONDS: setting({
    group: 'jobs',
    file: 'jobs.completedAgeSeconds',
    readBy: ['api', 'workers'],
    doc: 'Completed root, plan and sense jobs are removed from BullMQ after this age.',
    schema: z.coerce.number().int().positive().default(3600),
  }),
  TETRALOOP_JOB_COMPLETED_COUNT: setting({
    group: 'jobs',
    file: 'jobs.completedCount',
    readBy: ['api', 'workers'],
    doc: 'at most this many completed jobs are kept per queue',
    schema: z.coerce.number().int().positive().default(10_000),
  }),
  TETRALOOP_JOB_FAILED_AGE_SECONDS: setting({
    group: 'jobs',
    file: 'jobs.failedAgeSeconds',
    readBy: ['api', 'workers'],
    doc: 'Failed BullMQ jobs (root jobs, webhook deliveries, remote tool calls, trigger firings and events) are removed after this age. A failed *node* job is removed at once: kept, a node added again would wedge its root job (docs/execution-model.md#crash-recovery).',
    schema: z.coerce.number().int().positive().default(86_400),
  }),
  TETRALOOP_NODE_JOBS_KEEP_COMPLETED: setting({
    group: 'jobs',
    file: 'jobs.nodeJobsKeepCompleted',
    readBy: ['api', 'workers'],
    doc: "Completed *node* jobs kept in the node (`tool`) queue: 0 removes each when it completes (the cheapest: no completed set to add to and trim); N keeps the newest N, each at most `TETRALOOP_JOB_COMPLETED_AGE_SECONDS`. Root jobs keep `TETRALOOP_JOB_COMPLETED_COUNT`; a failed node job is removed at once. The run record holds every node's outcome.",
    schema: z.coerce.number().int().min(0).default(0),
  }),
  TETRALOOP_NODE_HANDOFF: setting({
    group: 'runs',
    file: 'runs.nodeHandoff',
    readBy: ['api', 'workers'],
    doc: "How many hops deep a node job may run released nodes itself after its own node, in the same worker slot, instead of adding a job for each (node handoff; see docs/execution-model.md): a chain goes back through the queue every N nodes. 0 gives every node a job of its own, a new run's first nodes too.",
    schema: z.coerce.number().int().min(0).max(1000).default(32),
  }),
  TETRALOOP_NODE_HANDOFF_WIDTH: setting({
    group: 'runs',
    file: 'runs.nodeHandoffWidth',
    readBy: ['api', 'workers'],
    doc: "How many nodes one node job may run at once when a completion releases several (wide handoff): the released nodes it takes run side by side in its worker slot, the rest get jobs. Also how many of a new run's first ready nodes one carrier job starts together. 1 runs them one at a time (a chain) and gives every first node a job. A run with `maxParallelNodes` always takes one.",
    schema: z.coerce.number().int().min(1).max(64).default(8),
  }),
  TETRALOOP_MAX_NODES: setting({
    group: 'runs',
    file: 'runs.maxNodes',
    readBy: ['api', 'workers'],
    doc: 'Graph limits (nested graphs expanded), for fixed and planned graphs alike.',
    schema: z.coerce.number().int().positive().default(500),
  }),
  TETRALOOP_MAX_EDGES: setting({
    group: 'runs',
    file: 'runs.maxEdges',
    readBy: ['api', 'workers'],
    doc: 'limits of fixed graphs (api) and planned graphs (plan pool)',
    schema: z.coerce.number().int().positive().default(5000),
  }),
  OPENAI_API_KEY: setting({
    group: 'models',
    file: 'model.apiKey',
    readBy: ['api', 'workers'],
    secret: true,
    doc: 'Model access: OpenAI with a key, or any OpenAI-compatible server by base URL.',
    schema: z.string().min(1).optional(),
  }),
  OPENAI_BASE_URL: setting({
    group: 'models',
    file: 'model.baseUrl',
    readBy: ['api', 'workers'],
    doc: 'the model server; set one of them to enable task runs and model nodes',
    schema: z.url().optional(),
  }),
  TETRALOOP_MODEL: setting({
    group: 'models',
    file: 'model.name',
    readBy: ['api', 'workers'],
    doc: 'model of `llm` nodes and agent loops; model that plans tasks',
    schema: z.string().min(1).default('gpt-4o-mini'),
  }),
  TETRALOOP_PLANNER_MODEL: setting({
    group: 'models',
    file: 'model.planner',
    readBy: ['api', 'workers'],
    doc: 'Planner model; the node model when unset.',
    schema: z.string().min(1).optional(),
  }),
  TETRALOOP_MODEL_TIMEOUT_MS: setting({
    group: 'models',
    file: 'model.timeoutMs',
    readBy: ['api', 'workers'],
    doc: 'model request timeout; in-process retries of a planner call',
    schema: z.coerce.number().int().positive().default(60_000),
  }),
  TETRALOOP_MODEL_MAX_RETRIES: setting({
    group: 'models',
    file: 'model.maxRetries',
    readBy: ['api', 'workers'],
    doc: 'model request timeout; in-process retries of a planner call',
    schema: z.coerce.number().int().min(0).max(10).default(2),
  }),
  TETRALOOP_THINKING_MODELS: setting({
    group: 'models',
    file: 'model.thinkingModels',
    readBy: ['api', 'workers'],
    form: 'list',
    doc: "The models a `thinking` effort is sent to (`reasoning_effort`), comma-separated: names, or prefixes ending in `*`. Unset: OpenAI's reasoning models (`o1*,o3*,o4*,gpt-5*`).",
    schema: z
      .string()
      .optional()
      .transform((v) =>
        v === undefined
          ? undefined
          : v
              .split(',')
              .map((s) => s.trim())
              .filter(Boolean),
      ),
  }),
  TETRALOOP_AGENT_TOOLS: setting({
    group: 'ceilings',
    file: 'agentTools',
    readBy: ['api', 'workers'],
    form: 'json',
    doc: 'Tools each agent may use, as JSON `{"agentId": ["http", "json"]}`; an agent not listed may use all. Kept beside TETRALOOP_AGENTS: it restricts tools but declares no agent.',
    schema: jsonEnv(z.record(z.string(), z.array(z.string())), '{}'),
  }),
  TETRALOOP_AGENTS: setting({
    group: 'ceilings',
    file: 'agents',
    readBy: ['api', 'workers'],
    form: 'json',
    doc: 'The declared agents, as JSON `{"agentId": {"tools": [...], "models": [...]}}` (each list optional). Once any agent is declared (here or by a workspace folder), runs of other agents are refused.',
    schema: jsonEnv(z.record(AgentId, AgentCeiling), '{}'),
  }),
  TETRALOOP_TENANTS: setting({
    group: 'ceilings',
    file: 'tenants',
    readBy: ['api', 'workers'],
    form: 'json',
    doc: 'Tenants\' restrictions, as JSON `{"tenant": {"agents", "models", "maxConcurrentRuns", "requestsPerMinute", "dailyCostUsd"}}` (each optional).',
    schema: jsonEnv(z.record(TenantId, TenantCeiling), '{}'),
  }),
  TETRALOOP_LIMITS: setting({
    group: 'flow control',
    file: 'limits',
    readBy: ['api', 'workers'],
    form: 'json',
    doc: 'Flow limits, `{"limits": [...]}` (or the list alone) as JSON, or the path of a JSON file (docs/flow-control.md). `PUT /v1/limits` replaces them while it is set.',
    schema: z
      .string()
      .default('')
      .transform((text, ctx) => {
        try {
          return parseLimitsSetting(text, (path) => readFileSync(path, 'utf8'));
        } catch (err) {
          ctx.addIssue({
            code: 'custom',
            message: `must be JSON or a readable JSON file: ${(err as Error).message}`,
          });
          return z.NEVER;
        }
      })
      .pipe(LimitsDocument),
  }),
  TETRALOOP_LIMITS_REFRESH_MS: setting({
    group: 'flow control',
    file: 'flow.refreshMs',
    readBy: ['api', 'workers'],
    doc: 'How often worker processes look for limits set through the API.',
    schema: z.coerce.number().int().min(100).default(DEFAULT_FLOW_SETTINGS.refreshMs),
  }),
  TETRALOOP_FLOW_TICK_MS: setting({
    group: 'flow control',
    file: 'flow.tickMs',
    readBy: ['api', 'workers'],
    doc: "How often waiting calls are granted when a rate's interval moves on or a pause ends.",
    schema: z.coerce.number().int().min(10).max(10_000).default(DEFAULT_FLOW_SETTINGS.tickMs),
  }),
  TETRALOOP_FLOW_RECHECK_MS: setting({
    group: 'flow control',
    file: 'flow.recheckMs',
    readBy: ['api', 'workers'],
    doc: 'The longest a held-back node job sleeps before it asks again (it is woken when granted).',
    schema: z.coerce.number().int().min(100).default(DEFAULT_FLOW_SETTINGS.recheckMs),
  }),
  TETRALOOP_FLOW_COMPLETION_TOKENS: setting({
    group: 'flow control',
    file: 'flow.completionTokens',
    readBy: ['api', 'workers'],
    doc: 'Completion tokens a model call reserves against a `tokens` rate besides its prompt.',
    schema: z.coerce.number().int().min(0).default(DEFAULT_FLOW_SETTINGS.completionTokens),
  }),
  TETRALOOP_MODELS_ALLOW: setting({
    group: 'ceilings',
    file: 'ceilings.modelsAllow',
    readBy: ['api', 'workers'],
    form: 'list',
    doc: 'The models llm nodes and agents may name (comma-separated); empty: any.',
    schema: listEnv(),
  }),
  TETRALOOP_BUDGET_MAX_TOOL_CALLS: setting({
    group: 'ceilings',
    file: 'ceilings.budget.toolCalls',
    readBy: ['api', 'workers'],
    doc: 'The largest budget a run may ask for; a request asking more gets this. Unset: no ceiling.',
    schema: z.coerce.number().int().positive().optional(),
  }),
  TETRALOOP_BUDGET_MAX_TOOL_TIME_MS: setting({
    group: 'ceilings',
    file: 'ceilings.budget.toolTimeMs',
    readBy: ['api', 'workers'],
    doc: 'the largest budget a run gets; a request (or default) asking more is clamped to it, not refused',
    schema: z.coerce.number().int().positive().optional(),
  }),
  TETRALOOP_BUDGET_MAX_TOKENS: setting({
    group: 'ceilings',
    file: 'ceilings.budget.tokens',
    readBy: ['api', 'workers'],
    doc: 'the largest budget a run gets; a request (or default) asking more is clamped to it, not refused',
    schema: z.coerce.number().int().positive().optional(),
  }),
  TETRALOOP_BUDGET_MAX_COST_USD: setting({
    group: 'ceilings',
    file: 'ceilings.budget.costUsd',
    readBy: ['api', 'workers'],
    doc: 'The largest money budget (USD); also what a run without one gets, and the most a raise gives.',
    schema: z.coerce.number().positive().max(MAX_BUDGET_COST_USD).optional(),
  }),
  TETRALOOP_MAX_TIMEOUT_SECONDS: setting({
    group: 'ceilings',
    file: 'ceilings.maxTimeoutSeconds',
    readBy: ['api', 'workers'],
    doc: 'The longest deadline (`timeoutSeconds`) a run may ask for; longer ones are clamped to it.',
    schema: z.coerce.number().int().positive().max(MAX_RUN_SECONDS).optional(),
  }),
  TETRALOOP_TENANT_MAX_RUNNING: setting({
    group: 'ceilings',
    file: 'ceilings.tenantMaxRunning',
    readBy: ['api', 'workers'],
    doc: 'Runs of one tenant running at once (tenants without `maxConcurrentRuns`); unset: no cap.',
    schema: z.coerce.number().int().positive().optional(),
  }),
  TETRALOOP_RATE_LIMIT_PER_KEY: setting({
    group: 'ceilings',
    file: 'ceilings.ratePerKey',
    readBy: ['api', 'workers'],
    doc: 'Requests per minute per API key, and per tenant (without `requestsPerMinute`); unset: off.',
    schema: z.coerce.number().int().positive().optional(),
  }),
  TETRALOOP_RATE_LIMIT_PER_TENANT: setting({
    group: 'ceilings',
    file: 'ceilings.ratePerTenant',
    readBy: ['api', 'workers'],
    doc: "requests per minute per API key and per tenant (a tenant's `requestsPerMinute` wins) on `/v1`; past them `429` with `Retry-After`",
    schema: z.coerce.number().int().positive().optional(),
  }),
  TETRALOOP_BUDGET_TOOL_CALLS: setting({
    group: 'budgets',
    file: 'budget.toolCalls',
    readBy: ['api', 'workers'],
    doc: 'Default per-run budget: tool calls (each attempt and loop iteration counts).',
    schema: z.coerce.number().int().positive().default(1000),
  }),
  TETRALOOP_BUDGET_TOOL_TIME_MS: setting({
    group: 'budgets',
    file: 'budget.toolTimeMs',
    readBy: ['api', 'workers'],
    doc: 'Default per-run budget: summed tool time in ms.',
    schema: z.coerce.number().int().positive().default(600_000),
  }),
  TETRALOOP_BUDGET_TOKENS: setting({
    group: 'budgets',
    file: 'budget.tokens',
    readBy: ['api', 'workers'],
    doc: 'Default per-run budget: model tokens (prompt plus completion).',
    schema: z.coerce.number().int().positive().default(1_000_000),
  }),
  TETRALOOP_BUDGET_COST_USD: setting({
    group: 'budgets',
    file: 'budget.costUsd',
    readBy: ['api', 'workers'],
    doc: 'Default per-run budget: USD of model calls, priced by the price table. Unset: no limit.',
    schema: z.coerce.number().positive().max(MAX_BUDGET_COST_USD).optional(),
  }),
  TETRALOOP_MODEL_PRICES: setting({
    group: 'models',
    file: 'modelPrices',
    readBy: ['api', 'workers'],
    form: 'json',
    doc: 'Model prices, as JSON `{"model": {"input", "output", "cachedInput"?}}` in USD per million tokens, merged over the built-in list prices model by model (`null` removes one).',
    schema: jsonEnv(ModelPrices, '{}'),
  }),
  TETRALOOP_COST_LEDGER_DAYS: setting({
    group: 'budgets',
    file: 'budget.costLedgerDays',
    readBy: ['api', 'workers'],
    doc: "Days a tenant's daily cost totals are kept (UTC days, one hash each).",
    schema: z.coerce.number().int().min(2).max(3660).default(35),
  }),
  TETRALOOP_SESSION_MODE: setting({
    group: 'sessions',
    file: 'sessions.mode',
    readBy: ['api', 'workers'],
    doc: 'What a message to a busy session does unless it says: followup, collect, steer, interrupt.',
    schema: z.enum(['followup', 'collect', 'steer', 'interrupt']).default('collect'),
  }),
  TETRALOOP_COLLECT_DEBOUNCE_MS: setting({
    group: 'sessions',
    file: 'sessions.collectDebounceMs',
    readBy: ['api', 'workers'],
    pools: ['sense', 'plan', 'tool'],
    doc: "collect mode's quiet time, most waiting messages, and what a full buffer does (`summarize`, `old`, `new`)",
    schema: z.coerce.number().int().min(0).default(1000),
  }),
  TETRALOOP_COLLECT_CAP: setting({
    group: 'sessions',
    file: 'sessions.collectCap',
    readBy: ['api', 'workers'],
    doc: "collect mode's quiet time, most waiting messages, and what a full buffer does (`summarize`, `old`, `new`)",
    schema: z.coerce.number().int().min(1).default(20),
  }),
  TETRALOOP_COLLECT_DROP: setting({
    group: 'sessions',
    file: 'sessions.collectDrop',
    readBy: ['api', 'workers'],
    doc: "collect mode's quiet time, most waiting messages, and what a full buffer does (`summarize`, `old`, `new`)",
    schema: z.enum(['summarize', 'old', 'new']).default('summarize'),
  }),
  TETRALOOP_FOLLOWUP_CAP: setting({
    group: 'sessions',
    file: 'sessions.followupCap',
    readBy: ['api', 'workers'],
    doc: "Most runs waiting in one session's lane; a `followup` message past it is refused (`429 lane_full`).",
    schema: z.coerce.number().int().min(1).max(100_000).default(100),
  }),
  TETRALOOP_SESSION_RUN_MODE: setting({
    group: 'sessions',
    file: 'sessions.runMode',
    readBy: ['api', 'workers'],
    doc: 'How session runs work: the agent loop (conversational), a planned DAG, or planned in windows.',
    schema: z.enum(['loop', 'dag', 'window']).default('loop'),
  }),
  TETRALOOP_SESSION_COMPACT_TOKENS: setting({
    group: 'sessions',
    file: 'sessions.compactTokens',
    readBy: ['api', 'workers'],
    pools: ['sense'],
    doc: "Compact a session's history (fold its older turns into a summary) once what a run would see of it is estimated (characters / 4) past this many tokens.",
    schema: z.coerce.number().int().min(200).default(8000),
  }),
  TETRALOOP_SCHEMA_CACHE_MAX: setting({
    group: 'runs',
    file: 'runs.schemaCacheMax',
    readBy: ['api', 'workers'],
    doc: "Compiled JSON schemas (of `llm` nodes' answers) a process keeps, least recently used dropped.",
    schema: z.coerce.number().int().min(1).max(100_000).default(500),
  }),
  TETRALOOP_SESSION_IDLE_TTL_SECONDS: setting({
    group: 'sessions',
    file: 'sessions.idleTtlSeconds',
    readBy: ['api', 'workers'],
    doc: 'A session nobody writes to for this long expires, all its keys; every write restarts it.',
    schema: z.coerce
      .number()
      .int()
      .min(60)
      .default(30 * 86_400),
  }),
  TETRALOOP_TRANSCRIPT_MAX_LINES: setting({
    group: 'sessions',
    file: 'sessions.transcriptMaxLines',
    readBy: ['api', 'workers'],
    doc: 'Transcript lines kept per session; the oldest are dropped past it (their numbers stay).',
    schema: z.coerce.number().int().min(100).max(10_000_000).default(10_000),
  }),
  TETRALOOP_DEDUPE_WINDOW_SECONDS: setting({
    group: 'sessions',
    file: 'sessions.dedupeWindowSeconds',
    readBy: ['api', 'workers'],
    doc: 'how long event ids are remembered; window in which same-type events of a source merge (`0`: off)',
    schema: z.coerce.number().int().positive().default(600),
  }),
  TETRALOOP_MESSAGE_DEDUPE_MS: setting({
    group: 'sessions',
    file: 'sessions.messageDedupeMs',
    readBy: ['api', 'workers'],
    doc: 'A session message without an `eventId` sent again with the same content within this is taken once (0: off).',
    schema: z.coerce.number().int().min(0).max(60_000).default(2000),
  }),
  TETRALOOP_BURST_WINDOW_MS: setting({
    group: 'sources',
    file: 'sense.burstWindowMs',
    readBy: ['api', 'workers'],
    pools: ['sense'],
    doc: 'Same-type events of one source within this window merge into one; 0 turns merging off.',
    schema: z.coerce.number().int().min(0).default(500),
  }),
  TETRALOOP_SOURCES: setting({
    group: 'sources',
    file: 'sources',
    readBy: ['api', 'workers'],
    pools: ['sense'],
    form: 'json',
    doc: 'Sources run on a schedule, as JSON, each name once: HTTP polls `{"kind"?: "http", "name", "url", "intervalMs" (≥ 200), "timeoutMs"?, "sessionKey"?, "type"?}`, timers `{"kind": "timer", "name", "intervalMs" (≥ 1000), "sessionKey", "type"?, "payload"?}` and directories `{"kind": "file", "name", "dir" (absolute), "sessionKey", "intervalMs"?, "pattern"?, "maxFiles"?, "type"?}`.',
    schema: jsonEnv(PolledSources, '[]'),
  }),
  TETRALOOP_MCP_SERVERS: setting({
    group: 'mcp',
    file: 'mcpServers',
    readBy: ['api', 'workers'],
    form: 'json',
    secret: true,
    doc: 'MCP servers whose tools join the tool registry as `mcp.<server>.<tool>`, as JSON: `[{"name", "command", "args"?, "env"?}]` (stdio) or `[{"name", "url", "headers"?}]` (streamable HTTP). Workers connect to them; the API reads their tool lists from Redis.',
    schema: jsonEnv(McpServers, '[]'),
  }),
  TETRALOOP_TOOL_CATALOG_TTL: setting({
    group: 'custom tools',
    file: 'tools.catalogTtl',
    readBy: ['api', 'workers'],
    doc: 'How long a custom tool stays known after its last worker stopped: a graph naming it is accepted and its nodes wait in its queue until a worker serves it again. Seconds, or with a unit (`90m`, `24h`, `7d`).',
    // Documented as written: the schema gives milliseconds.
    defaultText: TOOL_CATALOG_TTL_DEFAULT,
    schema: durationEnv(TOOL_CATALOG_TTL_DEFAULT),
  }),
  TETRALOOP_TOOL_HEARTBEAT_MS: setting({
    group: 'custom tools',
    file: 'tools.heartbeatMs',
    readBy: ['api', 'workers'],
    doc: 'How often a worker serving custom tools writes them to the catalog again, and how often other processes read it; a worker silent for three of these is no longer live.',
    schema: z.coerce.number().int().min(200).max(600_000).default(10_000),
  }),
  TETRALOOP_ENV_CHECK_MS: setting({
    group: 'sessions',
    file: 'sessions.envCheckMs',
    readBy: ['api', 'workers'],
    pools: ['plan'],
    doc: 'How often the plan loop checks session environments for changes.',
    schema: z.coerce.number().int().min(100).default(1500),
  }),
  TETRALOOP_LANE_SWEEP_MS: setting({
    group: 'sessions',
    file: 'sessions.laneSweepMs',
    readBy: ['api', 'workers'],
    pools: ['plan'],
    doc: 'How often lanes a dead process left behind are moved on.',
    schema: z.coerce.number().int().min(100).default(2000),
  }),
  TETRALOOP_RECONCILE_INTERVAL_MS: setting({
    group: 'runs',
    file: 'runs.reconcileIntervalMs',
    readBy: ['api', 'workers'],
    pools: ['plan'],
    doc: 'How often the plan loop looks for accepted runs whose root job was never enqueued, and for running runs whose root job failed for good and that no process settled.',
    schema: z.coerce.number().int().min(100).default(15_000),
  }),
  TETRALOOP_RECONCILE_GRACE_MS: setting({
    group: 'runs',
    file: 'runs.reconcileGraceMs',
    readBy: ['api', 'workers'],
    pools: ['plan'],
    doc: 'A queued run without a root job is enqueued by the reconciler once it is this old.',
    schema: z.coerce.number().int().min(0).default(30_000),
  }),
  TETRALOOP_PLUGINS: setting({
    group: 'plugins and workspace',
    file: 'plugins',
    readBy: ['api', 'workers'],
    form: 'list',
    doc: 'Plugins to load: built-in names (`deny-http`) or module paths, comma-separated.',
    schema: listEnv(),
  }),
  TETRALOOP_WORKSPACE_DIR: setting({
    group: 'plugins and workspace',
    file: 'workspace.dir',
    readBy: ['api', 'workers'],
    doc: 'Directory holding one folder per agent with its workspace files (AGENTS.md, TOOLS.md…).',
    schema: z.string().default('.tetraloop/workspace'),
  }),
  TETRALOOP_WORKSPACE_FILE_CHARS: setting({
    group: 'plugins and workspace',
    file: 'workspace.fileChars',
    readBy: ['api', 'workers'],
    doc: 'Each workspace file is cut to this many characters (head and tail kept).',
    schema: z.coerce.number().int().positive().default(12_000),
  }),
  TETRALOOP_SKILLS_MAX: setting({
    group: 'plugins and workspace',
    file: 'workspace.skillsMax',
    readBy: ['api', 'workers'],
    doc: "Most skills (`skills/*.md` in an agent's workspace folder) an agent run's prompt holds, in file-name order; the rest are refused, each with a log line and an entry in the run's `skills.refused`.",
    schema: z.coerce.number().int().min(0).max(100).default(16),
  }),
  TETRALOOP_SKILL_CHARS: setting({
    group: 'plugins and workspace',
    file: 'workspace.skillChars',
    readBy: ['api', 'workers'],
    doc: 'Most characters of one skill file, front matter included; a larger skill is refused (not cut: half a skill misleads).',
    schema: z.coerce.number().int().min(100).max(100_000).default(8_000),
  }),
  TETRALOOP_PLAN_CACHE: setting({
    group: 'planning',
    file: 'planning.cache',
    readBy: ['api', 'workers'],
    pools: ['plan'],
    doc: 'The plan cache: `on` lets a repeated task (same agent, task, input shape, tool catalog, lessons version, planner model, prompt, overrides and workspace) reuse its first plan without asking the planner; `off` neither reads nor stores plans.',
    schema: z.enum(['on', 'off']).default('on'),
  }),
  TETRALOOP_PLAN_CACHE_TTL_SECONDS: setting({
    group: 'planning',
    file: 'planning.cacheTtlSeconds',
    readBy: ['api', 'workers'],
    pools: ['plan'],
    doc: 'How long a cached plan is kept.',
    schema: z.coerce.number().int().min(1).default(3600),
  }),
  TETRALOOP_PLAN_WINDOW: setting({
    group: 'planning',
    file: 'planning.window',
    readBy: ['api', 'workers'],
    doc: "Window mode: most nodes per window when the request sets no `window` (the seed's 3–5, with margin).",
    schema: z.coerce.number().int().min(1).max(MAX_WINDOW_SIZE).default(5),
  }),
  TETRALOOP_PLAN_MAX_WINDOWS: setting({
    group: 'planning',
    file: 'planning.maxWindows',
    readBy: ['api', 'workers'],
    doc: 'Window mode: most windows of a run when the request sets no `maxWindows`.',
    schema: z.coerce.number().int().min(1).max(MAX_WINDOWS).default(10),
  }),
  TETRALOOP_PLAN_CYCLE_BUDGET_MS: setting({
    group: 'planning',
    file: 'planning.cycleBudgetMs',
    readBy: ['api', 'workers'],
    doc: "Window mode: how long a window may run before the nodes it has not started go back to the planner, when the request sets no `cycleBudgetMs` (the seed's 15 s L3 cycle); 0: no budget.",
    schema: z.coerce.number().int().min(0).max(MAX_CYCLE_BUDGET_MS).default(15_000),
  }),
  TETRALOOP_MAX_PARALLEL_NODES: setting({
    group: 'planning',
    file: 'runs.maxParallelNodes',
    readBy: ['api', 'workers'],
    doc: "Most node jobs of one run that run at once when the request sets no `maxParallelNodes`; 0: no cap (the tool pools' concurrency and flow limits bound them).",
    schema: z.coerce.number().int().min(0).max(MAX_PARALLEL_NODES).default(0),
  }),
  TETRALOOP_REFLECT: setting({
    group: 'reflect',
    file: 'reflect.mode',
    readBy: ['api', 'workers'],
    doc: 'The reflect loop: `on` records settled runs, reflects and applies lessons; `off` does none of it.',
    schema: z.enum(['on', 'off']).default('on'),
  }),
  TETRALOOP_QUEUE_CHECK_MS: setting({
    group: 'jobs',
    file: 'jobs.queueCheckMs',
    readBy: ['api', 'workers'],
    doc: "How often queue depths, the stall alarm and Redis's health are checked (API and workers).",
    schema: z.coerce.number().int().min(100).default(5000),
  }),
  TETRALOOP_REFLECT_INTERVAL_MS: setting({
    group: 'reflect',
    file: 'reflect.intervalMs',
    readBy: ['api', 'workers'],
    pools: ['reflect'],
    doc: 'Reflect on every agent with new runs at least this often.',
    schema: z.coerce
      .number()
      .int()
      .min(1000)
      .default(30 * 60_000),
  }),
  TETRALOOP_REFLECT_EVERY_RUNS: setting({
    group: 'reflect',
    file: 'reflect.everyRuns',
    readBy: ['api', 'workers'],
    pools: ['plan', 'tool', 'reflect'],
    doc: 'Reflect on an agent after this many settled runs.',
    schema: z.coerce.number().int().min(1).default(50),
  }),
  TETRALOOP_REFLECT_LARGE_RUN_NODES: setting({
    group: 'reflect',
    file: 'reflect.largeRunNodes',
    readBy: ['api', 'workers'],
    pools: ['plan', 'tool'],
    doc: 'Reflect on an agent when one of its runs with at least this many nodes succeeds (a large task completed).',
    schema: z.coerce.number().int().min(1).default(DEFAULT_TRIGGERS.largeRunNodes),
  }),
  TETRALOOP_REFLECT_LARGE_RUN_SECONDS: setting({
    group: 'reflect',
    file: 'reflect.largeRunSeconds',
    readBy: ['api', 'workers'],
    pools: ['plan', 'tool'],
    doc: 'Reflect on an agent when one of its runs that lasted at least this long succeeds (a large task completed).',
    schema: z.coerce
      .number()
      .int()
      .min(1)
      .default(DEFAULT_TRIGGERS.largeRunMs / 1000),
  }),
  TETRALOOP_MEMORY_HOT_RUNS: setting({
    group: 'reflect',
    file: 'reflect.hotRuns',
    readBy: ['api', 'workers'],
    doc: 'Run summaries kept per agent (the hot set).',
    schema: z.coerce.number().int().min(10).max(10_000).default(200),
  }),
  TETRALOOP_MEMORY_IDLE_TTL_SECONDS: setting({
    group: 'reflect',
    file: 'reflect.memoryIdleTtlSeconds',
    readBy: ['api', 'workers'],
    doc: "An agent's memory (hot set, counters, lessons) nobody writes to for this long expires.",
    schema: z.coerce
      .number()
      .int()
      .min(60)
      .default(30 * 86_400),
  }),
  TETRALOOP_LESSON_MIN_CASES: setting({
    group: 'reflect',
    file: 'reflect.lessonMinCases',
    readBy: ['api', 'workers'],
    doc: 'Distinct supporting runs and confidence a lesson needs to take effect.',
    schema: z.coerce.number().int().min(1).default(3),
  }),
  TETRALOOP_LESSON_MIN_CONFIDENCE: setting({
    group: 'reflect',
    file: 'reflect.lessonMinConfidence',
    readBy: ['api', 'workers'],
    doc: 'The confidence a lesson needs (with `TETRALOOP_LESSON_MIN_CASES` supporting runs) to take effect.',
    schema: z.coerce.number().min(0).max(1).default(0.6),
  }),
  TETRALOOP_LESSON_PROBATION_RUNS: setting({
    group: 'reflect',
    file: 'reflect.lessonProbationRuns',
    readBy: ['api', 'workers'],
    doc: "A new lesson's probation: supporting runs that ended after it was proposed, found by a later reflection, before it takes effect (0: it takes effect at the reflection that proposes it). At most the 20 runs a lesson keeps as evidence.",
    schema: z.coerce.number().int().min(0).max(EVIDENCE_KEPT).default(DEFAULT_LIFECYCLE.probationRuns),
  }),
  TETRALOOP_LESSON_REFRESH_MS: setting({
    group: 'reflect',
    file: 'reflect.lessonRefreshMs',
    readBy: ['api', 'workers'],
    doc: 'How long a process uses the lessons it read before reading them again.',
    schema: z.coerce.number().int().min(0).default(1000),
  }),
  TETRALOOP_LESSON_PROBE_INTERVAL_MS: setting({
    group: 'reflect',
    file: 'reflect.lessonProbeIntervalMs',
    readBy: ['api', 'workers'],
    pools: ['tool'],
    doc: 'How often one call goes through to a service a hard lesson blocks, as a probe.',
    schema: z.coerce
      .number()
      .int()
      .min(100)
      .default(5 * 60_000),
  }),
  TETRALOOP_LESSON_RATE_LIMIT_RETRIES: setting({
    group: 'reflect',
    file: 'reflect.rateLimitRetries',
    readBy: ['api', 'workers'],
    doc: "Retries a rate-limited service's `rate_limited` failures get from its template lesson (never more than TETRALOOP_MAX_NODE_EXECUTIONS allows).",
    schema: z.coerce.number().int().min(0).max(20).default(4),
  }),
  TETRALOOP_LESSON_RATE_LIMIT_BACKOFF_MS: setting({
    group: 'reflect',
    file: 'reflect.rateLimitBackoffMs',
    readBy: ['api', 'workers'],
    doc: "The shortest delay between the retries a rate-limited service's template lesson gives (`TETRALOOP_LESSON_RATE_LIMIT_RETRIES`).",
    schema: z.coerce.number().int().min(RETRY_FLOOR_MS).max(600_000).default(5000),
  }),
} satisfies Settings;
export const BaseEnv = envSchema(BASE_SETTINGS);
export type BaseEnv = z.infer<typeof BaseEnv>;

/**
 * The tools `agentId` may use: the registered tools its lists in TETRALOOP_AGENTS and
 * TETRALOOP_AGENT_TOOLS allow (every registered tool when neither lists it). The registry is read
 * on each call: MCP servers' tools come and go. A tool the registry has without listing it (of an
 * MCP server whose tools are not known yet) is allowed too when the lists allow it.
 */
export function allowedToolsOf(
  env: BaseEnv,
  registry: ToolRegistry,
): (agentId: string) => ReadonlySet<string> {
  const ceilings = ceilingsOf(env);
  return (agentId) => ceilings.toolSetOf(agentId, registry);
}

/** The ceilings the env describes. */
export function flowSettingsOf(env: BaseEnv): FlowSettings {
  return {
    ...DEFAULT_FLOW_SETTINGS,
    configured: env.TETRALOOP_LIMITS,
    refreshMs: env.TETRALOOP_LIMITS_REFRESH_MS,
    tickMs: env.TETRALOOP_FLOW_TICK_MS,
    recheckMs: env.TETRALOOP_FLOW_RECHECK_MS,
    completionTokens: env.TETRALOOP_FLOW_COMPLETION_TOKENS,
  };
}

/** The custom tool catalog: how long a tool stays known, how often workers beat. */
export function toolCatalogOptionsOf(env: BaseEnv): {
  prefix: string;
  catalogTtlMs: number;
  workerTtlMs: number;
  heartbeatMs: number;
} {
  return {
    prefix: env.TETRALOOP_PREFIX,
    catalogTtlMs: env.TETRALOOP_TOOL_CATALOG_TTL,
    // Three missed beats: a worker stalled by one long GC pause is not taken for gone.
    workerTtlMs: env.TETRALOOP_TOOL_HEARTBEAT_MS * 3,
    heartbeatMs: env.TETRALOOP_TOOL_HEARTBEAT_MS,
  };
}

export function ceilingsOf(env: BaseEnv): Ceilings {
  return new Ceilings({
    agents: env.TETRALOOP_AGENTS,
    agentTools: env.TETRALOOP_AGENT_TOOLS,
    tenants: env.TETRALOOP_TENANTS,
    modelsAllow: env.TETRALOOP_MODELS_ALLOW,
    defaultModel: env.TETRALOOP_MODEL,
    plannerModel: env.TETRALOOP_PLANNER_MODEL ?? env.TETRALOOP_MODEL,
    budget: {
      ...(env.TETRALOOP_BUDGET_MAX_TOOL_CALLS ? { toolCalls: env.TETRALOOP_BUDGET_MAX_TOOL_CALLS } : {}),
      ...(env.TETRALOOP_BUDGET_MAX_TOOL_TIME_MS ? { toolTimeMs: env.TETRALOOP_BUDGET_MAX_TOOL_TIME_MS } : {}),
      ...(env.TETRALOOP_BUDGET_MAX_TOKENS ? { tokens: env.TETRALOOP_BUDGET_MAX_TOKENS } : {}),
      ...(env.TETRALOOP_BUDGET_MAX_COST_USD ? { costUsd: env.TETRALOOP_BUDGET_MAX_COST_USD } : {}),
      ...(env.TETRALOOP_MAX_TIMEOUT_SECONDS ? { timeoutSeconds: env.TETRALOOP_MAX_TIMEOUT_SECONDS } : {}),
    },
    ...(env.TETRALOOP_TENANT_MAX_RUNNING ? { maxRunning: env.TETRALOOP_TENANT_MAX_RUNNING } : {}),
    ...(env.TETRALOOP_RATE_LIMIT_PER_KEY ? { ratePerKey: env.TETRALOOP_RATE_LIMIT_PER_KEY } : {}),
    ...(env.TETRALOOP_RATE_LIMIT_PER_TENANT ? { ratePerTenant: env.TETRALOOP_RATE_LIMIT_PER_TENANT } : {}),
  });
}

/** The price table the env describes: the built-in list prices with TETRALOOP_MODEL_PRICES over them. */
export const priceTableOf = (env: BaseEnv): PriceTable => new PriceTable(env.TETRALOOP_MODEL_PRICES);

/** The model configuration the env describes. */
export function modelConfigOf(env: BaseEnv): ModelConfig {
  return {
    apiKey: env.OPENAI_API_KEY,
    baseUrl: env.OPENAI_BASE_URL,
    model: env.TETRALOOP_MODEL,
    plannerModel: env.TETRALOOP_PLANNER_MODEL ?? env.TETRALOOP_MODEL,
    timeoutMs: env.TETRALOOP_MODEL_TIMEOUT_MS,
    maxRetries: env.TETRALOOP_MODEL_MAX_RETRIES,
    ...(env.TETRALOOP_THINKING_MODELS ? { thinkingModels: env.TETRALOOP_THINKING_MODELS } : {}),
  };
}

export class ConfigError extends Error {
  constructor(error: z.ZodError) {
    super(
      'invalid configuration:\n' +
        error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`).join('\n'),
    );
    this.name = 'ConfigError';
  }
}

/** Parses `env` with `schema`, throwing a ConfigError that names each bad variable. */
export function parseEnv<S extends z.ZodType>(
  schema: S,
  env: Record<string, string | undefined>,
): z.infer<S> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) throw new ConfigError(parsed.error);
  return parsed.data;
}

/** The lifecycle of lessons as configured. */
export function lifecycleOf(env: BaseEnv): LifecycleSettings {
  return {
    ...DEFAULT_LIFECYCLE,
    minCases: env.TETRALOOP_LESSON_MIN_CASES,
    minConfidence: env.TETRALOOP_LESSON_MIN_CONFIDENCE,
    probationRuns: env.TETRALOOP_LESSON_PROBATION_RUNS,
  };
}

/** The reflect rules as configured (the workers' env: it holds the loop guard's limit). */
export function ruleSettingsOf(
  env: BaseEnv & { readonly TETRALOOP_MAX_NODE_EXECUTIONS: number },
): RuleSettings {
  return {
    ...DEFAULT_RULE_SETTINGS,
    // The loop guard stops a node executed more often, whatever its retries: a lesson stays under it.
    rateLimitRetries: Math.min(
      env.TETRALOOP_LESSON_RATE_LIMIT_RETRIES,
      env.TETRALOOP_MAX_NODE_EXECUTIONS - 1,
    ),
    rateLimitBackoffMs: env.TETRALOOP_LESSON_RATE_LIMIT_BACKOFF_MS,
  };
}

/** The plan cache as configured. */
export function planCacheOptionsOf(env: BaseEnv): PlanCacheOptions {
  return {
    prefix: env.TETRALOOP_PREFIX,
    enabled: env.TETRALOOP_PLAN_CACHE === 'on',
    ttlSeconds: env.TETRALOOP_PLAN_CACHE_TTL_SECONDS,
  };
}

/** The secret store as configured. */
export function secretStoreOptionsOf(env: BaseEnv): SecretStoreOptions {
  const key = env.TETRALOOP_SECRET_KEY === undefined ? undefined : parseSecretKey(env.TETRALOOP_SECRET_KEY);
  return {
    prefix: env.TETRALOOP_PREFIX,
    ...(key ? { key } : {}),
    maxValueBytes: env.TETRALOOP_SECRET_MAX_BYTES,
    maxCount: env.TETRALOOP_SECRET_MAX_COUNT,
  };
}

/** The webhook store as configured: subscriptions' cap and delivery lists' bounds. */
export function triggerStoreOptionsOf(env: BaseEnv): TriggerStoreOptions {
  return { prefix: env.TETRALOOP_PREFIX, maxPerTenant: env.TETRALOOP_TRIGGERS_MAX };
}

export function eventStoreOptionsOf(env: BaseEnv): EventStoreOptions {
  return {
    prefix: env.TETRALOOP_PREFIX,
    dedupeMs: env.TETRALOOP_EVENTS_DEDUPE_SECONDS * 1000,
    batchPendingMax: env.TETRALOOP_TRIGGER_BATCH_PENDING_MAX,
  };
}

export function webhookStoreOptionsOf(env: BaseEnv): WebhookStoreOptions {
  const { key } = secretStoreOptionsOf(env);
  return {
    prefix: env.TETRALOOP_PREFIX,
    ...(key ? { key } : {}),
    maxPerTenant: env.TETRALOOP_WEBHOOK_SUBSCRIPTIONS_MAX,
    deliveriesKept: env.TETRALOOP_WEBHOOK_DELIVERIES_KEPT,
    deliveriesTtlSeconds: env.TETRALOOP_WEBHOOK_DELIVERIES_TTL_SECONDS,
    cache: { ttlMs: env.TETRALOOP_WEBHOOK_CACHE_TTL_MS, maxTenants: env.TETRALOOP_WEBHOOK_CACHE_MAX_TENANTS },
  };
}

/**
 * How deliveries are attempted. The jitter is the deployment's (`TETRALOOP_BACKOFF_JITTER`, read by
 * the workers), the floor the smaller of the base and half a second.
 */
export function webhookDeliveryOf(
  env: BaseEnv,
  jitter = DEFAULT_WEBHOOK_DELIVERY.backoff.jitter,
): WebhookDeliverySettings {
  const baseMs = env.TETRALOOP_WEBHOOK_BACKOFF_BASE_MS;
  return {
    attempts: env.TETRALOOP_WEBHOOK_ATTEMPTS,
    timeoutMs: env.TETRALOOP_WEBHOOK_TIMEOUT_MS,
    backoff: {
      baseMs,
      minMs: Math.min(baseMs, 500),
      maxMs: Math.max(baseMs, env.TETRALOOP_WEBHOOK_BACKOFF_MAX_MS),
      jitter,
    },
  };
}

/** Job retention as configured: how long and how many finished jobs BullMQ keeps. */
export function retentionOf(env: BaseEnv): JobRetention {
  return {
    completedAgeSeconds: env.TETRALOOP_JOB_COMPLETED_AGE_SECONDS,
    completedCount: env.TETRALOOP_JOB_COMPLETED_COUNT,
    failedAgeSeconds: env.TETRALOOP_JOB_FAILED_AGE_SECONDS,
    nodeCompletedCount: env.TETRALOOP_NODE_JOBS_KEEP_COMPLETED,
  };
}

/** The bounds of a submitted or planned graph. */
export const graphLimitsOf = (env: BaseEnv): GraphLimits => ({
  maxNodes: env.TETRALOOP_MAX_NODES,
  maxEdges: env.TETRALOOP_MAX_EDGES,
});

/** The run store as configured: retention, the event stream's length, the version runs record. */
export function runStoreOptionsOf(env: BaseEnv): RunStoreOptions {
  return {
    prefix: env.TETRALOOP_PREFIX,
    retentionSeconds: env.TETRALOOP_RUN_RETENTION_SECONDS,
    maxRunSeconds: maxRunSeconds(env.TETRALOOP_MAX_WAIT_DAYS),
    eventsMax: env.TETRALOOP_RUN_EVENTS_MAX,
    configVersion: env.TETRALOOP_CONFIG_VERSION,
  };
}

/** What the run service takes from the configuration: graph bounds, a run's defaults, the model. */
export function runSettingsOf(
  env: BaseEnv,
): Pick<
  RunServiceDeps,
  'limits' | 'modelConfigured' | 'defaultBudget' | 'windowDefaults' | 'maxRunSeconds' | 'maxParallelNodes'
> {
  return {
    limits: graphLimitsOf(env),
    modelConfigured: isModelConfigured(modelConfigOf(env)),
    defaultBudget: {
      toolCalls: env.TETRALOOP_BUDGET_TOOL_CALLS,
      toolTimeMs: env.TETRALOOP_BUDGET_TOOL_TIME_MS,
      tokens: env.TETRALOOP_BUDGET_TOKENS,
      ...(env.TETRALOOP_BUDGET_COST_USD ? { costUsd: env.TETRALOOP_BUDGET_COST_USD } : {}),
    },
    windowDefaults: {
      size: env.TETRALOOP_PLAN_WINDOW,
      maxWindows: env.TETRALOOP_PLAN_MAX_WINDOWS,
      cycleBudgetMs: env.TETRALOOP_PLAN_CYCLE_BUDGET_MS,
    },
    ...(env.TETRALOOP_MAX_PARALLEL_NODES > 0 ? { maxParallelNodes: env.TETRALOOP_MAX_PARALLEL_NODES } : {}),
    maxRunSeconds: maxRunSeconds(env.TETRALOOP_MAX_WAIT_DAYS),
  };
}

/**
 * How long an approval and a budget decision may be waited for: as set, but never longer than a run
 * may last here (`TETRALOOP_MAX_WAIT_DAYS`), so a wait cannot be configured past every deadline.
 */
export function decisionTimeoutsOf(env: BaseEnv): {
  approvalTimeoutSeconds: number;
  budgetDecisionTimeoutSeconds: number;
} {
  const max = maxRunSeconds(env.TETRALOOP_MAX_WAIT_DAYS);
  return {
    approvalTimeoutSeconds: Math.min(env.TETRALOOP_APPROVAL_TIMEOUT_SECONDS, max),
    budgetDecisionTimeoutSeconds: Math.min(env.TETRALOOP_BUDGET_DECISION_TIMEOUT_SECONDS, max),
  };
}

/** What the planner takes from the configuration: graph bounds and the workspace. */
export function planningSettingsOf(
  env: BaseEnv,
): Pick<PlanningDeps, 'limits' | 'workspaceDir' | 'workspaceFileChars' | 'skillLimits'> {
  return {
    limits: graphLimitsOf(env),
    workspaceDir: env.TETRALOOP_WORKSPACE_DIR,
    workspaceFileChars: env.TETRALOOP_WORKSPACE_FILE_CHARS,
    skillLimits: skillLimitsOf(env),
  };
}

/** How many skills an agent run's prompt holds, and how large each may be. */
export function skillLimitsOf(env: BaseEnv): SkillLimits {
  return { maxSkills: env.TETRALOOP_SKILLS_MAX, maxChars: env.TETRALOOP_SKILL_CHARS };
}

/** Recent events kept in a session's environment. */
const ENVIRONMENT_CAP = 100;

/** The session store as configured: how long an idle session lives, how long its transcript grows. */
export function sessionStoreOptionsOf(env: BaseEnv): SessionStoreOptions {
  return {
    idleTtlSeconds: env.TETRALOOP_SESSION_IDLE_TTL_SECONDS,
    transcriptMaxLines: env.TETRALOOP_TRANSCRIPT_MAX_LINES,
  };
}

/** The session service as configured: lane modes, dedupe, compaction, the workspace. */
export function sessionConfigOf(env: BaseEnv): SessionConfig {
  return {
    defaultMode: env.TETRALOOP_SESSION_MODE,
    collectDebounceMs: env.TETRALOOP_COLLECT_DEBOUNCE_MS,
    collectCap: env.TETRALOOP_COLLECT_CAP,
    collectDrop: env.TETRALOOP_COLLECT_DROP,
    followupCap: env.TETRALOOP_FOLLOWUP_CAP,
    runMode: env.TETRALOOP_SESSION_RUN_MODE,
    environmentCap: ENVIRONMENT_CAP,
    dedupeWindowSeconds: env.TETRALOOP_DEDUPE_WINDOW_SECONDS,
    contentDedupeMs: env.TETRALOOP_MESSAGE_DEDUPE_MS,
    compactTokens: env.TETRALOOP_SESSION_COMPACT_TOKENS,
    compactLines: 1000,
    compactTimeoutMs: Math.min(30_000, env.TETRALOOP_MODEL_TIMEOUT_MS),
    workspaceDir: env.TETRALOOP_WORKSPACE_DIR,
    workspaceFileChars: env.TETRALOOP_WORKSPACE_FILE_CHARS,
    skillLimits: skillLimitsOf(env),
    agentId: SESSION_AGENT,
  };
}

/** The source service as configured: bursts, the environment's length, how long a status lasts. */
export function sourceSettingsOf(
  env: BaseEnv,
): Pick<SourceDeps, 'burstWindowMs' | 'environmentCap' | 'statusTtlSeconds'> {
  return {
    burstWindowMs: env.TETRALOOP_BURST_WINDOW_MS,
    environmentCap: ENVIRONMENT_CAP,
    statusTtlSeconds: env.TETRALOOP_SESSION_IDLE_TTL_SECONDS,
  };
}

/** The memory store as configured: each agent's hot set and how long idle memory lives. */
export function memoryStoreOptionsOf(env: BaseEnv): MemoryStoreOptions {
  return {
    prefix: env.TETRALOOP_PREFIX,
    hotRuns: env.TETRALOOP_MEMORY_HOT_RUNS,
    useBonus: 0.05,
    idleTtlSeconds: env.TETRALOOP_MEMORY_IDLE_TTL_SECONDS,
  };
}

/** When a recorded run asks for a reflection. */
export function reflectTriggersOf(env: BaseEnv): ReflectTriggers {
  return {
    ...DEFAULT_TRIGGERS,
    everyRuns: env.TETRALOOP_REFLECT_EVERY_RUNS,
    largeRunNodes: env.TETRALOOP_REFLECT_LARGE_RUN_NODES,
    largeRunMs: env.TETRALOOP_REFLECT_LARGE_RUN_SECONDS * 1000,
  };
}

/** The cost ledger as configured: how long a day's totals are kept. */
export function costLedgerOptionsOf(env: BaseEnv): CostLedgerOptions {
  return { prefix: env.TETRALOOP_PREFIX, days: env.TETRALOOP_COST_LEDGER_DAYS };
}
