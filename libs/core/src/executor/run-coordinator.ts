/**
 * The run's root job, in the plan queue (L2). First pass: start the run, enqueue the nodes that
 * are ready (the sources, or after a resume the nodes whose dependencies all completed), arm the
 * deadline, then park in waiting-children. Second pass, once every child is done: decide the
 * outcome from the snapshots and settle the run. A deadline job ends a run that runs too long.
 */
import { WaitingChildrenError, type Job } from 'bullmq';
import {
  DeadlineJobData,
  JOB,
  RunJobData,
  deadlineJobId,
  type RunJobData as RunJobInput,
} from '../queues/catalog.js';
import type { NodeSnapshot, RunError, RunStatus } from '../runs/run-model.js';
import { enqueueNodes, wakeParkedNodes, type Engine } from './engine.js';
import { continuesOnFailure, deadlineError } from './node-executor.js';
import { nowIso } from './node-context.js';
import type { CompiledPlan } from './plan-cache.js';

export interface RunJobResult {
  readonly status: RunStatus | 'gone' | 'stale';
}

/** Processor of the plan queue: root jobs and deadline jobs. */
export async function executePlanJob(
  engine: Engine,
  job: Job,
  token: string | undefined,
): Promise<RunJobResult> {
  if (job.name === JOB.deadline) return fireDeadline(engine, job);
  return executeRunJob(engine, job, token);
}

async function executeRunJob(engine: Engine, job: Job, token: string | undefined): Promise<RunJobResult> {
  const data = RunJobData.parse(job.data);
  const plan = await engine.plans.get(data.runId);
  if (!plan) return { status: 'gone' };

  if (data.step === 'start') {
    const snapshots =
      data.generation === 0 ? new Map<string, NodeSnapshot>() : await engine.store.snapshots(plan.runId);
    const ready = readyNodes(plan, snapshots);
    const deadlineAt = Date.now() + plan.timeoutSeconds * 1000;
    const status = await engine.store.start(plan.runId, data.generation, ready, deadlineAt, nowIso());
    if (status === 'stale') return { status: 'stale' };
    if (status === 'running') {
      await engine.planQueue.add(
        JOB.deadline,
        { runId: plan.runId, generation: data.generation } satisfies DeadlineJobData,
        {
          jobId: deadlineJobId(plan.runId, data.generation),
          delay: Math.max(0, deadlineAt - Date.now()),
          removeOnComplete: true,
          removeOnFail: true,
        },
      );
      await enqueueNodes(engine, plan, ready, data.generation);
    }
    await job.updateData({ ...data, step: 'finalize' } satisfies RunJobInput);
    if (status === 'running' && token !== undefined && (await job.moveToWaitingChildren(token))) {
      throw new WaitingChildrenError();
    }
  }
  return { status: await finalize(engine, plan, data.generation) };
}

/** Nodes without a snapshot whose dependencies all completed in a way that releases them. */
function readyNodes(plan: CompiledPlan, snapshots: ReadonlyMap<string, NodeSnapshot>): string[] {
  const releases = (id: string): boolean => {
    const s = snapshots.get(id);
    const node = plan.nodes.get(id);
    return (
      s?.status === 'succeeded' || (s?.status === 'failed' && node !== undefined && continuesOnFailure(node))
    );
  };
  return plan.topology.ids.filter(
    (id) => !snapshots.has(id) && (plan.topology.parents.get(id) ?? []).every(releases),
  );
}

async function fireDeadline(engine: Engine, job: Job): Promise<RunJobResult> {
  const data = DeadlineJobData.parse(job.data);
  const plan = await engine.plans.get(data.runId);
  if (!plan) return { status: 'gone' };
  const decided = await engine.store.decide(
    plan.runId,
    'timed_out',
    deadlineError(plan.timeoutSeconds),
    nowIso(),
    data.generation,
  );
  if (decided) {
    engine.logger.info({ runId: plan.runId }, 'run timed out');
    await wakeParkedNodes(engine.store, engine.toolQueue, plan.runId);
  }
  return { status: (await engine.store.status(plan.runId)) ?? 'gone' };
}

/** Decides the outcome (if nothing decided it yet) and fills in the nodes that never ran. */
async function finalize(engine: Engine, plan: CompiledPlan, generation: number): Promise<RunStatus> {
  const { store } = engine;
  const now = nowIso();
  const snapshots = await store.snapshots(plan.runId);
  let status = await store.status(plan.runId);
  if (status === 'running' || status === 'queued') {
    const failure = firstFailure(plan, snapshots);
    const incomplete = [...plan.nodes.keys()].filter((id) => !snapshots.has(id));
    const error: RunError | null =
      failure ??
      (incomplete.length > 0
        ? { code: 'node_lost', message: `nodes never completed: ${incomplete.join(', ')}` }
        : null);
    await store.decide(plan.runId, error ? 'failed' : 'succeeded', error, now, generation);
    status = await store.status(plan.runId);
  }
  const fill = new Map<string, NodeSnapshot>();
  for (const id of plan.nodes.keys()) {
    if (!snapshots.has(id)) {
      fill.set(id, {
        status: status === 'cancelled' ? 'cancelled' : 'skipped',
        attempts: [],
        finishedAt: now,
        durationMs: 0,
      });
    }
  }
  const output =
    status === 'succeeded'
      ? Object.fromEntries(plan.topology.sinks.map((id) => [id, snapshots.get(id)?.output ?? null]))
      : null;
  const error = status === 'succeeded' ? null : await store.error(plan.runId);
  const final = { status: status ?? 'failed', error, generation };
  if (await store.settle(plan.runId, generation, fill, output, final, now)) {
    await engine.planQueue.remove(deadlineJobId(plan.runId, generation)).catch(() => 0);
    engine.logger.info({ runId: plan.runId, status }, 'run settled');
  }
  return status ?? 'failed';
}

function firstFailure(plan: CompiledPlan, snapshots: ReadonlyMap<string, NodeSnapshot>): RunError | null {
  for (const [id, node] of plan.nodes) {
    const s = snapshots.get(id);
    if (s?.status === 'failed' && !continuesOnFailure(node)) {
      return {
        code: 'node_failed',
        message: `node "${id}" failed: ${s.error?.message ?? 'unknown error'}`,
        nodeId: id,
        ...(s.error ? { cause: s.error } : {}),
      };
    }
  }
  return null;
}
