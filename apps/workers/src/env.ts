/** Configuration of worker processes, parsed once at boot. */
import {
  BASE_SETTINGS,
  decisionTimeoutsOf,
  SHUTDOWN_GRACE_DEFAULT_MS,
  envSchema,
  setting,
  type Settings,
  jsonEnv,
  listEnv,
  parseEnv,
  ruleSettingsOf,
} from '@tetraloop/core/config';
import { ERROR_CODES } from '@tetraloop/core/errors';
import type { ExecutorDeps } from '@tetraloop/core/executor';
import { DEFAULT_CONNECTION_SETTINGS, type ConnectionSettings } from '@tetraloop/core/mcp';
import {
  DEFAULT_BACKOFF,
  DEFAULT_RETRY_AFTER_MAX_MS,
  DEFAULT_RETRIES,
  RETRY_FLOOR_MS,
  type BackoffPolicy,
  type RetryTable,
} from '@tetraloop/core/policy';
import type { CallLessonDeps } from '@tetraloop/core/reflect';
import { DEFAULT_BLOB_MIN_BYTES, MIN_BLOB_MIN_BYTES } from '@tetraloop/core/state';
import { DEFAULT_HTTP_MAX_BYTES, TOOL_QUEUE_NAME } from '@tetraloop/core/tools';
import type { WorkerOptions } from 'bullmq';
import { z } from 'zod';

const Concurrency = z.coerce.number().int().min(1).max(1000);

/** Shard indexes, comma-separated (`0,2`); empty: every shard. */
const ShardList = z
  .string()
  .default('')
  .transform((v, ctx) => {
    if (v.trim() === '') return [];
    const parts = v.split(',').map((s) => s.trim());
    if (parts.some((p) => !/^\d{1,2}$/.test(p))) {
      ctx.addIssue({ code: 'custom', message: 'shard indexes (0, 1, …), comma-separated, such as 0,2' });
      return z.NEVER;
    }
    return [...new Set(parts.map(Number))];
  });

