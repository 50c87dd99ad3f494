/**
 * The run's root job, in the plan queue (L2). First pass: start the run and enqueue its source
 * nodes as children, then park in waiting-children. Second pass, once every child is done:
 * decide the outcome from the snapshots and settle the run.
 */
import { WaitingChildrenError, type Job } from 'bullmq';
import { RunJobData } from '../queues/catalog.js';
import type { NodeSnapshot, RunError, RunStatus } from '../runs/run-model.js';
import { enqueueNodes, type Engine } from './engine.js';
import type { CompiledPlan } from './plan-cache.js';

export interface RunJobResult {
  readonly status: RunStatus | 'gone';
}

export async function executeRunJob(
  engine: Engine,
  job: Job,
  token: string | undefined,
): Promise<RunJobResult> {
  const data = RunJobData.parse(job.data);
  const plan = await engine.plans.get(data.runId);
  if (!plan) return { status: 'gone' };

  if (data.step === 'start') {
    const status = await engine.store.start(plan.runId, plan.topology.sources, new Date().toISOString());
    if (status === 'running') await enqueueNodes(engine, plan, plan.topology.sources);
    await job.updateData({ runId: plan.runId, step: 'finalize' } satisfies RunJobData);
    if (status === 'running' && token !== undefined && (await job.moveToWaitingChildren(token))) {
      throw new WaitingChildrenError();
    }
  }
  return { status: await finalize(engine, plan) };
}

/** Decides the outcome (if nothing decided it yet) and fills in the nodes that never ran. */
async function finalize(engine: Engine, plan: CompiledPlan): Promise<RunStatus> {
  const { store } = engine;
  const now = new Date().toISOString();
  const snapshots = await store.snapshots(plan.runId);
  let status = await store.status(plan.runId);
  if (status === 'running' || status === 'queued') {
    const failure = firstFailure(plan, snapshots);
    const incomplete = [...plan.nodes.keys()].filter((id) => !snapshots.has(id));
    const error: RunError | null = failure
      ? failure
      : incomplete.length > 0
        ? { code: 'node_lost', message: `nodes never completed: ${incomplete.join(', ')}` }
        : null;
    await store.decide(plan.runId, error ? 'failed' : 'succeeded', error, now);
    status = await store.status(plan.runId);
  }
  const fill = new Map<string, NodeSnapshot>();
  for (const id of plan.nodes.keys()) {
    if (!snapshots.has(id)) {
      fill.set(id, {
        status: status === 'cancelled' ? 'cancelled' : 'skipped',
        attempts: 0,
        finishedAt: now,
        durationMs: 0,
      });
    }
  }
  const output =
    status === 'succeeded'
      ? Object.fromEntries(plan.topology.sinks.map((id) => [id, snapshots.get(id)?.output ?? null]))
      : null;
  await store.settle(plan.runId, fill, output, now);
  engine.logger.info({ runId: plan.runId, status }, 'run settled');
  return status ?? 'failed';
}

function firstFailure(plan: CompiledPlan, snapshots: ReadonlyMap<string, NodeSnapshot>): RunError | null {
  for (const [id, node] of plan.nodes) {
    const s = snapshots.get(id);
    if (s?.status === 'failed' && node.onError !== 'continue') {
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
