/**
 * Child runs: a loop iteration over a nested graph runs as a run of its own, linked to the loop
 * node's job as a BullMQ child, so the loop job waits in waiting-children (holding no slot) and
 * resumes when the child run settles. The child run's id derives from parent, node, generation
 * and iteration, so a redelivered loop job finds the child it already started.
 */
import type { Job } from 'bullmq';
import { expandGraph } from '../compile/expand.js';
import { nowIso } from '../domain/clock.js';
import type { Budget } from '../domain/run-model.js';
import type { GraphOf } from '../graph/schema.js';
import { buildTopology } from '../graph/topology.js';
import type { Graph } from '../nodes/index.js';
import { enqueueChildRunRoot, shardOfJob } from '../queues/run-jobs.js';
import type { ExecutorDeps } from './deps.js';

export interface ChildRunSpec {
  readonly runId: string;
  readonly parentRunId: string;
  readonly parentNodeId: string;
  /** The parent's agent and tenant, which the child run keeps. */
  readonly agentId: string;
  readonly tenant: string;
  /** The parent's priority, which the child run keeps. */
  readonly priority?: number;
  readonly iteration: number;
  /** Validated with its parent graph. */
  readonly graph: GraphOf;
  readonly input: unknown;
  readonly timeoutSeconds: number;
  readonly budget: Budget;
}

/** Creates the child run (once) and enqueues its root job as a child of `parentJob`. */
export async function startChildRun(
  deps: Pick<ExecutorDeps, 'store' | 'queues'>,
  spec: ChildRunSpec,
  parentJob: Job,
): Promise<void> {
  const plan = expandGraph(spec.graph as Graph);
  const topology = buildTopology(
    plan.nodes.map((n) => n.id),
    plan.edges,
  );
  // The child's jobs join the parent's BullMQ flow, so they go to the parent's shard, recorded
  // for whoever routes the child's jobs later.
  const shard = deps.queues.shards.length > 1 ? shardOfJob(deps.queues, parentJob) : -1;
  await deps.store.create({
    runId: spec.runId,
    ...(shard >= 0 ? { queueShard: shard } : {}),
    graph: spec.graph as Graph,
    plan,
    agentId: spec.agentId,
    tenant: spec.tenant,
    parentRunId: spec.parentRunId,
    input: spec.input,
    timeoutSeconds: spec.timeoutSeconds,
    budget: spec.budget,
    metadata: { parentRunId: spec.parentRunId, parentNodeId: spec.parentNodeId, iteration: spec.iteration },
    ...(spec.priority !== undefined ? { priority: spec.priority } : {}),
    createdAt: nowIso(),
    pending: new Map(topology.ids.map((id) => [id, topology.parents.get(id)?.length ?? 0])),
  });
  await deps.store.addChild(spec.parentRunId, spec.runId);
  await enqueueChildRunRoot(deps.queues, spec.runId, parentJob);
}
