/**
 * The job catalog: each loop's queue, its job names and their zod payloads. Handlers and
 * producers derive their types from here.
 */
import { z } from 'zod';

/** The four loops, each its own queue and worker pool. */
export const POOLS = ['sense', 'plan', 'tool', 'reflect'] as const;
export type Pool = (typeof POOLS)[number];

/** Root job of a run, in the `plan` queue; its children are the node jobs. */
export const RunJobData = z.object({
  runId: z.string(),
  /** `start` until the run's source nodes are enqueued, then `finalize`. */
  step: z.enum(['start', 'finalize']).default('start'),
});
export type RunJobData = z.infer<typeof RunJobData>;

/** One node of one run, in the `tool` queue. */
export const NodeJobData = z.object({ runId: z.string(), nodeId: z.string() });
export type NodeJobData = z.infer<typeof NodeJobData>;

export const JOB = { run: 'run', node: 'node' } as const;

/** Job id of a run's root job. */
export const runJobId = (runId: string): string => runId;
/** Job id of a node job: derived from run and node so a node is never enqueued twice. */
export const nodeJobId = (runId: string, nodeId: string): string => `${runId}.${nodeId}`;

/** Which pool executes a node kind. */
export const poolForKind = (_kind: 'tool'): Pool => 'tool';
