/**
 * Pieces shared by the apps' env modules. Each app parses `process.env` once at boot with its own
 * schema; a bad value stops the process with a message naming the variable.
 */
import { redisUrlProblem } from '../runtime/redis-url.js';
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { DEFAULT_FLOW_SETTINGS, type FlowSettings } from '../executor/flow-gate.js';
import { LimitsDocument, parseLimitsSetting } from '../flow/limits.js';
import { AgentCeiling, AgentId, Ceilings, TenantCeiling } from '../ceilings/ceilings.js';
import { ModelPrices, PriceTable } from '../cost/price-table.js';
import { MAX_BUDGET_COST_USD } from '../domain/node-snapshot.js';
import { TenantId } from '../domain/tenant.js';
import { MAX_WINDOWS, MAX_WINDOW_SIZE } from '../runs/run-request.js';
import { DEFAULT_LIFECYCLE, type LifecycleSettings } from '../memory/lesson-lifecycle.js';
import { DEFAULT_RULE_SETTINGS, type RuleSettings } from '../memory/lesson-rules.js';
import type { ModelConfig } from '../model/model-config.js';
import type { PlanCacheOptions } from '../state/plan-cache-store.js';
import { SECRET_KEY_FORMAT, parseSecretKey } from '../secrets/secret-cipher.js';
import { McpServers } from '../mcp/server-config.js';
import { PolledSources } from '../sessions/source-service.js';
import type { SecretStoreOptions } from '../state/secret-store.js';
import type { WebhookStoreOptions } from '../state/webhook-store.js';
import { DEFAULT_WEBHOOK_DELIVERY, type WebhookDeliverySettings } from '../webhooks/delivery-rules.js';
import type { ToolRegistry } from '../tools/tool.js';

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

/** A comma-separated list. */
const listEnv = () =>
  z
    .string()
    .default('')
    .transform((v) =>
      v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    );

