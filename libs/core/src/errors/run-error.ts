/**
 * Why a run failed or stopped, as plain data with a typed code, and the mappings into it: a node's
 * failure becomes the run's error here and nowhere else. Pure: no I/O.
 */
import { z } from 'zod';
import { NodeErrorData, type ErrorCode } from './node-error.js';

export const RUN_ERROR_CODES = [
  /** A node failed after its retries and its failure ends the run. */
  'node_failed',
  /** A node job died for good (stalled too often) without writing its snapshot. */
  'node_lost',
  'budget_exhausted',
  'suspected_loop',
  'timed_out',
  'cancelled',
  /** A child run (a loop iteration over a nested graph) whose parent run ended. */
  'parent_ended',
  /** The planner could not be asked, after its own retries. */
  'plan_failed',
  /** The planner's graph (or its repair) failed validation. */
  'plan_rejected',
  /** Why a session run was handed back to the planner: its session's environment moved. */
  'environment_changed',
  /** A window-mode run used its last window without the planner saying its goal was reached. */
  'window_limit',
] as const;
export type RunErrorCode = (typeof RUN_ERROR_CODES)[number];

/** The status a run ends with for each error code. A new code does not compile until it is placed here. */
export const RUN_ERROR_STATUS: Readonly<Record<RunErrorCode, 'failed' | 'cancelled' | 'timed_out'>> = {
  node_failed: 'failed',
  node_lost: 'failed',
  budget_exhausted: 'failed',
  suspected_loop: 'failed',
  timed_out: 'timed_out',
  cancelled: 'cancelled',
  parent_ended: 'cancelled',
  plan_failed: 'failed',
  plan_rejected: 'failed',
  environment_changed: 'failed',
  window_limit: 'failed',
};

/** How a run failed or why it stopped. */
export const RunError = z.object({
  code: z.enum(RUN_ERROR_CODES),
  message: z.string(),
  nodeId: z.string().optional(),
  cause: NodeErrorData.optional(),
  /** Why a plan was rejected: every problem with its path. */
  issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
});
export type RunError = z.infer<typeof RunError>;

/** The run error a node failure of each class becomes. Exhaustive over the node error codes. */
function runCodeOf(code: ErrorCode): RunErrorCode {
  switch (code) {
    case 'budget_exhausted':
    case 'suspected_loop':
      return code;
    case 'network':
    case 'timeout':
    case 'rate_limited':
    case 'server':
    case 'auth':
    case 'validation':
    case 'aborted':
    case 'blocked_by_lesson':
    case 'internal':
      return 'node_failed';
  }
}

/**
 * The run's error when node `nodeId` fails with `error` and its failure ends the run (a snapshot
 * without an error, which no harness writes, still names the node).
 */
export function runErrorForNode(nodeId: string, error: NodeErrorData | undefined): RunError {
  if (!error) return { code: 'node_failed', message: `node "${nodeId}" failed: unknown error`, nodeId };
  return {
    code: runCodeOf(error.code),
    message: `node "${nodeId}" failed: ${error.message}`,
    nodeId,
    cause: error,
  };
}

/**
 * What hands a task run back to its planner when a planned node expired unstarted (skipped or
 * failed for its TTL): the node and when it expired, as a `timeout` marked `expired`.
 */
export function expiryRunError(nodeId: string, expiredAt: string): RunError {
  return {
    code: 'node_failed',
    message: `node "${nodeId}" was not started before it expired at ${expiredAt}`,
    nodeId,
    cause: { code: 'timeout', message: `not started before it expired at ${expiredAt}`, expired: true },
  };
}

/**
 * Whether a node failure of this class hands a task run back to the planner rather than ending it:
 * a spent budget or a suspected loop is a plan problem, not a tool problem. Money is the exception:
 * a replan does not give it back (spending survives replans), so another plan would only pay a
 * planner call to fail again. A call refused by a hard lesson voids the plan: the planner is
 * checked against the lessons in effect, so the lesson came after the plan was made, and a new
 * plan made under it goes around the service (a fixed graph, with no planner, fails with it). A
 * node that expired unstarted (`onExpire: "fail"`) is handed back too: the planner set its TTL and
 * is told it ran out (`expiryRunError`).
 */
export const failureReplans = (error: NodeErrorData): boolean =>
  (error.code === 'budget_exhausted' && error.budget !== 'costUsd' && error.budget !== 'dailyCostUsd') ||
  error.code === 'suspected_loop' ||
  error.code === 'blocked_by_lesson' ||
  (error.code === 'timeout' && error.expired === true);

export const deadlineError = (timeoutSeconds: number): RunError => ({
  code: 'timed_out',
  message: `the run passed its ${timeoutSeconds} s deadline`,
});

export const cancelledError = (reason: string): RunError => ({ code: 'cancelled', message: reason });
