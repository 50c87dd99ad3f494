/**
 * The BullMQ operations of a run, beside the catalog that names its jobs: enqueue a run's root job,
 * its node jobs and a window's cycle budget job, start a child run's root under its parent's job, and wake a
 * run's parked node jobs. Every job id derives from run, node and generation, so each of these is
 * safe to repeat.
 */
import { Job } from 'bullmq';
import { executionOf, type ExecutableNode } from '../nodes/index.js';
import type { NodeRetry } from '../graph/schema.js';
import { maxRetries, type RetryTable } from '../policy/retry-policy.js';
import type { RunStore } from '../state/runs/run-store.js';
import type { RunReadModel } from '../state/runs/run-read-model.js';
import {
  DeadlineJobData,
  JOB,
  carrierJobId,
  cycleJobId,
  nodeJobId,
  runJobId,
  type NodeJobData,
  type RunJobData,
} from './catalog.js';
import { keepJobs, keepNodeJobs, type JobRetention } from './retention.js';
import type { RunShard } from './loop-queues.js';
import { shardOfRunId } from './queue-shards.js';
import { traceCarrier } from '../telemetry/tracing.js';
import { DEFAULT_TOOL_QUEUE } from '../tools/custom-tool.js';

/**
 * The queues a run's jobs go to: root (and cycle budget) jobs to `plan`, node jobs to the node queue,
 * both of the run's shard.
 */
export interface RunQueues {
  /** Every shard of the run queues, by index (one unless `TETRALOOP_QUEUE_SHARDS`). */
  readonly shards: readonly RunShard[];
  readonly retention: JobRetention;
  /** The shard of a run's jobs. */
  shardOf(runId: string): Promise<RunShard>;
  /** The custom tool queues node jobs may be in now (those of the tools the process knows). */
  toolQueueNames(): readonly string[];
}

/** Most runs whose shard one process remembers (a shard never changes, so forgetting is only a lookup). */
const SHARD_CACHE_MAX = 10_000;

/**
 * Routes runs to shards: with one shard, no lookup; with several, a child run's recorded shard
 * (its parent's), else the hash of its id, remembered per process.
 */
export function runQueuesOf(
  shards: readonly RunShard[],
  retention: JobRetention,
  store: Pick<RunReadModel, 'queueShard'>,
  toolQueueNames: () => readonly string[] = () => [],
): RunQueues {
  if (shards.length === 1) {
    const only = shards[0]!;
    return { shards, retention, toolQueueNames, shardOf: () => Promise.resolve(only) };
  }
  const known = new Map<string, number>();
  return {
    shards,
    retention,
    toolQueueNames,
    async shardOf(runId) {
      let index = known.get(runId);
      if (index === undefined) {
        index = (await store.queueShard(runId)) ?? shardOfRunId(runId, shards.length);
        if (known.size >= SHARD_CACHE_MAX) known.clear();
        known.set(runId, index);
      }
      return shards[index % shards.length]!;
    },
  };
}

/** The index of the shard whose queue holds `job`, or -1. */
export const shardOfJob = (queues: Pick<RunQueues, 'shards'>, job: Job): number =>
  queues.shards.findIndex(
    (s) =>
      s.node.qualifiedName === job.queueQualifiedName ||
      s.plan.qualifiedName === job.queueQualifiedName ||
      [...s.toolQueues.values()].some((q) => q.qualifiedName === job.queueQualifiedName),
  );

/**
 * A node job of a run by its id, in whichever tool queue of the run's shard holds it: the node
 * queue first, then each custom tool queue the process knows.
 */
export async function findNodeJob(
  queues: Pick<RunQueues, 'shardOf' | 'toolQueueNames'>,
  runId: string,
  jobId: string,
): Promise<Job | undefined> {
  const shard = await queues.shardOf(runId);
  for (const queue of [shard.node, ...queues.toolQueueNames().map((q) => shard.toolQueue(q))]) {
    const job = await Job.fromId(queue, jobId);
    if (job) return job;
  }
  return undefined;
}

/** The BullMQ backoff type every node job uses; its delay is computed by the node executor. */
export const BACKOFF_TYPE = 'tetraloop';

const ROOT_JOB_ATTEMPTS = { attempts: 5, backoff: { type: 'exponential', delay: 1000 } } as const;

