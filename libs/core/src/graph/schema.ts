/**
 * The pieces of a graph that do not depend on a node's kind: node ids, edges, the fields every
 * executable node may carry, exit conditions. Each kind's own schema is in `nodes/`. Pure.
 */
import { z } from 'zod';
import { RetryVariants } from './retry-variants.js';
import { TaskTtlFields } from './task-ttl.js';

/**
 * Node ids are short, URL- and key-safe names. A dot never appears, so `runId.nodeId` is
 * unambiguous; a slash never appears either, because nested graphs name their nodes `parent/child`.
 */
export const NodeId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must match [A-Za-z0-9_-]{1,64}');
export type NodeId = z.infer<typeof NodeId>;

/**
 * After its retries a failed node fails the run (`fail`), passes `{error}` downstream
 * (`continue`), or, in a task run, hands the run back to the planner (`replan`).
 */
export const OnError = z.enum(['fail', 'continue', 'replan']);
export type OnError = z.infer<typeof OnError>;

const Retries = z.number().int().min(0).max(10);

/**
 * Per-node override of how many times a failure of each class is retried. A `validation` error is
 * the call's own arguments at fault, so it is retried only with other ones: `validation` retries
 * need as many `vary` overrides (a retry as it was would fail the same way).
 */
export const NodeRetry = z
  .strictObject({
    network: Retries.optional(),
    timeout: Retries.optional(),
    rate_limited: Retries.optional(),
    server: Retries.optional(),
    auth: Retries.optional(),
    validation: Retries.optional(),
    internal: Retries.optional(),
    /** Overrides of the node's fields for its retries, in turn (`retry-variants.ts`); tool and llm nodes. */
    vary: RetryVariants.optional(),
  })
  .superRefine((retry, ctx) => {
    const asked = retry.validation ?? 0;
    if (asked > (retry.vary?.length ?? 0)) {
      ctx.addIssue({
        code: 'custom',
        path: ['validation'],
        message: `a validation error is retried only with different arguments: give "vary" at least ${asked} override(s), one per retry`,
      });
    }
  });
export type NodeRetry = z.infer<typeof NodeRetry>;

/** A tool call's arguments; values may hold references. */
export const Args = z.record(z.string(), z.unknown());

/** A node's own call limit. */
export const TimeoutMs = z.number().int().positive().max(600_000);

/**
 * 1 (lowest) to 10: among a run's ready nodes, which dispatches first. A run that gives any node a
 * priority gives the others `DEFAULT_NODE_PRIORITY`.
 */
export const NodePriority = z.number().int().min(1).max(10);
export const DEFAULT_NODE_PRIORITY = 5;

/** Fields every executable node that calls something (tool, model) may carry. */
export const CallNodeFields = {
  id: NodeId,
  priority: NodePriority.optional(),
  timeoutMs: TimeoutMs.optional(),
  retry: NodeRetry.optional(),
  onError: OnError.optional(),
  ...TaskTtlFields,
};

/**
 * What a planner may set on a tool or model node it plans: the node's failure policy, priority and
 * TTL, within the bounds a fixed graph's node has (its schema checks them again, like any field).
 */
export const PlannedNodeFields = {
  onError: OnError.optional(),
  timeoutMs: TimeoutMs.optional(),
  retry: NodeRetry.optional(),
  priority: NodePriority.optional(),
  ...TaskTtlFields,
};

/** The planner's rule for `PlannedNodeFields`. */
export const PLANNED_NODE_RULE =
  'A "tool" or "llm" node may also set how it fails: "onError": "continue" (its failure goes downstream as {"error": {"code", "message"}} for later nodes to handle, and the run goes on) or "replan" (the run is planned again from what succeeded); "timeoutMs" (at most 600000); "retry": {"network"|"timeout"|"rate_limited"|"server": retries, at most 10}, and "validation" retries only beside "vary": [overrides of the node’s own fields, one per retry, e.g. {"args": {…}}] (a call refused for its arguments is never retried with the same ones); and "priority" (1–10, higher runs first among ready nodes).';

/** What every node has. */
export interface NodeBase {
  readonly id: string;
  readonly kind: string;
}

/** A node of some kind, its other fields unknown here. */
export interface AnyNode extends NodeBase {
  readonly [field: string]: unknown;
}

/**
 * An exit condition, checked by the harness on each iteration's snapshot (`{status, output,
 * error}`): exactly one operator.
 */
export const Condition = z
  .strictObject({
    path: z.string().min(1),
    equals: z.unknown().optional(),
    in: z.array(z.unknown()).optional(),
    exists: z.boolean().optional(),
    gte: z.number().optional(),
    lte: z.number().optional(),
  })
  .refine((c) => ['equals', 'in', 'exists', 'gte', 'lte'].filter((k) => k in c).length === 1, {
    message: 'give exactly one of equals, in, exists, gte, lte',
  });
export type Condition = z.infer<typeof Condition>;

export const Edge = z.tuple([NodeId, NodeId]);
export type Edge = z.infer<typeof Edge>;

/**
 * A graph over nodes of any kind: how a nested graph, and a run's graph in its document, are
 * typed below `nodes/`, where the kinds are not known (`Graph` in `nodes/` is this over the union
 * of every kind). Validated before anything runs.
 */
export interface GraphOf<N extends NodeBase = AnyNode> {
  nodes: N[];
  edges: Edge[];
}

/** A problem found by validation, with a path into the graph. */
export interface ValidationIssue {
  /** Dot-separated path inside the graph, e.g. `nodes.1.id`; empty for the graph itself. */
  readonly path: string;
  readonly message: string;
}