/** Variables every process reads. */
export const BaseEnv = z.object({
  /**
   * One Redis (`redis://`, `rediss://`), or a Redis Cluster by some of its nodes:
   * `redis+cluster://[user:password@]host:port,host:port` (`rediss+cluster://` for TLS).
   */
  REDIS_URL: z.string().superRefine((url, ctx) => {
    const problem = redisUrlProblem(url);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  }),
  TETRALOOP_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_{}-]{1,64}$/, 'letters, digits, _ - { } only')
    .default('tetraloop'),
  /**
   * How many shards the run queues (`plan` and `tool`) are split into, each its own BullMQ queues
   * under its own hash tag (see `queues/queue-shards.ts`); on a Redis Cluster, at least its number
   * of masters spreads the queues over all of them. Every process of a deployment must use the
   * same value: changing it is a migration (docs/operations.md#redis-cluster).
   */
  TETRALOOP_QUEUE_SHARDS: z.coerce.number().int().min(1).max(64).default(1),
  LOG_LEVEL: LogLevel.default('info'),
  /**
   * Extra field names to redact in logs, wherever they appear and in any case (comma-separated;
   * a path such as `*.customerCard` counts as its last name), beside the built-in credentials.
   */
  TETRALOOP_LOG_REDACT: listEnv(),
  /**
   * The key secrets are encrypted under (AES-256-GCM): 32 bytes, as base64 or as 64 hex digits.
   * Unset: the secret routes answer 409 and a run that uses a `{"$secret"}` fails its node.
   */
  TETRALOOP_SECRET_KEY: z
    .string()
    .optional()
    .transform((v) => (v === '' ? undefined : v))
    .refine((v) => v === undefined || parseSecretKey(v) !== undefined, `must be ${SECRET_KEY_FORMAT}`),
  /** Largest secret value, in UTF-8 bytes. */
  TETRALOOP_SECRET_MAX_BYTES: z.coerce.number().int().min(1).max(1_048_576).default(8192),
  /** Most secrets one tenant may hold. */
  TETRALOOP_SECRET_MAX_COUNT: z.coerce.number().int().min(1).max(100_000).default(500),
  /** Most outbound webhook subscriptions one tenant may hold (`POST /v1/webhooks`). */
  TETRALOOP_WEBHOOK_SUBSCRIPTIONS_MAX: z.coerce.number().int().min(1).max(1000).default(20),
  /** Attempts of one outbound webhook delivery, the first included (set when it is enqueued). */
  TETRALOOP_WEBHOOK_ATTEMPTS: z.coerce
    .number()
    .int()
    .min(1)
    .max(50)
    .default(DEFAULT_WEBHOOK_DELIVERY.attempts),
  /** Time a receiver has to answer a delivery (its headers, and between body chunks). */
  TETRALOOP_WEBHOOK_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(60_000)
    .default(DEFAULT_WEBHOOK_DELIVERY.timeoutMs),
  /** Delay before a delivery's first retry; each further one doubles it (± TETRALOOP_BACKOFF_JITTER). */
  TETRALOOP_WEBHOOK_BACKOFF_BASE_MS: z.coerce
    .number()
    .int()
    .min(10)
    .max(3_600_000)
    .default(DEFAULT_WEBHOOK_DELIVERY.backoff.baseMs),
  /** Longest delay between two attempts of a delivery. */
  TETRALOOP_WEBHOOK_BACKOFF_MAX_MS: z.coerce
    .number()
    .int()
    .min(10)
    .max(86_400_000)
    .default(DEFAULT_WEBHOOK_DELIVERY.backoff.maxMs),
  /** Delivery attempts kept per subscription and per run. */
  TETRALOOP_WEBHOOK_DELIVERIES_KEPT: z.coerce.number().int().min(1).max(10_000).default(100),
  /** How long a list of delivery attempts outlives its last attempt. */
  TETRALOOP_WEBHOOK_DELIVERIES_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .default(7 * 24 * 3600),
  /** Retention of settled run records. */
  TETRALOOP_RUN_RETENTION_SECONDS: z.coerce
    .number()
    .int()
    .positive()
    .default(7 * 24 * 3600),
  /**
   * Events kept in a run's event stream (`XADD MAXLEN ~`): the oldest are trimmed past it, and a
   * client resuming before them is told by an `events.truncated` event.
   */
  TETRALOOP_RUN_EVENTS_MAX: z.coerce.number().int().min(100).max(10_000_000).default(10_000),
  TETRALOOP_JOB_COMPLETED_AGE_SECONDS: z.coerce.number().int().positive().default(3600),
  TETRALOOP_JOB_COMPLETED_COUNT: z.coerce.number().int().positive().default(10_000),
  TETRALOOP_JOB_FAILED_AGE_SECONDS: z.coerce.number().int().positive().default(86_400),
  /**
   * Completed *node* jobs kept in the node (`tool`) queue: 0 removes each when it completes (the
   * cheapest: no completed set to add to and trim); N keeps the newest N, each at most
   * `TETRALOOP_JOB_COMPLETED_AGE_SECONDS`. Root jobs keep `TETRALOOP_JOB_COMPLETED_COUNT`; failed
   * node jobs keep `TETRALOOP_JOB_FAILED_AGE_SECONDS`. The run record holds every node's outcome.
   */
  TETRALOOP_NODE_JOBS_KEEP_COMPLETED: z.coerce.number().int().min(0).default(0),
  /**
   * How many released nodes a node job may run itself after its own node, one at a time in the
   * same worker slot, instead of adding a job for each (node handoff; see docs/execution-model.md).
   * 0 gives every node a job of its own.
   */
  TETRALOOP_NODE_HANDOFF: z.coerce.number().int().min(0).max(1000).default(32),
  /** Graph limits (nested graphs expanded), for fixed and planned graphs alike. */
  TETRALOOP_MAX_NODES: z.coerce.number().int().positive().default(500),
  TETRALOOP_MAX_EDGES: z.coerce.number().int().positive().default(5000),
  /** Model access: OpenAI with a key, or any OpenAI-compatible server by base URL. */
  OPENAI_API_KEY: z.string().min(1).optional(),
  OPENAI_BASE_URL: z.url().optional(),
  TETRALOOP_MODEL: z.string().min(1).default('gpt-4o-mini'),
  /** Planner model; the node model when unset. */
  TETRALOOP_PLANNER_MODEL: z.string().min(1).optional(),
  TETRALOOP_MODEL_TIMEOUT_MS: z.coerce.number().int().positive().default(60_000),
  TETRALOOP_MODEL_MAX_RETRIES: z.coerce.number().int().min(0).max(10).default(2),
  /**
   * The models a `thinking` effort is sent to (`reasoning_effort`), comma-separated: names, or
   * prefixes ending in `*`. Unset: OpenAI's reasoning models (`o1*,o3*,o4*,gpt-5*`).
   */
  TETRALOOP_THINKING_MODELS: z
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
  /**
   * Tools each agent may use, as JSON `{"agentId": ["http", "json"]}`; an agent not listed may use
   * all. Kept beside TETRALOOP_AGENTS: it restricts tools but declares no agent.
   */
  TETRALOOP_AGENT_TOOLS: jsonEnv(z.record(z.string(), z.array(z.string())), '{}'),
  /**
   * The declared agents, as JSON `{"agentId": {"tools": [...], "models": [...]}}` (each list
   * optional). Once any agent is declared (here or by a workspace folder), runs of other agents
   * are refused.
   */
  TETRALOOP_AGENTS: jsonEnv(z.record(AgentId, AgentCeiling), '{}'),
  /**
   * Tenants' restrictions, as JSON `{"tenant": {"agents", "models", "maxConcurrentRuns",
   * "requestsPerMinute", "dailyCostUsd"}}` (each optional).
   */
  TETRALOOP_TENANTS: jsonEnv(z.record(TenantId, TenantCeiling), '{}'),
  /**
   * Flow limits, `{"limits": [...]}` (or the list alone) as JSON, or the path of a JSON file
   * (docs/flow-control.md). `PUT /v1/limits` replaces them while it is set.
   */
  TETRALOOP_LIMITS: z
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
  /** How often worker processes look for limits set through the API. */
  TETRALOOP_LIMITS_REFRESH_MS: z.coerce.number().int().min(100).default(DEFAULT_FLOW_SETTINGS.refreshMs),
  /** How often waiting calls are granted when a rate's interval moves on or a pause ends. */
  TETRALOOP_FLOW_TICK_MS: z.coerce.number().int().min(10).max(10_000).default(DEFAULT_FLOW_SETTINGS.tickMs),
  /** The longest a held-back node job sleeps before it asks again (it is woken when granted). */
  TETRALOOP_FLOW_RECHECK_MS: z.coerce.number().int().min(100).default(DEFAULT_FLOW_SETTINGS.recheckMs),
  /** Completion tokens a model call reserves against a `tokens` rate besides its prompt. */
  TETRALOOP_FLOW_COMPLETION_TOKENS: z.coerce
    .number()
    .int()
    .min(0)
    .default(DEFAULT_FLOW_SETTINGS.completionTokens),
  /** The models llm nodes and agents may name (comma-separated); empty: any. */
  TETRALOOP_MODELS_ALLOW: listEnv(),
  /** The largest budget a run may ask for; a request asking more gets this. Unset: no ceiling. */
  TETRALOOP_BUDGET_MAX_TOOL_CALLS: z.coerce.number().int().positive().optional(),
  TETRALOOP_BUDGET_MAX_TOOL_TIME_MS: z.coerce.number().int().positive().optional(),
  TETRALOOP_BUDGET_MAX_TOKENS: z.coerce.number().int().positive().optional(),
  /** The largest money budget (USD); also what a run without one gets, and the most a raise gives. */
  TETRALOOP_BUDGET_MAX_COST_USD: z.coerce.number().positive().max(MAX_BUDGET_COST_USD).optional(),
  /** The longest deadline (`timeoutSeconds`) a run may ask for; longer ones are clamped to it. */
  TETRALOOP_MAX_TIMEOUT_SECONDS: z.coerce.number().int().positive().max(86_400).optional(),
  /** Runs of one tenant running at once (tenants without `maxConcurrentRuns`); unset: no cap. */
  TETRALOOP_TENANT_MAX_RUNNING: z.coerce.number().int().positive().optional(),
  /** Requests per minute per API key, and per tenant (without `requestsPerMinute`); unset: off. */
  TETRALOOP_RATE_LIMIT_PER_KEY: z.coerce.number().int().positive().optional(),
  TETRALOOP_RATE_LIMIT_PER_TENANT: z.coerce.number().int().positive().optional(),
  /** Default per-run budget: tool calls (each attempt and loop iteration counts). */
  TETRALOOP_BUDGET_TOOL_CALLS: z.coerce.number().int().positive().default(1000),
  /** Default per-run budget: summed tool time in ms. */
  TETRALOOP_BUDGET_TOOL_TIME_MS: z.coerce.number().int().positive().default(600_000),
  /** Default per-run budget: model tokens (prompt plus completion). */
  TETRALOOP_BUDGET_TOKENS: z.coerce.number().int().positive().default(1_000_000),
  /** Default per-run budget: USD of model calls, priced by the price table. Unset: no limit. */
  TETRALOOP_BUDGET_COST_USD: z.coerce.number().positive().max(MAX_BUDGET_COST_USD).optional(),
  /**
   * Model prices, as JSON `{"model": {"input", "output", "cachedInput"?}}` in USD per million
   * tokens, merged over the built-in list prices model by model (`null` removes one).
   */
  TETRALOOP_MODEL_PRICES: jsonEnv(ModelPrices, '{}'),
  /** Days a tenant's daily cost totals are kept (UTC days, one hash each). */
  TETRALOOP_COST_LEDGER_DAYS: z.coerce.number().int().min(2).max(3660).default(35),
  /** What a message to a busy session does unless it says: followup, collect, steer, interrupt. */
  TETRALOOP_SESSION_MODE: z.enum(['followup', 'collect', 'steer', 'interrupt']).default('collect'),
  TETRALOOP_COLLECT_DEBOUNCE_MS: z.coerce.number().int().min(0).default(1000),
  TETRALOOP_COLLECT_CAP: z.coerce.number().int().min(1).default(20),
  TETRALOOP_COLLECT_DROP: z.enum(['summarize', 'old', 'new']).default('summarize'),
  /** Most runs waiting in one session's lane; a `followup` message past it is refused (`429 lane_full`). */
  TETRALOOP_FOLLOWUP_CAP: z.coerce.number().int().min(1).max(100_000).default(100),
  /** How session runs work: the agent loop (conversational), a planned DAG, or planned in windows. */
  TETRALOOP_SESSION_RUN_MODE: z.enum(['loop', 'dag', 'window']).default('loop'),
  /**
   * Compact a session's history (fold its older turns into a summary) once what a run would see of
   * it is estimated (characters / 4) past this many tokens.
   */
  TETRALOOP_SESSION_COMPACT_TOKENS: z.coerce.number().int().min(200).default(8000),
  /** Compiled JSON schemas (of `llm` nodes' answers) a process keeps, least recently used dropped. */
  TETRALOOP_SCHEMA_CACHE_MAX: z.coerce.number().int().min(1).max(100_000).default(500),
  /** A session nobody writes to for this long expires, all its keys; every write restarts it. */
  TETRALOOP_SESSION_IDLE_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .default(30 * 86_400),
  /** Transcript lines kept per session; the oldest are dropped past it (their numbers stay). */
  TETRALOOP_TRANSCRIPT_MAX_LINES: z.coerce.number().int().min(100).max(10_000_000).default(10_000),
  TETRALOOP_DEDUPE_WINDOW_SECONDS: z.coerce.number().int().positive().default(600),
  /** A session message without an `eventId` sent again with the same content within this is taken once (0: off). */
  TETRALOOP_MESSAGE_DEDUPE_MS: z.coerce.number().int().min(0).max(60_000).default(2000),
  /** Same-type events of one source within this window merge into one; 0 turns merging off. */
  TETRALOOP_BURST_WINDOW_MS: z.coerce.number().int().min(0).default(500),
  /**
   * Sources run on a schedule, as JSON, each name once: HTTP polls `{"kind"?: "http", "name", "url",
   * "intervalMs" (≥ 200), "timeoutMs"?, "sessionKey"?, "type"?}`, timers `{"kind": "timer", "name",
   * "intervalMs" (≥ 1000), "sessionKey", "type"?, "payload"?}` and directories `{"kind": "file",
   * "name", "dir" (absolute), "sessionKey", "intervalMs"?, "pattern"?, "maxFiles"?, "type"?}`.
   */
  TETRALOOP_SOURCES: jsonEnv(PolledSources, '[]'),
  /**
   * MCP servers whose tools join the tool registry as `mcp.<server>.<tool>`, as JSON:
   * `[{"name", "command", "args"?, "env"?}]` (stdio) or `[{"name", "url", "headers"?}]`
   * (streamable HTTP). Workers connect to them; the API reads their tool lists from Redis.
   */
  TETRALOOP_MCP_SERVERS: jsonEnv(McpServers, '[]'),
  /** How often the plan loop checks session environments for changes. */
  TETRALOOP_ENV_CHECK_MS: z.coerce.number().int().min(100).default(1500),
  /** How often lanes a dead process left behind are moved on. */
  TETRALOOP_LANE_SWEEP_MS: z.coerce.number().int().min(100).default(2000),
  /** How often the plan loop looks for accepted runs whose root job was never enqueued. */
  TETRALOOP_RECONCILE_INTERVAL_MS: z.coerce.number().int().min(100).default(15_000),
  /** A queued run without a root job is enqueued by the reconciler once it is this old. */
  TETRALOOP_RECONCILE_GRACE_MS: z.coerce.number().int().min(0).default(30_000),
  /** Plugins to load: built-in names (`deny-http`) or module paths, comma-separated. */
  TETRALOOP_PLUGINS: listEnv(),
  /** Directory holding one folder per agent with its workspace files (AGENTS.md, TOOLS.md…). */
  TETRALOOP_WORKSPACE_DIR: z.string().default('.tetraloop/workspace'),
  /** Each workspace file is cut to this many characters (head and tail kept). */
  TETRALOOP_WORKSPACE_FILE_CHARS: z.coerce.number().int().positive().default(12_000),
  /**
   * The plan cache: `on` lets a repeated task (same agent, task, input shape, tool catalog, lessons
   * version, planner model, prompt, overrides and workspace) reuse its first plan without asking
   * the planner; `off` neither reads nor stores plans.
   */
  TETRALOOP_PLAN_CACHE: z.enum(['on', 'off']).default('on'),
  /** How long a cached plan is kept. */
  TETRALOOP_PLAN_CACHE_TTL_SECONDS: z.coerce.number().int().min(1).default(3600),
  /** Window mode: most nodes per window when the request sets no `window` (the seed's 3–5, with margin). */
  TETRALOOP_PLAN_WINDOW: z.coerce.number().int().min(1).max(MAX_WINDOW_SIZE).default(5),
  /** Window mode: most windows of a run when the request sets no `maxWindows`. */
  TETRALOOP_PLAN_MAX_WINDOWS: z.coerce.number().int().min(1).max(MAX_WINDOWS).default(10),
  /** The reflect loop: `on` records settled runs, reflects and applies lessons; `off` does none of it. */
  TETRALOOP_REFLECT: z.enum(['on', 'off']).default('on'),
  /** How often queue depths, the stall alarm and Redis's health are checked (API and workers). */
  TETRALOOP_QUEUE_CHECK_MS: z.coerce.number().int().min(100).default(5000),
  /** Reflect on every agent with new runs at least this often. */
  TETRALOOP_REFLECT_INTERVAL_MS: z.coerce
    .number()
    .int()
    .min(1000)
    .default(30 * 60_000),
  /** Reflect on an agent after this many settled runs. */
  TETRALOOP_REFLECT_EVERY_RUNS: z.coerce.number().int().min(1).default(50),
  /** Run summaries kept per agent (the hot set). */
  TETRALOOP_MEMORY_HOT_RUNS: z.coerce.number().int().min(10).max(10_000).default(200),
  /** An agent's memory (hot set, counters, lessons) nobody writes to for this long expires. */
  TETRALOOP_MEMORY_IDLE_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(60)
    .default(30 * 86_400),
  /** Distinct supporting runs and confidence a lesson needs to take effect. */
  TETRALOOP_LESSON_MIN_CASES: z.coerce.number().int().min(1).default(3),
  TETRALOOP_LESSON_MIN_CONFIDENCE: z.coerce.number().min(0).max(1).default(0.6),
  /** How long a process uses the lessons it read before reading them again. */
  TETRALOOP_LESSON_REFRESH_MS: z.coerce.number().int().min(0).default(1000),
  /** How often one call goes through to a service a hard lesson blocks, as a probe. */
  TETRALOOP_LESSON_PROBE_INTERVAL_MS: z.coerce
    .number()
    .int()
    .min(100)
    .default(5 * 60_000),
  /**
   * Retries a rate-limited service's `rate_limited` failures get from its template lesson (never
   * more than TETRALOOP_MAX_NODE_EXECUTIONS allows).
   */
  TETRALOOP_LESSON_RATE_LIMIT_RETRIES: z.coerce.number().int().min(0).max(20).default(4),
  /** The shortest delay between those retries. */
  TETRALOOP_LESSON_RATE_LIMIT_BACKOFF_MS: z.coerce.number().int().min(0).max(600_000).default(5000),
});
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
export function webhookStoreOptionsOf(env: BaseEnv): WebhookStoreOptions {
  const { key } = secretStoreOptionsOf(env);
  return {
    prefix: env.TETRALOOP_PREFIX,
    ...(key ? { key } : {}),
    maxPerTenant: env.TETRALOOP_WEBHOOK_SUBSCRIPTIONS_MAX,
    deliveriesKept: env.TETRALOOP_WEBHOOK_DELIVERIES_KEPT,
    deliveriesTtlSeconds: env.TETRALOOP_WEBHOOK_DELIVERIES_TTL_SECONDS,
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
