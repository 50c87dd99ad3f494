/**
 * Retries with different parameters: a node's `retry.vary` lists overrides of its own fields. The
 * first attempt runs the node as written; retry i (attempt i + 1) runs it with `vary[i - 1]`
 * applied — the last override again when there are more retries than overrides — so a retry can
 * lower a temperature, try another extraction prompt or a mirror URL. Which kinds may vary is each
 * kind's own trait (`variesOnRetry` in `nodes/`). Pure.
 */
import { z } from 'zod';

/** Most overrides a node may list. */
export const MAX_RETRY_VARIANTS = 10;

/** One override: fields of the node, an object field (a tool's `args`) merged into the node's own. */
export const RetryVariant = z.record(z.string(), z.unknown());
export type RetryVariant = z.infer<typeof RetryVariant>;

export const RetryVariants = z.array(RetryVariant).min(1).max(MAX_RETRY_VARIANTS);

/** Fields an override may not change: what the node is, and how it fails. */
export const FIXED_FIELDS: ReadonlySet<string> = new Set(['id', 'kind', 'retry', 'onError', 'priority']);

/** Which override attempt `attempt` (1 for the first) runs with, 1-based; undefined for none. */
export function variantNumber(count: number, attempt: number): number | undefined {
  if (count === 0 || attempt <= 1) return undefined;
  return Math.min(attempt - 1, count);
}

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** `node` with `variant` applied: object fields merged one level deep, the others replaced. */
export function applyVariant<N extends object>(node: N, variant: RetryVariant): N {
  const out: Record<string, unknown> = { ...(node as Record<string, unknown>) };
  for (const [field, value] of Object.entries(variant)) {
    const own = out[field];
    out[field] = isPlainObject(own) && isPlainObject(value) ? { ...own, ...value } : value;
  }
  return out as N;
}

/** The overrides a node lists, if any. */
export const variantsOf = (node: object): readonly RetryVariant[] =>
  (node as { retry?: { vary?: readonly RetryVariant[] } }).retry?.vary ?? [];

/**
 * The node as attempt `attempt` runs it, and which override it applied (1-based), if any.
 */
export function nodeForAttempt<N extends object>(node: N, attempt: number): { node: N; variant?: number } {
  const variants = variantsOf(node);
  const variant = variantNumber(variants.length, attempt);
  if (variant === undefined) return { node };
  return { node: applyVariant(node, variants[variant - 1]!), variant };
}
