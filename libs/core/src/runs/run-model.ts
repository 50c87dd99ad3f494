import { z } from 'zod';
import { NodeErrorData } from '../errors/node-error.js';
import { Graph } from '../graph/schema.js';

export const RunStatus = z.enum(['queued', 'running', 'succeeded', 'failed', 'cancelled', 'timed_out']);
export type RunStatus = z.infer<typeof RunStatus>;

export const TERMINAL_RUN_STATUSES: ReadonlySet<RunStatus> = new Set([
  'succeeded',
  'failed',
  'cancelled',
  'timed_out',
]);
export const isTerminal = (status: RunStatus): boolean => TERMINAL_RUN_STATUSES.has(status);

export const SnapshotStatus = z.enum(['succeeded', 'failed', 'skipped', 'cancelled']);
export type SnapshotStatus = z.infer<typeof SnapshotStatus>;

/** A node's final result, written once before its job completes and never changed. */
export const NodeSnapshot = z.object({
  status: SnapshotStatus,
  output: z.unknown().optional(),
  error: NodeErrorData.optional(),
  /** Executions of the tool that led to this snapshot (0 for skipped nodes). */
  attempts: z.number().int().nonnegative(),
  startedAt: z.string().optional(),
  finishedAt: z.string(),
  durationMs: z.number().nonnegative(),
  /** `host/pid` of the worker process that wrote it. */
  worker: z.string().optional(),
});
export type NodeSnapshot = z.infer<typeof NodeSnapshot>;

/** Where a node stands before its snapshot exists. */
export const LiveNodeState = z.object({
  status: z.enum(['queued', 'running']),
  startedAt: z.string().optional(),
  attempt: z.number().int().positive().optional(),
});
export type LiveNodeState = z.infer<typeof LiveNodeState>;

export type NodeView = (NodeSnapshot | LiveNodeState | { status: 'pending' }) & { id: string };

/** How a run failed or why it stopped. */
export const RunError = z.object({
  code: z.string(),
  message: z.string(),
  nodeId: z.string().optional(),
  cause: NodeErrorData.optional(),
});
export type RunError = z.infer<typeof RunError>;

/** What the API returns for a run. */
export interface RunDocument {
  runId: string;
  status: RunStatus;
  createdAt: string;
  startedAt: string | null;
  /** Set once the run has settled: its outcome is decided and every node is final. */
  finishedAt: string | null;
  graph: Graph;
  input: unknown;
  timeoutSeconds: number;
  metadata: Record<string, unknown> | null;
  nodes: Record<string, NodeView>;
  /** Sink node outputs keyed by node id, once the run succeeded. */
  output: Record<string, unknown> | null;
  error: RunError | null;
}
