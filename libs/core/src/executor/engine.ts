/** The dependency bundle shared by the run coordinator and the node executor. */
import { Job, type Queue } from 'bullmq';
import type { Logger } from 'pino';
import type { NodeErrorData } from '../errors/node-error.js';
import { maxRetries, type BackoffPolicy, type RetryTable } from '../policy/retry-policy.js';
import type { GraphLimits } from '../graph/validate.js';
import type { HookRegistry } from '../hooks/hook-registry.js';
import type { ModelClient } from '../model/model-client.js';
import { JOB, nodeJobId, runJobId, type NodeJobData, type RunJobData } from '../queues/catalog.js';
import type { ToolRegistry } from '../tools/tool.js';
import { keepJobs, type JobRetention } from '../queues/retention.js';
import type { RunStore } from '../state/run-store.js';
import type { CompiledPlan, PlanCache } from './plan-cache.js';
import type { RunAborts } from './run-aborts.js';

/** Called before an `auth` failure is retried, so credentials can be renewed. */
export type CredentialRefreshHook = (context: {
  runId: string;
  nodeId: string;
  tool: string;
  error: NodeErrorData;
}) => Promise<void>;

export interface EngineHooks {
  readonly refreshCredentials?: CredentialRefreshHook;
  /** Plugin hooks (before/after tool calls, session hooks). */
  readonly registry?: HookRegistry;
}

/** What the plan loop needs to plan tasks; absent in processes that only execute nodes. */
export interface PlanningDeps {
  /** Absent when no model is configured (task runs are then refused at the API). */
  readonly model?: ModelClient;
  readonly tools: ToolRegistry;
  readonly limits: GraphLimits;
  readonly allowedTools: (agentId: string) => ReadonlySet<string>;
  readonly workspaceDir: string;
  readonly workspaceFileChars: number;
}

/** What the run loop tells the session layer, when runs belong to session lanes. */
export interface SessionHooks {
  /** A run settled: reply in its session and move the lane on. */
  onRunSettled(runId: string): Promise<void>;
  /** The current version of a session's environment. */
  environmentVersion(sessionKey: string): Promise<number>;
}

export interface Engine {
  readonly store: RunStore;
  readonly plans: PlanCache;
  /** Where node jobs go. */
  readonly toolQueue: Queue;
  /** Where root and deadline jobs go. */
  readonly planQueue: Queue;
  readonly retention: JobRetention;
  readonly retries: RetryTable;
  readonly backoff: BackoffPolicy;
  /** A node executed more often than this in one run is stopped as a suspected loop. @defaultValue 5 */
  readonly maxNodeExecutions: number;
  readonly hooks: EngineHooks;
  readonly planning?: PlanningDeps;
  readonly sessions?: SessionHooks;
  /** Aborts this process's planner calls for a run that is cancelled, fails or times out meanwhile. */
  readonly aborts?: RunAborts;
  readonly logger: Logger;
}

const ROOT_JOB_ATTEMPTS = { attempts: 5, backoff: { type: 'exponential', delay: 1000 } } as const;

/** Adds the root job of a run's generation to the plan queue (a no-op when it exists). */
export async function enqueueRunRoot(
  planQueue: Queue,
  retention: JobRetention,
  runId: string,
  generation: number,
): Promise<void> {
  await planQueue.add(JOB.run, { runId, generation, step: 'start' } satisfies RunJobData, {
    jobId: runJobId(runId, generation),
    ...ROOT_JOB_ATTEMPTS,
    ...keepJobs(retention),
  });
}

/** The BullMQ backoff type every node job uses; its delay is computed by the node executor. */
export const BACKOFF_TYPE = 'tetraloop';

/** An `auth` failure is retried once, and only when something can refresh the credentials. */
export function retryTableFor(engine: Engine): RetryTable {
  return { ...engine.retries, auth: engine.hooks.refreshCredentials ? 1 : 0 };
}

/**
 * Wakes a run's parked node jobs (waiting for a signal, or in retry backoff) once its outcome is
 * decided, so they settle now instead of when their delay runs out.
 */
export async function wakeParkedNodes(
  store: RunStore,
  toolQueue: Queue,
  runId: string,
  statuses: readonly ('waiting' | 'retrying')[] = ['waiting', 'retrying'],
): Promise<void> {
  const [parked, generation] = await Promise.all([
    store.parkedNodes(runId, statuses),
    store.generation(runId),
  ]);
  for (const nodeId of parked) {
    const job = await Job.fromId(toolQueue, nodeJobId(runId, nodeId, generation));
    if (job && (await job.isDelayed())) await job.promote().catch(() => undefined);
  }
}

/**
 * Adds node jobs as children of the run's root job. Job ids derive from run, node and generation,
 * so adding a node twice is a no-op; adding them while the completing job is still active keeps
 * the root in waiting-children, so it cannot finish early.
 */
export async function enqueueNodes(
  engine: Engine,
  plan: CompiledPlan,
  nodeIds: readonly string[],
  generation: number,
): Promise<void> {
  if (nodeIds.length === 0) return;
  const parent = { id: runJobId(plan.runId, generation), queue: engine.planQueue.qualifiedName };
  const table = retryTableFor(engine);
  const jobs = nodeIds.map((nodeId) => {
    const node = plan.nodes.get(nodeId);
    return {
      name: JOB.node,
      data: { runId: plan.runId, nodeId, generation } satisfies NodeJobData,
      opts: {
        jobId: nodeJobId(plan.runId, nodeId, generation),
        parent,
        attempts: 1 + (node && node.kind !== 'wait' ? maxRetries(table, node.retry) : 0),
        backoff: { type: BACKOFF_TYPE },
        // A node job that dies for good (stalled too often) must not wedge the run's root job:
        // the root then finalizes and records the node as not completed.
        ignoreDependencyOnFailure: true,
        ...keepJobs(engine.retention),
      },
    };
  });
  // One ready node (a chain's next hop) is one script call; a pipeline costs more to build.
  const [only] = jobs;
  if (jobs.length === 1 && only) await engine.toolQueue.add(only.name, only.data, only.opts);
  else await engine.toolQueue.addBulk(jobs);
}