export const WORKER_SETTINGS = {
  TETRALOOP_SENSE_CONCURRENCY: setting({
    group: 'workers',
    file: 'workers.senseConcurrency',
    readBy: ['workers'],
    pools: ['sense'],
    doc: 'concurrent jobs of the `sense` pool per process (1–1000)',
    schema: Concurrency.default(4),
  }),
  TETRALOOP_PLAN_CONCURRENCY: setting({
    group: 'workers',
    file: 'workers.planConcurrency',
    readBy: ['workers'],
    pools: ['plan'],
    doc: 'Concurrent jobs of the `plan` pool per process (1–1000).',
    schema: Concurrency.default(16),
  }),
  TETRALOOP_TOOL_CONCURRENCY: setting({
    group: 'workers',
    file: 'workers.toolConcurrency',
    readBy: ['workers'],
    pools: ['tool'],
    doc: 'Concurrent node jobs of the `tool` pool per process (1–1000).',
    schema: Concurrency.default(32),
  }),
  TETRALOOP_REFLECT_CONCURRENCY: setting({
    group: 'workers',
    file: 'workers.reflectConcurrency',
    readBy: ['workers'],
    pools: ['reflect'],
    doc: 'Concurrent jobs of the `reflect` pool per process (1–1000).',
    schema: Concurrency.default(1),
  }),
  TETRALOOP_TOOL_MODULES: setting({
    group: 'custom tools',
    file: 'tools.modules',
    readBy: ['workers'],
    pools: ['tool'],
    form: 'list',
    doc: 'ES modules whose exported tools (made with `defineTool` of `@tetraloop/sdk`) this process serves: paths (relative to the working directory) or package names, comma-separated (`--tools`, repeatable).',
    schema: listEnv(),
  }),
  TETRALOOP_TOOL_QUEUES: setting({
    group: 'custom tools',
    file: 'tools.queues',
    readBy: ['workers'],
    pools: ['tool'],
    form: 'list',
    doc: "The tool queues this process's tool pool serves (`crm,gpu`; `default` is the shared node queue, where built-in tools and custom tools without a queue run); `--queues`.",
    schema: z
      .string()
      .default('default')
      .transform((v) => [
        ...new Set(
          v
            .split(',')
            .map((q) => q.trim())
            .filter((q) => q !== ''),
        ),
      ])
      .pipe(
        z.array(z.string().regex(TOOL_QUEUE_NAME, `each queue must match ${TOOL_QUEUE_NAME.source}`)).min(1),
      ),
  }),
  TETRALOOP_WORKER_SHARDS: setting({
    group: 'workers',
    file: 'workers.shards',
    readBy: ['workers'],
    pools: ['plan', 'tool'],
    form: 'list',
    doc: "The shards of the run queues this process's plan and tool pools consume (`0,2`), each below TETRALOOP_QUEUE_SHARDS; empty: every shard. Each shard needs some process that consumes it in each pool, or its runs wait (docs/operations.md#redis-cluster).",
    schema: ShardList,
  }),
  TETRALOOP_HTTP_ALLOW_HOSTS: setting({
    group: 'tools',
    file: 'tools.httpAllowHosts',
    readBy: ['workers'],
    pools: ['tool', 'sense'],
    form: 'list',
    doc: 'Hosts (`host` or `host:port`, comma-separated) the http tool may reach although they are not public.',
    schema: z.string().default(''),
  }),
  TETRALOOP_HTTP_MAX_BYTES: setting({
    group: 'tools',
    file: 'tools.httpMaxBytes',
    readBy: ['workers'],
    pools: ['tool', 'sense'],
    doc: 'Largest response body the http tool and polled sources read; a longer one fails as `validation` (`response_too_large`).',
    schema: z.coerce.number().int().min(1024).default(DEFAULT_HTTP_MAX_BYTES),
  }),
  TETRALOOP_TOOL_TIMEOUT_MS: setting({
    group: 'tools',
    file: 'tools.timeoutMs',
    readBy: ['workers'],
    pools: ['tool'],
    doc: 'Per-node timeout when the node sets none.',
    schema: z.coerce.number().int().positive().default(10_000),
  }),
  TETRALOOP_LOCK_DURATION_MS: setting({
    group: 'jobs',
    file: 'jobs.lockDurationMs',
    readBy: ['workers'],
    pools: ['sense', 'plan', 'tool', 'reflect'],
    doc: "How long a job's lock lives without renewal; a crashed worker's job is recovered after this. A live worker renews it about every half of it, so a worker whose event loop or Redis stalls for longer than about half of it loses the job to another worker (a false stall).",
    schema: z.coerce.number().int().min(1000).default(10_000),
  }),
  TETRALOOP_STALLED_INTERVAL_MS: setting({
    group: 'jobs',
    file: 'jobs.stalledIntervalMs',
    readBy: ['workers'],
    doc: "How often workers look for jobs whose lock expired (stalled). A job is moved back to the queue at the first check that finds it without a lock after a check saw it active, so a crashed worker's job is taken again within about lock duration + 2 × this.",
    schema: z.coerce.number().int().min(1000).default(5_000),
  }),
  TETRALOOP_MAX_STALLED_COUNT: setting({
    group: 'jobs',
    file: 'jobs.maxStalledCount',
    readBy: ['workers'],
    doc: "Stalls a job survives before it is failed. A stall is a worker's crash or a Redis restart under the job, not the job's doing; a node that crashes its workers is stopped by TETRALOOP_MAX_NODE_EXECUTIONS as well (its 1 + 4 executions are that limit's 5).",
    schema: z.coerce.number().int().min(0).default(4),
  }),
  TETRALOOP_DEADLINE_SWEEP_MS: setting({
    group: 'runs',
    file: 'runs.deadlineSweepMs',
    readBy: ['workers'],
    pools: ['plan'],
    doc: 'How often each plan pool looks for running runs past their deadline (`timeoutSeconds`) and ends them `timed_out`: a run ends up to this long after its deadline. Each look is one read of the run deadlines.',
    schema: z.coerce.number().int().min(10).max(60_000).default(250),
  }),
  TETRALOOP_REDIS_AWAY_MAX_DEFERRALS: setting({
    group: 'jobs',
    file: 'jobs.redisAwayMaxDeferrals',
    readBy: ['workers'],
    doc: "Times one job that failed because Redis was away goes back to its queue without using up an attempt, each after the retry backoff (1 s doubling to 30 s): the default allows about 8 minutes of backoff (a job only uses one up when it is taken and fails again; a full outage, where no job is taken, uses none). Past it the failure counts as BullMQ's attempt. 0: every such failure counts.",
    schema: z.coerce.number().int().min(0).max(1000).default(20),
  }),
  TETRALOOP_MAX_NODE_EXECUTIONS: setting({
    group: 'retries',
    file: 'retries.maxNodeExecutions',
    readBy: ['workers'],
    pools: ['tool'],
    doc: 'A node executed more often than this in one run (retries plus redeliveries) is stopped as a suspected loop.',
    schema: z.coerce.number().int().min(1).default(5),
  }),
  TETRALOOP_RETRIES: setting({
    group: 'retries',
    file: 'retries.byClass',
    readBy: ['workers'],
    pools: ['tool'],
    form: 'json',
    doc: 'Retries per error class, overriding the defaults, as JSON: `{"server": 3, "network": 1}`.',
    schema: jsonEnv(
      z.partialRecord(z.enum(ERROR_CODES as [string, ...string[]]), z.number().int().min(0).max(10)),
      '{}',
    ),
  }),
  TETRALOOP_BACKOFF_BASE_MS: setting({
    group: 'retries',
    file: 'retries.backoffBaseMs',
    readBy: ['workers'],
    pools: ['tool'],
    doc: 'retry delay base × 2^(n−1), ± jitter, clamped to [min, max]; a longer `Retry-After` wins',
    schema: z.coerce.number().int().positive().default(DEFAULT_BACKOFF.baseMs),
  }),
  TETRALOOP_BACKOFF_MIN_MS: setting({
    group: 'retries',
    file: 'retries.backoffMinMs',
    readBy: ['workers'],
    pools: ['tool'],
    doc: 'The shortest delay before a retry: at least 0.5 s, the floor of every retry wait (a retry never comes at once).',
    schema: z.coerce.number().int().min(RETRY_FLOOR_MS).default(DEFAULT_BACKOFF.minMs),
  }),
  TETRALOOP_BACKOFF_MAX_MS: setting({
    group: 'retries',
    file: 'retries.backoffMaxMs',
    readBy: ['workers'],
    pools: ['tool'],
    doc: 'upper bound of a retry delay (a longer `Retry-After` still wins, up to `TETRALOOP_RETRY_AFTER_MAX_MS`)',
    schema: z.coerce.number().int().positive().default(DEFAULT_BACKOFF.maxMs),
  }),
  TETRALOOP_BACKOFF_JITTER: setting({
    group: 'retries',
    file: 'retries.backoffJitter',
    readBy: ['workers'],
    pools: ['tool'],
    doc: 'each delay is randomised by ± this fraction (0–1)',
    schema: z.coerce.number().min(0).max(1).default(DEFAULT_BACKOFF.jitter),
  }),
  TETRALOOP_RETRY_AFTER_MAX_MS: setting({
    group: 'retries',
    file: 'retries.retryAfterMaxMs',
    readBy: ['workers'],
    pools: ['tool', 'plan'],
    doc: 'Longest `Retry-After` a retry waits for (node retries and planner calls); a longer one is cut to it.',
    schema: z.coerce.number().int().min(0).max(86_400_000).default(DEFAULT_RETRY_AFTER_MAX_MS),
  }),
  TETRALOOP_MODEL_INPUT_CHARS: setting({
    group: 'models',
    file: 'model.inputChars',
    readBy: ['workers'],
    pools: ['tool'],
    doc: 'Each referenced value in a model prompt is cut to this many characters.',
    schema: z.coerce.number().int().positive().default(8000),
  }),
  TETRALOOP_BLOB_MIN_BYTES: setting({
    group: 'runs',
    file: 'runs.blobMinBytes',
    readBy: ['workers'],
    pools: ['tool'],
    doc: 'A node output whose JSON text has more bytes than this is stored once as a blob; the snapshot holds a stub.',
    schema: z.coerce.number().int().min(MIN_BLOB_MIN_BYTES).default(DEFAULT_BLOB_MIN_BYTES),
  }),
  TETRALOOP_MCP_CONNECT_TIMEOUT_MS: setting({
    group: 'mcp',
    file: 'mcp.connectTimeoutMs',
    readBy: ['workers'],
    pools: ['tool'],
    doc: "The longest an MCP server's handshake (and each page of its tool list) may take.",
    schema: z.coerce
      .number()
      .int()
      .min(100)
      .max(600_000)
      .default(DEFAULT_CONNECTION_SETTINGS.connectTimeoutMs),
  }),
  TETRALOOP_MCP_RECONNECT_MIN_MS: setting({
    group: 'mcp',
    file: 'mcp.reconnectMinMs',
    readBy: ['workers'],
    pools: ['tool'],
    doc: 'The first delay before reconnecting to an MCP server; each failed attempt doubles it.',
    schema: z.coerce.number().int().min(10).default(DEFAULT_CONNECTION_SETTINGS.reconnectMinMs),
  }),
  TETRALOOP_MCP_RECONNECT_MAX_MS: setting({
    group: 'mcp',
    file: 'mcp.reconnectMaxMs',
    readBy: ['workers'],
    pools: ['tool'],
    doc: 'The longest delay between reconnect attempts.',
    schema: z.coerce.number().int().min(10).default(DEFAULT_CONNECTION_SETTINGS.reconnectMaxMs),
  }),
  TETRALOOP_HTTP_DENY_PATTERN: setting({
    group: 'tools',
    file: 'tools.httpDenyPattern',
    readBy: ['workers'],
    pools: ['tool'],
    doc: 'With the built-in `deny-http` plugin (`TETRALOOP_PLUGINS=deny-http`): an RE2 pattern; an http call whose URL matches it is refused before it goes out.',
    schema: z.string().optional(),
  }),
} satisfies Settings;
export const WorkerEnv = envSchema({ ...BASE_SETTINGS, ...WORKER_SETTINGS });
export type WorkerEnv = Omit<z.infer<typeof WorkerEnv>, 'TETRALOOP_SHUTDOWN_GRACE_MS'> & {
  /** Filled in with the workers' own default when unset. */
  readonly TETRALOOP_SHUTDOWN_GRACE_MS: number;
};

