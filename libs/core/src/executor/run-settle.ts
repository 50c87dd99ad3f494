/**
 * Settling a run once no node of its generation can run any more: deciding its outcome from the
 * snapshots (unless something decided it first), filling in the nodes that never ran, closing it,
 * and what follows once (memory, the `agent_end` hook, metrics) and on every pass (the tenant's
 * running slot, the session's lane, webhooks, the archive).
 *
 * Two callers: the root job's finalize pass, once every node job of the generation has finished;
 * and the node job whose completion made every node of the plan succeed (`complete-node.lua`
 * decides the run then), which settles it at once rather than after the root job's next pass, does
 * what follows and marks it done. The root job's pass still follows and finds the run settled: it
 * then only archives it, or, unmarked (the node's job stopped after settling), does what follows
 * again; if the node's job stopped between the decision and the settle, that pass settles it.
 */
import type { NodeSnapshot, RunStatus } from '../domain/run-model.js';
import { RUN_ERROR_STATUS, runErrorForNode, type RunError } from '../errors/run-error.js';
import { executionOf } from '../nodes/index.js';
import { forgetCachedPlan } from '../planning/plan-run.js';
import type { OutcomeState, SettleFacts } from '../state/runs/run-read-model.js';
import { metrics } from '../telemetry/metrics.js';
import { recordSettledRun } from '../telemetry/run-span.js';
import { nowIso } from '../domain/clock.js';
import { retainBlobs } from './blob-reads.js';
import type { ExecutorDeps } from './deps.js';
import { dropNodeSlots } from './node-slots.js';
import type { CompiledPlan } from './plan-cache.js';
import { releaseRun } from './run-admission.js';

/**
 * `agent_end` for a run that settled outside a session (a session run's fires once its reply is
 * written), once: where the run settles; not for a child run.
 */
export async function agentEnded(deps: ExecutorDeps, runId: string, status: RunStatus | null): Promise<void> {
  const hooks = deps.hooks.registry;
  if (!hooks?.has('agent_end') || status === null) return;
  const header = await deps.store.header(runId);
  if (header.sessionKey || header.parentRunId) return;
  await hooks.emit('agent_end', { runId, status, agentId: header.agentId });
}

function observeSettled(status: RunStatus, createdAt: string | null): void {
  metrics.runsFinished.inc({ status });
  if (createdAt) metrics.runDuration.observe({ status }, (Date.now() - Date.parse(createdAt)) / 1000);
}

/**
 * The node job whose completion decided its run — every node of the plan succeeded
 * (`complete-node.lua`) — settles it at once, so a client waiting for the run does not also wait
 * for the node job to finish and the root job's finalize pass to be fetched. A failure here is
 * logged, not thrown: the node's snapshot is written, and that pass settles the run.
 */
export async function settleCompletedRun(
  deps: ExecutorDeps,
  plan: CompiledPlan,
  generation: number,
): Promise<void> {
  try {
    await finalizeRun(deps, plan, generation, await deps.store.outcomeState(plan.runId), 'node');
  } catch (err) {
    deps.logger.warn(
      { runId: plan.runId, err },
      'could not settle the run its last node completed: its root job will',
    );
  }
}

/**
 * Decides the outcome (if nothing decided it yet), fills in the nodes that never ran, settles the
 * run and does what follows. From the root job (`by` 'root'), a run settled already gets what
 * follows again (`afterSettled`); from the node job that decided it ('node'), only a run this call
 * settled gets it, then marked done, so the root job's pass does not repeat it.
 */
