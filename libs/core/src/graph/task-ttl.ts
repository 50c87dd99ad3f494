/**
 * Task TTLs: a node may say how long it stays worth starting — `ttlMs` from when it became ready
 * (its job was queued), or an absolute `expiresAt` — and what happens when it was not started in
 * time: `skip` (its dependents run and read `{expired: true}` as its output), `fail` (a `timeout`
 * failure marked `expired`, handled like any failure: `onError` applies), or `downgrade` (its
 * declared cheaper `fallback` runs in its place, under its id). Pure.
 */
import { z } from 'zod';

/** The longest `ttlMs`: a week. */
export const MAX_TTL_MS = 7 * 24 * 3600 * 1000;

export const OnExpire = z.enum(['skip', 'fail', 'downgrade']);
export type OnExpire = z.infer<typeof OnExpire>;

/** The fields of a node's TTL; checked together in `compile/validate.ts` (`checkTtl`). */
export const TaskTtlFields = {
  ttlMs: z.number().int().positive().max(MAX_TTL_MS).optional(),
  expiresAt: z.iso.datetime({ offset: true }).optional(),
  /** @defaultValue "skip" */
  onExpire: OnExpire.optional(),
  /**
   * With `onExpire: "downgrade"`: a node (without `id`) run in the node's place, of a kind that may
   * be a fallback (`mayBeFallback` in `nodes/`: `tool`, `llm`).
   */
  fallback: z.record(z.string(), z.unknown()).optional(),
};

/**
 * The planner's rule for the TTL fields of a node it plans. A planned node that expires unstarted
 * (`skip` or `fail`) is handed back to the planner (`executor/node-executor.ts`).
 */
export const PLANNED_TTL_RULE = `A "tool" or "llm" node whose result is worth having only soon may set "ttlMs" (how long it stays worth starting once it is ready, at most ${MAX_TTL_MS}) or "expiresAt" (an ISO time), and "onExpire": "skip" (the default) or "fail", or "downgrade" with "fallback": {a cheaper "tool" or "llm" node without "id"} run in its place. A node not started in time does not run: you are asked again, told what expired.`;

interface TtlFields {
  readonly ttlMs?: number;
  readonly expiresAt?: string;
  readonly onExpire?: OnExpire;
  readonly fallback?: Record<string, unknown>;
}

/** A node that was not started in time: when it expired, and what it does about it. */
export interface Expiry {
  readonly at: number;
  readonly onExpire: OnExpire;
}

/** Whether `node` has a TTL (`ttlMs` or `expiresAt`). */
export function hasTtl(node: object): boolean {
  const { ttlMs, expiresAt: at } = node as TtlFields;
  return ttlMs !== undefined || at !== undefined;
}

/** When `node` expires, given when it was queued (epoch ms); undefined for a node without a TTL. */
export function expiresAt(node: object, queuedAt: number): number | undefined {
  const { ttlMs, expiresAt: at } = node as TtlFields;
  if (ttlMs !== undefined) return queuedAt + ttlMs;
  if (at !== undefined) return Date.parse(at);
  return undefined;
}

/** The node's expiry when it starts at `now`, queued at `queuedAt`; undefined while it is in time. */
export function expiryOf(node: object, queuedAt: number, now: number): Expiry | undefined {
  const at = expiresAt(node, queuedAt);
  if (at === undefined || now < at) return undefined;
  return { at, onExpire: (node as TtlFields).onExpire ?? 'skip' };
}

/** The node its fallback makes: the fallback's fields under the node's id. */
export function fallbackNode<N extends { id: string }>(node: N): N {
  const fallback = (node as TtlFields).fallback;
  if (!fallback) return node;
  return { ...fallback, id: node.id } as unknown as N;
}