export function parseWorkerEnv(env: Record<string, string | undefined> = process.env): WorkerEnv {
  const read = parseEnv(
    WorkerEnv.superRefine((e, ctx) => {
      const beyond = e.TETRALOOP_WORKER_SHARDS.filter((shard) => shard >= e.TETRALOOP_QUEUE_SHARDS);
      if (beyond.length > 0) {
        ctx.addIssue({
          code: 'custom',
          path: ['TETRALOOP_WORKER_SHARDS'],
          message: `${beyond.length === 1 ? `shard ${beyond[0]} does not` : `shards ${beyond.join(' and ')} do not`} exist: TETRALOOP_QUEUE_SHARDS is ${e.TETRALOOP_QUEUE_SHARDS} (shards 0 to ${e.TETRALOOP_QUEUE_SHARDS - 1})`,
        });
      }
    }),
    env,
  );
  return {
    ...read,
    TETRALOOP_SHUTDOWN_GRACE_MS: read.TETRALOOP_SHUTDOWN_GRACE_MS ?? SHUTDOWN_GRACE_DEFAULT_MS.workers,
  };
}

/** How many times each error class is retried: the defaults with TETRALOOP_RETRIES over them. */
export function retryTableOf(env: WorkerEnv): RetryTable {
  return { ...DEFAULT_RETRIES, ...env.TETRALOOP_RETRIES };
}

