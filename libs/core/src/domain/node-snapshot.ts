/**
 * What a node's executions leave behind: attempt records, its immutable snapshot, its live state
 * until then, model usage; and the budget they are charged against. Types and schemas only.
 */
import { z } from 'zod';
import { NodeErrorData } from '../errors/node-error.js';

/** A fingerprint: the lowercase hex sha256 of a value's canonical JSON (`domain/fingerprint.ts`). */
export const Sha256Hex = z.string().regex(/^[0-9a-f]{64}$/);

export const SnapshotStatus = z.enum(['succeeded', 'failed', 'skipped', 'cancelled']);
export type SnapshotStatus = z.infer<typeof SnapshotStatus>;

/** One execution of a node: when, where, and if it failed, why and how long until the retry. */
export const AttemptRecord = z.object({
  attempt: z.number().int().positive(),
  startedAt: z.string(),
  finishedAt: z.string(),
  durationMs: z.number().nonnegative(),
  worker: z.string(),
  error: NodeErrorData.optional(),
  /** Backoff before the next attempt, when one followed. */
  retryDelayMs: z.number().int().nonnegative().optional(),
  /** The tool the attempt called (its last call, for a loop), and the outside service it reached. */
  tool: z.string().optional(),
  target: z.string().optional(),
  /** A custom tool's version and the hash of its schemas, as the worker that ran the attempt had them. */
  toolVersion: z.string().optional(),
  schemaHash: z.string().optional(),
  /** Template lessons that changed this attempt's call (their ids). */
  lessons: z.array(z.string()).optional(),
  /** The node's `retry.vary` override this attempt ran with (1-based). */
  variant: z.number().int().positive().optional(),
  /** The job the attempt ran in when the node ran handed off: that of the node that released it. */
  carriedBy: z.string().optional(),
});
export type AttemptRecord = z.infer<typeof AttemptRecord>;

/** Tokens, calls and cost of one model-using node. */
export const NodeUsage = z.object({
  promptTokens: z.number().int().nonnegative(),
  completionTokens: z.number().int().nonnegative(),
  totalTokens: z.number().int().nonnegative(),
  modelCalls: z.number().int().nonnegative(),
  /** Of the prompt tokens, those the provider served from its prompt cache (when it said). */
  cachedPromptTokens: z.number().int().nonnegative().optional(),
  /** What its priced calls cost, in USD; absent when none of its calls had a price. */
  costUsd: z.number().nonnegative().optional(),
});
export type NodeUsage = z.infer<typeof NodeUsage>;

/** A node's final result, written once before its job completes and never changed. */
export const NodeSnapshot = z.object({
  status: SnapshotStatus,
  /**
   * What its call was made with: a tool node's args after references and hooks (a secret stays its
   * `{"$secret"}` reference), an llm node's rendered `{system?, prompt}`; a blob stub when large.
   */
  input: z.unknown().optional(),
  output: z.unknown().optional(),
  /**
   * Fingerprints of the hand-off: the hex sha256 of the canonical JSON (RFC 8785) of `input` and of
   * `output`, as the values were (a blob stub's content, not the stub); absent with the value.
   */
  inputSha256: Sha256Hex.optional(),
  outputSha256: Sha256Hex.optional(),
  error: NodeErrorData.optional(),
  /** Every execution that led to this snapshot, oldest first (empty for nodes that never ran). */
  attempts: z.array(AttemptRecord),
  startedAt: z.string().optional(),
  finishedAt: z.string(),
  durationMs: z.number().nonnegative(),
  /** For nodes that called a model. */
  usage: NodeUsage.optional(),
  /** A rerun's copy of its origin's snapshot: the run the node ran in (it did not run here). */
  reusedFrom: z.string().optional(),
  /** A node not started before its TTL: when it expired and what it did (`graph/task-ttl.ts`). */
  expired: z.object({ at: z.string(), onExpire: z.enum(['skip', 'fail', 'downgrade']) }).optional(),
});
export type NodeSnapshot = z.infer<typeof NodeSnapshot>;

/** Where a node stands before its snapshot exists. */
export const LiveNodeState = z.object({
  status: z.enum(['queued', 'running', 'retrying', 'waiting', 'throttled']),
  startedAt: z.string().optional(),
  attempt: z.number().int().positive().optional(),
  /**
   * For retrying nodes: when the next attempt is due; for waiting nodes: the timeout; for throttled
   * nodes: when the call is looked at again at the latest (it may go sooner).
   */
  until: z.string().optional(),
  /** For waiting nodes: the signal they wait for (an approval's with its nonce). */
  signal: z.string().optional(),
  /** For throttled nodes: the flow counter their call waits on. */
  key: z.string().optional(),
  iterations: z.number().int().nonnegative().optional(),
  /**
   * For queued nodes, and running ones handed off (and retrying ones whose attempt failed handed
   * off, until their retry's own job begins them): the node whose completion released it.
   */
  by: z.string().optional(),
  /**
   * For running nodes handed off (`executor/handoff.ts`), and retrying ones whose attempt failed
   * so: the job that ran it, its releaser's.
   */
  carriedBy: z.string().optional(),
});
export type LiveNodeState = z.infer<typeof LiveNodeState>;

/** The largest money budget a run may have (USD): its nano-dollars stay exact integers. */
export const MAX_BUDGET_COST_USD = 1_000_000;

/** Per-run execution budget. @defaultValue from the API's configuration */
export const Budget = z.strictObject({
  /** Tool calls (each attempt and each loop iteration counts). */
  toolCalls: z.number().int().positive().optional(),
  /** Summed wall-clock time of tool calls, in ms. */
  toolTimeMs: z.number().int().positive().optional(),
  /** Model tokens, prompt plus completion. */
  tokens: z.number().int().positive().optional(),
  /** Money spent on model calls, in USD, priced by the price table (`TETRALOOP_MODEL_PRICES`). */
  costUsd: z.number().positive().max(MAX_BUDGET_COST_USD).optional(),
});
export type Budget = z.infer<typeof Budget>;

/**
 * What a run does when a model call finds its money budget (`budget.costUsd`) spent: `fail` the
 * node (`budget_exhausted`), or `pause` it until a signal raises the budget or stops it.
 */
export const OnBudget = z.enum(['fail', 'pause']);
export type OnBudget = z.infer<typeof OnBudget>;

/** What a node or iteration used, charged to the run's usage counters. */
export interface UsageCharge {
  toolCalls?: number;
  toolTimeMs?: number;
  promptTokens?: number;
  completionTokens?: number;
  modelCalls?: number;
  /** What the priced model calls cost, in integer nano-dollars (10⁻⁹ USD). */
  costNanoUsd?: number;
  /** Model calls whose model has no price. */
  unpricedModelCalls?: number;
}