/** Adds the root job of a run's generation to the plan queue (a no-op when it exists). */
export async function enqueueRunRoot(queues: RunQueues, runId: string, generation: number): Promise<void> {
  const { plan } = await queues.shardOf(runId);
  await plan.add(JOB.run, { runId, generation, step: 'start', ...traceCarrier() } satisfies RunJobData, {
    jobId: runJobId(runId, generation),
    ...ROOT_JOB_ATTEMPTS,
    ...keepJobs(queues.retention),
  });
}

/**
 * Promotes a run's root job if it is parked in the delayed set (a run waiting for a running slot
 * of its tenant), so a cancel settles it now instead of at its next look.
 */
export async function wakeRunRoot(
  queues: Pick<RunQueues, 'shardOf'>,
  runId: string,
  generation: number,
): Promise<void> {
  const job = await Job.fromId((await queues.shardOf(runId)).plan, runJobId(runId, generation));
  if (job && (await job.isDelayed())) await job.promote().catch(() => undefined);
}

/**
 * Adds a child run's root job as a child of `parent` (the loop node's job), so the parent waits in
 * waiting-children, holding no slot, until the child run settles. It goes to the parent's shard:
 * a BullMQ flow lives in one slot (the child run records that shard, see `NewRun.queueShard`).
 */
export async function enqueueChildRunRoot(queues: RunQueues, runId: string, parent: Job): Promise<void> {
  const { plan } = queues.shards[shardOfJob(queues, parent)] ?? (await queues.shardOf(runId));
  await plan.add(JOB.run, { runId, generation: 0, step: 'start', ...traceCarrier() } satisfies RunJobData, {
    jobId: runJobId(runId),
    parent: { id: parent.id!, queue: parent.queueQualifiedName },
    ...ROOT_JOB_ATTEMPTS,
    // If the child's root job dies for good, the loop still resumes and records the failure.
    ignoreDependencyOnFailure: true,
    ...keepJobs(queues.retention),
  });
}

/**
 * Arms the job that hands a window's unstarted nodes back to the planner when its cycle budget
 * runs out (window mode). Left to fire when the window ends first: it then finds its generation
 * gone and does nothing, which costs a window run less than removing it would cost every run.
 */
export async function enqueueCycleBudget(
  queues: RunQueues,
  runId: string,
  generation: number,
  budgetMs: number,
): Promise<void> {
  const { plan } = await queues.shardOf(runId);
  await plan.add(JOB.cycle, { runId, generation } satisfies DeadlineJobData, {
    jobId: cycleJobId(runId, generation),
    delay: budgetMs,
    removeOnComplete: true,
    removeOnFail: true,
  });
}

/**
 * How many attempts a node's job gets: one, plus its retries when its kind retries — or the room a
 * template lesson may ask for (`lessonRetries`), when more. The executor decides whether a failure
 * is retried; this is only BullMQ's ceiling.
 */
export function nodeJobAttempts(
  node: ExecutableNode,
  retries: RetryTable,
  lessonRetries = 0,
  /** The node's retries per class, when more than its own (a custom tool's). */
  retry: NodeRetry | undefined = executionOf(node).retry(node),
): number {
  const kind = executionOf(node);
  return 1 + (kind.retryable ? Math.max(maxRetries(retries, retry), lessonRetries) : 0);
}

