/** Configuration of worker processes, parsed once at boot. */
import {
  BaseEnv,
  DEFAULT_BACKOFF,
  DEFAULT_BLOB_MIN_BYTES,
  DEFAULT_CONNECTION_SETTINGS,
  DEFAULT_HTTP_MAX_BYTES,
  DEFAULT_RETRY_AFTER_MAX_MS,
  ERROR_CODES,
  MIN_BLOB_MIN_BYTES,
  jsonEnv,
  parseEnv,
} from '@tetraloop/core';
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

export const WorkerEnv = BaseEnv.extend({
  TETRALOOP_SENSE_CONCURRENCY: Concurrency.default(4),
  TETRALOOP_PLAN_CONCURRENCY: Concurrency.default(16),
  TETRALOOP_TOOL_CONCURRENCY: Concurrency.default(32),
  TETRALOOP_REFLECT_CONCURRENCY: Concurrency.default(1),
  /**
   * The shards of the run queues this process's plan and tool pools consume (`0,2`), each below
   * TETRALOOP_QUEUE_SHARDS; empty: every shard. Each shard needs some process that consumes it in
   * each pool, or its runs wait (docs/operations.md#redis-cluster).
   */
  TETRALOOP_WORKER_SHARDS: ShardList,
  /** Hosts (`host` or `host:port`, comma-separated) the http tool may reach although they are not public. */
  TETRALOOP_HTTP_ALLOW_HOSTS: z.string().default(''),
  /** Largest response body the http tool and polled sources read; a longer one fails as `validation` (`response_too_large`). */
  TETRALOOP_HTTP_MAX_BYTES: z.coerce.number().int().min(1024).default(DEFAULT_HTTP_MAX_BYTES),
  /** Per-node timeout when the node sets none. */
  TETRALOOP_TOOL_TIMEOUT_MS: z.coerce.number().int().positive().default(10_000),
  /**
   * How long a job's lock lives without renewal; a crashed worker's job is recovered after this.
   * A live worker renews it about every half of it, so a worker whose event loop or Redis stalls
   * for longer than about half of it loses the job to another worker (a false stall).
   */
  TETRALOOP_LOCK_DURATION_MS: z.coerce.number().int().min(1000).default(10_000),
  /**
   * How often workers look for jobs whose lock expired (stalled). A job is moved back to the queue
   * at the first check that finds it without a lock after a check saw it active, so a crashed
   * worker's job is taken again within about lock duration + 2 × this.
   */
  TETRALOOP_STALLED_INTERVAL_MS: z.coerce.number().int().min(1000).default(5_000),
  /**
   * Stalls a job survives before it is failed. A stall is a worker's crash or a Redis restart
   * under the job, not the job's doing; a node that crashes its workers is stopped by
   * TETRALOOP_MAX_NODE_EXECUTIONS as well (its 1 + 4 executions are that limit's 5).
   */
  TETRALOOP_MAX_STALLED_COUNT: z.coerce.number().int().min(0).default(4),
  /** A node executed more often than this in one run (retries plus redeliveries) is stopped as a suspected loop. */
  TETRALOOP_MAX_NODE_EXECUTIONS: z.coerce.number().int().min(1).default(5),
  /** Retries per error class, overriding the defaults, as JSON: `{"server": 3, "network": 1}`. */
  TETRALOOP_RETRIES: jsonEnv(
    z.partialRecord(z.enum(ERROR_CODES as [string, ...string[]]), z.number().int().min(0).max(10)),
    '{}',
  ),
  TETRALOOP_BACKOFF_BASE_MS: z.coerce.number().int().positive().default(DEFAULT_BACKOFF.baseMs),
  /** The seed's rule: a retry never comes at once — at least 100 ms after the failure. */
  TETRALOOP_BACKOFF_MIN_MS: z.coerce.number().int().min(100).default(DEFAULT_BACKOFF.minMs),
  TETRALOOP_BACKOFF_MAX_MS: z.coerce.number().int().positive().default(DEFAULT_BACKOFF.maxMs),
  TETRALOOP_BACKOFF_JITTER: z.coerce.number().min(0).max(1).default(DEFAULT_BACKOFF.jitter),
  /** Longest `Retry-After` a retry waits for (node retries and planner calls); a longer one is cut to it. */
  TETRALOOP_RETRY_AFTER_MAX_MS: z.coerce
    .number()
    .int()
    .min(0)
    .max(86_400_000)
    .default(DEFAULT_RETRY_AFTER_MAX_MS),
  /** On SIGTERM: how long in-flight jobs get to finish before the worker closes anyway. */
  TETRALOOP_SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).default(30_000),
  /** Each referenced value in a model prompt is cut to this many characters. */
  TETRALOOP_MODEL_INPUT_CHARS: z.coerce.number().int().positive().default(8000),
  /** A node output whose JSON text has more bytes than this is stored once as a blob; the snapshot holds a stub. */
  TETRALOOP_BLOB_MIN_BYTES: z.coerce.number().int().min(MIN_BLOB_MIN_BYTES).default(DEFAULT_BLOB_MIN_BYTES),
  /** The longest an MCP server's handshake (and each page of its tool list) may take. */
  TETRALOOP_MCP_CONNECT_TIMEOUT_MS: z.coerce
    .number()
    .int()
    .min(100)
    .max(600_000)
    .default(DEFAULT_CONNECTION_SETTINGS.connectTimeoutMs),
  /** The first delay before reconnecting to an MCP server; each failed attempt doubles it. */
  TETRALOOP_MCP_RECONNECT_MIN_MS: z.coerce
    .number()
    .int()
    .min(10)
    .default(DEFAULT_CONNECTION_SETTINGS.reconnectMinMs),
  /** The longest delay between reconnect attempts. */
  TETRALOOP_MCP_RECONNECT_MAX_MS: z.coerce
    .number()
    .int()
    .min(10)
    .default(DEFAULT_CONNECTION_SETTINGS.reconnectMaxMs),
});
export type WorkerEnv = z.infer<typeof WorkerEnv>;

export const parseWorkerEnv = (env: Record<string, string | undefined> = process.env): WorkerEnv =>
  parseEnv(
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
