/**
 * The BullMQ operations of a run, beside the catalog that names its jobs: enqueue a run's root job,
 * its node jobs and its deadline job, start a child run's root under its parent's job, and wake a
 * run's parked node jobs. Every job id derives from run, node and generation, so each of these is
 * safe to repeat.
 */
import { Job, type Queue } from 'bullmq';
import { executionOf, type ExecutableNode } from '../nodes/index.js';
import { maxRetries, type RetryTable } from '../policy/retry-policy.js';
import type { RunStore } from '../state/run-store.js';
import {
  DeadlineJobData,
  JOB,
  deadlineJobId,
  nodeJobId,
  runJobId,
  type NodeJobData,
  type RunJobData,
} from './catalog.js';
import { keepJobs, type JobRetention } from './retention.js';
import { traceCarrier } from '../telemetry/tracing.js';

/** The queues a run's jobs go to: root and deadline jobs to `plan`, node jobs to the node queue. */
export interface RunQueues {
  readonly plan: Queue;
  /** The `tool` pool's queue: node jobs of every kind. */
  readonly node: Queue;
  readonly retention: JobRetention;
}

/** The BullMQ backoff type every node job uses; its delay is computed by the node executor. */
export const BACKOFF_TYPE = 'tetraloop';

const ROOT_JOB_ATTEMPTS = { attempts: 5, backoff: { type: 'exponential', delay: 1000 } } as const;

/** Adds the root job of a run's generation to the plan queue (a no-op when it exists). */
export async function enqueueRunRoot(queues: RunQueues, runId: string, generation: number): Promise<void> {
  await queues.plan.add(
    JOB.run,
    { runId, generation, step: 'start', ...traceCarrier() } satisfies RunJobData,
    {
      jobId: runJobId(runId, generation),
      ...ROOT_JOB_ATTEMPTS,
      ...keepJobs(queues.retention),
    },
  );
}

/**
 * Promotes a run's root job if it is parked in the delayed set (a run waiting for a running slot
 * of its tenant), so a cancel settles it now instead of at its next look.
 */
export async function wakeRunRoot(
  queues: Pick<RunQueues, 'plan'>,
  runId: string,
  generation: number,
): Promise<void> {
  const job = await Job.fromId(queues.plan, runJobId(runId, generation));
  if (job && (await job.isDelayed())) await job.promote().catch(() => undefined);
}

/**
 * Adds a child run's root job as a child of `parent` (the loop node's job), so the parent waits in
 * waiting-children, holding no slot, until the child run settles.
 */
export async function enqueueChildRunRoot(queues: RunQueues, runId: string, parent: Job): Promise<void> {
  await queues.plan.add(
    JOB.run,
    { runId, generation: 0, step: 'start', ...traceCarrier() } satisfies RunJobData,
    {
      jobId: runJobId(runId),
      parent: { id: parent.id!, queue: parent.queueQualifiedName },
      ...ROOT_JOB_ATTEMPTS,
      // If the child's root job dies for good, the loop still resumes and records the failure.
      ignoreDependencyOnFailure: true,
      ...keepJobs(queues.retention),
    },
  );
}

/** Arms the job that ends a run's generation when its deadline passes. */
export async function enqueueDeadline(
  queues: RunQueues,
  runId: string,
  generation: number,
  deadlineAt: number,
): Promise<void> {
  await queues.plan.add(JOB.deadline, { runId, generation } satisfies DeadlineJobData, {
    jobId: deadlineJobId(runId, generation),
    delay: Math.max(0, deadlineAt - Date.now()),
    removeOnComplete: true,
    removeOnFail: true,
  });
}

/** Disarms a generation's deadline job (the run settled or was replanned). */
export async function removeDeadline(queues: RunQueues, runId: string, generation: number): Promise<void> {
  await queues.plan.remove(deadlineJobId(runId, generation)).catch(() => 0);
}

/**
 * How many attempts a node's job gets: one, plus its retries when its kind retries — or the room a
 * template lesson may ask for (`lessonRetries`), when more. The executor decides whether a failure
 * is retried; this is only BullMQ's ceiling.
 */
export function nodeJobAttempts(node: ExecutableNode, retries: RetryTable, lessonRetries = 0): number {
  const kind = executionOf(node);
  return 1 + (kind.retryable ? Math.max(maxRetries(retries, kind.retry(node)), lessonRetries) : 0);
}

/**
 * Adds node jobs as children of the run's root job. Job ids derive from run, node and generation,
 * so adding a node twice is a no-op; adding them while the completing job is still active keeps
 * the root in waiting-children, so it cannot finish early.
 */
export async function enqueueNodes(
  queues: RunQueues,
  runId: string,
  generation: number,
  /** `priority`: the node's 1–10 (10 first), given to the nodes of a run that prioritizes any. */
  nodes: readonly { id: string; attempts: number; priority?: number }[],
): Promise<void> {
  if (nodes.length === 0) return;
  const parent = { id: runJobId(runId, generation), queue: queues.plan.qualifiedName };
  // The span of what released these nodes (the root job, or the node completing) is their parent.
  const traced = traceCarrier();
  const jobs = nodes.map((node) => ({
    name: JOB.node,
    data: { runId, nodeId: node.id, generation, ...traced } satisfies NodeJobData,
    opts: {
      jobId: nodeJobId(runId, node.id, generation),
      parent,
      attempts: node.attempts,
      // BullMQ serves its lowest number first (and jobs without one before any).
      ...(node.priority !== undefined ? { priority: 11 - node.priority } : {}),
      backoff: { type: BACKOFF_TYPE },
      // A node job that dies for good (stalled too often) must not wedge the run's root job:
      // the root then finalizes and records the node as not completed.
      ignoreDependencyOnFailure: true,
      ...keepJobs(queues.retention),
    },
  }));
  // One ready node (a chain's next hop) is one script call; a pipeline costs more to build.
  const [only] = jobs;
  if (jobs.length === 1 && only) await queues.node.add(only.name, only.data, only.opts);
  else await queues.node.addBulk(jobs);
}

/**
 * Wakes a run's parked node jobs (waiting for a signal, or in retry backoff) once its outcome is
 * decided, so they settle now instead of when their delay runs out.
 */
export async function wakeParkedNodes(
  store: RunStore,
  queues: Pick<RunQueues, 'node'>,
  runId: string,
  statuses: readonly ('waiting' | 'retrying')[] = ['waiting', 'retrying'],
): Promise<void> {
  const [parked, generation] = await Promise.all([
    store.parkedNodes(runId, statuses),
    store.generation(runId),
  ]);
  for (const nodeId of parked) {
    const job = await Job.fromId(queues.node, nodeJobId(runId, nodeId, generation));
    if (job && (await job.isDelayed())) await job.promote().catch(() => undefined);
  }
}