export async function finalizeRun(
  deps: ExecutorDeps,
  plan: CompiledPlan,
  generation: number,
  state: OutcomeState,
  by: 'root' | 'node' = 'root',
): Promise<RunStatus> {
  const { store } = deps;
  const now = nowIso();
  const { snapshots } = state;
  let { status, error: decidedError } = state;
  if (status === 'running' || status === 'queued') {
    const failure = firstFailure(plan, snapshots);
    const incomplete = [...plan.nodes.keys()].filter((id) => !snapshots.has(id));
    const error: RunError | null =
      failure ??
      (incomplete.length > 0
        ? { code: 'node_lost', message: `nodes never completed: ${incomplete.join(', ')}` }
        : null);
    const outcome = await store.decideOutcome(
      plan.runId,
      error ? RUN_ERROR_STATUS[error.code] : 'succeeded',
      error,
      now,
      generation,
    );
    status = outcome.status;
    // Someone else decided first: their error stands.
    decidedError = outcome.decided ? error : await store.error(plan.runId);
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
  const final = {
    status: status ?? 'failed',
    error: status === 'succeeded' ? null : decidedError,
    generation,
  };
  // The blobs its snapshots hold live at least as long as the run is about to.
  await retainBlobs(deps, plan.tenant, snapshots.values(), plan.timeoutSeconds);
  const settledHere = await store.settle(plan.runId, generation, fill, output, final, now);
  if (settledHere) {
    observeSettled(final.status, state.createdAt);
    await remember(deps, plan.runId, [...plan.nodes.keys()]);
    if (final.status === 'failed' || final.status === 'timed_out') await forgetPlan(deps, plan.runId);
    await dropNodeSlots(deps, plan);
    deps.logger.info({ runId: plan.runId, status }, 'run settled');
    if (!state.sessionKey) await agentEnded(deps, plan.runId, final.status);
    await recordSettledRun(deps.store, plan.runId);
  }
  if (by === 'root') {
    await afterSettled(deps, plan, state);
  } else if (settledHere) {
    await afterSettled(deps, plan, state, { archive: false });
    await store.markFollowedUp(plan.runId);
  }
  return status ?? 'failed';
}

/**
 * What follows a run's settling, each step safe to repeat: done by whoever settled it, and again by
 * every root job pass that finds it settled and not marked done (`markFollowedUp`: the node job
 * that settled it got through them), so a crash after settling loses none. The node job leaves
 * the run's archive to the root job (`archive: false`), off the path of the node's job.
 */
export async function afterSettled(
  deps: ExecutorDeps,
  plan: CompiledPlan,
  facts: Pick<SettleFacts, 'sessionKey' | 'hasWebhook'>,
  { archive = true } = {},
): Promise<void> {
  await releaseRun(deps, plan.runId, plan.tenant);
  if (facts.sessionKey) await deps.sessions?.onRunSettled(plan.runId);
  // Not caught: a root pass that could not enqueue the deliveries fails, and BullMQ's retry of the
  // root job announces again (the delivery ids are the same).
  await deps.webhooks?.runFinished(plan.runId, { tenant: plan.tenant, hasWebhook: facts.hasWebhook });
  // Last, so nothing a client waits for waits on it.
  if (archive) await deps.archive?.archiveRun(plan.runId);
}

/** The error of the first node whose failure ends the run, if any. */
function firstFailure(plan: CompiledPlan, snapshots: ReadonlyMap<string, NodeSnapshot>): RunError | null {
  for (const [id, node] of plan.nodes) {
    const s = snapshots.get(id);
    if (s?.status === 'failed' && !executionOf(node).continuesOnFailure(node)) {
      return runErrorForNode(id, s.error);
    }
  }
  return null;
}

/**
 * Records a run that just settled in its agent's memory, given the nodes of its plan when the
 * caller holds it (`MemoryService.recordSettled`). Memory serves learning, never the run: a
 * failure here is logged and the run's outcome stands.
 */
export async function remember(
  deps: ExecutorDeps,
  runId: string,
  nodeIds?: readonly string[],
): Promise<void> {
  if (!deps.memory) return;
  try {
    await deps.memory.recordSettled(runId, nodeIds);
  } catch (err) {
    deps.logger.warn({ runId, err }, 'could not record the run in memory');
  }
}

/** A run that failed or timed out takes its plan out of the plan cache; a failure here is logged. */
async function forgetPlan(deps: ExecutorDeps, runId: string): Promise<void> {
  if (!deps.planning?.cache) return;
  try {
    await forgetCachedPlan(deps.planning, deps.store, runId);
  } catch (err) {
    deps.logger.warn({ runId, err }, 'could not remove the plan of a failed run from the plan cache');
  }
}