export interface NodeToEnqueue {
  readonly id: string;
  /** The tool queue it goes to (a custom tool's); the node queue when absent. */
  readonly queue?: string;
  readonly attempts: number;
  readonly priority?: number;
  readonly delayMs?: number;
  readonly attemptsBefore?: number;
  readonly moved?: boolean;
  readonly carrier?: string;
  /** A carrier job for these nodes (`id` is the first of them): see `NodeJobData.carry`. */
  readonly carry?: readonly string[];
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
  /**
   * `priority`: the node's 1–10 (10 first), given to the nodes of a run that prioritizes any.
   * `delayMs`, `attemptsBefore`, `moved`: a handed-off node moving to a job of its own.
   * `carry`: a carrier job running these nodes side by side.
   */
  nodes: readonly NodeToEnqueue[],
): Promise<void> {
  if (nodes.length === 0) return;
  const shard = await queues.shardOf(runId);
  const parent = { id: runJobId(runId, generation), queue: shard.plan.qualifiedName };
  // The span of what released these nodes (the root job, or the node completing) is their parent.
  const traced = traceCarrier();
  const jobs = nodes.map((node) => ({
    name: node.carry ? JOB.carry : JOB.node,
    data: {
      runId,
      nodeId: node.id,
      generation,
      ...(node.attemptsBefore ? { attemptsBefore: node.attemptsBefore } : {}),
      ...(node.moved ? { moved: true } : {}),
      ...(node.carrier ? { carrier: node.carrier } : {}),
      ...(node.carry ? { carry: [...node.carry] } : {}),
      ...traced,
    } satisfies NodeJobData,
    opts: {
      jobId: node.carry ? carrierJobId(runId, node.id, generation) : nodeJobId(runId, node.id, generation),
      parent,
      attempts: node.attempts,
      ...(node.delayMs ? { delay: node.delayMs } : {}),
      // BullMQ serves its lowest number first (and jobs without one before any).
      ...(node.priority !== undefined ? { priority: 11 - node.priority } : {}),
      backoff: { type: BACKOFF_TYPE },
      // A node job that dies for good (stalled too often) must not wedge the run's root job:
      // the root then finalizes and records the node as not completed.
      ignoreDependencyOnFailure: true,
      ...keepNodeJobs(queues.retention),
    },
  }));
  // One ready node (a chain's next hop) is one script call; a pipeline costs more to build.
  const [only] = jobs;
  if (jobs.length === 1 && only) {
    await shard.toolQueue(nodes[0]!.queue ?? DEFAULT_TOOL_QUEUE).add(only.name, only.data, only.opts);
    return;
  }
  // Custom tools' nodes go to their tools' queues; each queue takes its jobs in one call.
  const byQueue = new Map<string, typeof jobs>();
  jobs.forEach((job, i) => {
    const queue = nodes[i]!.queue ?? DEFAULT_TOOL_QUEUE;
    byQueue.set(queue, [...(byQueue.get(queue) ?? []), job]);
  });
  await Promise.all([...byQueue].map(([queue, batch]) => shard.toolQueue(queue).addBulk(batch)));
}

/**
 * Wakes a run's parked node jobs (waiting for a signal, or in retry backoff) once its outcome is
 * decided, so they settle now instead of when their delay runs out.
 */
export async function wakeParkedNodes(
  store: RunStore,
  queues: Pick<RunQueues, 'shardOf' | 'toolQueueNames'>,
  runId: string,
  statuses: readonly ('waiting' | 'retrying')[] = ['waiting', 'retrying'],
): Promise<void> {
  const [parked, generation] = await Promise.all([
    store.parkedNodes(runId, statuses),
    store.generation(runId),
  ]);
  for (const nodeId of parked) {
    const job = await findNodeJob(queues, runId, nodeJobId(runId, nodeId, generation));
    if (job && (await job.isDelayed())) await job.promote().catch(() => undefined);
  }
}

export interface ItemToEnqueue {
  /** The item's node id, `<mapId>[<index>]`. */
  readonly id: string;
  readonly item: unknown;
  /** The tool queue it goes to (a custom tool's); the node queue when absent. */
  readonly queue?: string;
  readonly attempts: number;
}

/**
 * Adds a map's item jobs as children of the map's own job (in the node queue of the run's shard),
 * so the map waits in waiting-children, holding no slot, until its last item settles. Job ids
 * derive from run, item and generation, so adding an item twice is a no-op.
 */
export async function enqueueItems(
  queues: RunQueues,
  runId: string,
  generation: number,
  mapId: string,
  items: readonly ItemToEnqueue[],
): Promise<void> {
  if (items.length === 0) return;
  const shard = await queues.shardOf(runId);
  const parent = {
    id: nodeJobId(runId, mapId, generation),
    queue: shard.toolQueue(DEFAULT_TOOL_QUEUE).qualifiedName,
  };
  const traced = traceCarrier();
  const byQueue = new Map<string, Parameters<RunShard['node']['addBulk']>[0]>();
  for (const item of items) {
    const queue = item.queue ?? DEFAULT_TOOL_QUEUE;
    const job = {
      name: JOB.node,
      data: { runId, nodeId: item.id, generation, item: item.item, ...traced } satisfies NodeJobData,
      opts: {
        jobId: nodeJobId(runId, item.id, generation),
        parent,
        attempts: item.attempts,
        backoff: { type: BACKOFF_TYPE },
        // An item whose job dies for good must not wedge its map: the map settles without it.
        ignoreDependencyOnFailure: true,
        ...keepNodeJobs(queues.retention),
      },
    };
    byQueue.set(queue, [...(byQueue.get(queue) ?? []), job]);
  }
  await Promise.all(
    [...byQueue].map(([queue, batch]) =>
      batch.length === 1
        ? shard.toolQueue(queue).add(batch[0]!.name, batch[0]!.data, batch[0]!.opts)
        : shard.toolQueue(queue).addBulk(batch),
    ),
  );
}
