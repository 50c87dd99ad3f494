/**
 * Which failures are retried, how often and after what delay. Pure functions; the worker hands
 * the delay to BullMQ's backoff so a waiting retry holds no worker slot.
 */
import type { ErrorCode, NodeErrorData } from '../errors/node-error.js';
import { RETRY_AFTER_CEILING_MS } from '../errors/retry-after.js';
import type { NodeRetry } from '../graph/schema.js';

export type RetryTable = Readonly<Record<ErrorCode, number>>;

/** Retries per error class when neither the deployment nor the node says otherwise. */
export const DEFAULT_RETRIES: RetryTable = {
  network: 2,
  timeout: 2,
  server: 2,
  rate_limited: 3,
  auth: 0,
  validation: 0,
  aborted: 0,
  budget_exhausted: 0,
  suspected_loop: 0,
  // A retry would be refused the same way until a probe finds the service back.
  blocked_by_lesson: 0,
  internal: 0,
};

export interface BackoffPolicy {
  /** First delay. @defaultValue 1000 */
  readonly baseMs: number;
  /** Upper bound of any delay. @defaultValue 30000 */
  readonly maxMs: number;
  /** Lower bound of any delay. @defaultValue 500 */
  readonly minMs: number;
  /** Each delay is randomised by ± this fraction. @defaultValue 0.2 */
  readonly jitter: number;
  /**
   * Longest server-given delay (`Retry-After`) honoured; a longer one is cut to this.
   * @defaultValue 600000
   */
  readonly retryAfterMaxMs?: number;
}

/**
 * The shortest wait before any retry (a node's, a model call's, a webhook delivery's, a polled
 * source's): 0.5 s, the seed's floor. A retry never comes at once, whatever a setting or a
 * policy says.
 */
export const RETRY_FLOOR_MS = 500;

/** Longest `Retry-After` honoured when the deployment sets none: 10 minutes. */
export const DEFAULT_RETRY_AFTER_MAX_MS = 600_000;

export const DEFAULT_BACKOFF: BackoffPolicy = {
  baseMs: 1000,
  maxMs: 30_000,
  minMs: 500,
  jitter: 0.2,
  retryAfterMaxMs: DEFAULT_RETRY_AFTER_MAX_MS,
};

/** How many times a failure of `code` may be retried for a node. */
export function retriesFor(code: ErrorCode, table: RetryTable, node?: NodeRetry): number {
  const override = node ? (node as Partial<Record<ErrorCode, number>>)[code] : undefined;
  // Auth is retried at most once (after a credential refresh), whatever the override says.
  if (code === 'auth') return Math.min(table.auth, override ?? table.auth);
  // A validation error is retried only with other arguments: one retry per override, never the
  // deployment's count on a node that lists none.
  if (code === 'validation') return Math.min(override ?? table.validation, node?.vary?.length ?? 0);
  return override ?? table[code];
}

/** The most retries any class allows a node: BullMQ's `attempts` is this plus one. */
export function maxRetries(table: RetryTable, node?: NodeRetry): number {
  return Math.max(...(Object.keys(table) as ErrorCode[]).map((c) => retriesFor(c, table, node)));
}

/**
 * Delay before retry number `retry` (1 for the first retry): exponential from `baseMs`,
 * randomised by ±jitter, clamped to [minMs, maxMs]. A server-given delay (`Retry-After`) wins
 * when it is longer, up to `retryAfterMaxMs`. Never under `RETRY_FLOOR_MS`.
 */
export function retryDelay(
  retry: number,
  error: { readonly retryAfterMs?: number } | NodeErrorData,
  policy: BackoffPolicy = DEFAULT_BACKOFF,
  random: () => number = Math.random,
): number {
  const exponential = policy.baseMs * 2 ** Math.max(0, retry - 1);
  const jittered = exponential * (1 + policy.jitter * (2 * random() - 1));
  const delay = Math.max(RETRY_FLOOR_MS, Math.min(policy.maxMs, Math.max(policy.minMs, jittered)));
  const asked = 'retryAfterMs' in error ? (error.retryAfterMs ?? 0) : 0;
  const ceiling = Math.min(policy.retryAfterMaxMs ?? DEFAULT_RETRY_AFTER_MAX_MS, RETRY_AFTER_CEILING_MS);
  const serverDelay = Number.isFinite(asked) ? Math.min(asked, ceiling) : ceiling;
  return Math.round(Math.max(delay, serverDelay));
}