/** The delay before a retry (of a node, and of a model call within one). */
export function backoffOf(env: WorkerEnv): BackoffPolicy {
  return {
    baseMs: env.TETRALOOP_BACKOFF_BASE_MS,
    minMs: env.TETRALOOP_BACKOFF_MIN_MS,
    maxMs: env.TETRALOOP_BACKOFF_MAX_MS,
    jitter: env.TETRALOOP_BACKOFF_JITTER,
    retryAfterMaxMs: env.TETRALOOP_RETRY_AFTER_MAX_MS,
  };
}

/** How the tool pool connects to MCP servers, and reconnects to one that went away. */
export function mcpConnectionOf(env: WorkerEnv): ConnectionSettings {
  return {
    connectTimeoutMs: env.TETRALOOP_MCP_CONNECT_TIMEOUT_MS,
    reconnectMinMs: env.TETRALOOP_MCP_RECONNECT_MIN_MS,
    reconnectMaxMs: env.TETRALOOP_MCP_RECONNECT_MAX_MS,
  };
}

/** What every BullMQ Worker of a pool is given: its job locks and stalled-job checks. */
export function workerOptionsOf(
  env: WorkerEnv,
): Pick<WorkerOptions, 'lockDuration' | 'stalledInterval' | 'maxStalledCount'> {
  return {
    lockDuration: env.TETRALOOP_LOCK_DURATION_MS,
    stalledInterval: env.TETRALOOP_STALLED_INTERVAL_MS,
    maxStalledCount: env.TETRALOOP_MAX_STALLED_COUNT,
  };
}

/** What the executors take from the configuration; the rest of their dependencies are services. */
export function executorSettingsOf(
  env: WorkerEnv,
): Pick<
  ExecutorDeps,
  | 'retries'
  | 'backoff'
  | 'maxNodeExecutions'
  | 'handoff'
  | 'handoffWidth'
  | 'defaultTimeoutMs'
  | 'modelInputChars'
  | 'blobMinBytes'
  | 'approvalTimeoutSeconds'
  | 'budgetDecisionTimeoutSeconds'
> {
  return {
    retries: retryTableOf(env),
    backoff: backoffOf(env),
    maxNodeExecutions: env.TETRALOOP_MAX_NODE_EXECUTIONS,
    handoff: env.TETRALOOP_NODE_HANDOFF,
    handoffWidth: env.TETRALOOP_NODE_HANDOFF_WIDTH,
    defaultTimeoutMs: env.TETRALOOP_TOOL_TIMEOUT_MS,
    modelInputChars: env.TETRALOOP_MODEL_INPUT_CHARS,
    blobMinBytes: env.TETRALOOP_BLOB_MIN_BYTES,
    ...decisionTimeoutsOf(env),
  };
}

/** How lessons act on a call: how often a blocked service is probed, the retries a rate limit gets. */
export function lessonSettingsOf(env: WorkerEnv): Pick<CallLessonDeps, 'probeIntervalMs' | 'maxRetries'> {
  return {
    probeIntervalMs: env.TETRALOOP_LESSON_PROBE_INTERVAL_MS,
    maxRetries: ruleSettingsOf(env).rateLimitRetries,
  };
}
