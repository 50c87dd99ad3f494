/** The dependency bundle shared by the run coordinator and the node executor. */
import type { Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { BackoffPolicy, RetryTable } from '../policy/retry-policy.js';
import { JOB, nodeJobId, type NodeJobData } from '../queues/catalog.js';
import { keepJobs, type JobRetention } from '../queues/retention.js';
import type { RunStore } from '../state/run-store.js';
import { maxRetries } from '../policy/retry-policy.js';
import type { CompiledPlan, PlanCache } from './plan-cache.js';

export interface Engine {
  readonly store: RunStore;
  readonly plans: PlanCache;
  /** Where node jobs go. */
  readonly toolQueue: Queue<NodeJobData>;
  /** Qualified name (`prefix:plan`) of the queue holding run root jobs, the node jobs' parent. */
  readonly planQueueQualifiedName: string;
  readonly retention: JobRetention;
  readonly retries: RetryTable;
  readonly backoff: BackoffPolicy;
  readonly logger: Logger;
}

/** The BullMQ backoff type every node job uses; its delay is computed by the node executor. */
export const BACKOFF_TYPE = 'tetraloop';

/**
 * Adds node jobs as children of the run's root job. Job ids derive from run and node, so adding
 * a node twice is a no-op; adding them while the completing job is still active keeps the root
 * in waiting-children, so it cannot finish early.
 */
export async function enqueueNodes(
  engine: Engine,
  plan: CompiledPlan,
  nodeIds: readonly string[],
): Promise<void> {
  if (nodeIds.length === 0) return;
  const parent = { id: plan.runId, queue: engine.planQueueQualifiedName };
  await engine.toolQueue.addBulk(
    nodeIds.map((nodeId) => ({
      name: JOB.node,
      data: { runId: plan.runId, nodeId },
      opts: {
        jobId: nodeJobId(plan.runId, nodeId),
        parent,
        attempts: 1 + maxRetries(engine.retries, plan.nodes.get(nodeId)?.retry),
        backoff: { type: BACKOFF_TYPE },
        // A node job that dies for good (stalled too often) must not wedge the run's root job:
        // the root then finalizes and records the node as not completed.
        ignoreDependencyOnFailure: true,
        ...keepJobs(engine.retention),
      },
    })),
  );
}
