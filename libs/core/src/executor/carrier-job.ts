/**
 * Carrier jobs: a new run's first ready nodes started together. The start pass gives the nodes
 * that may run handed off (`handoff.ts`) one job per `TETRALOOP_NODE_HANDOFF_WIDTH` of them
 * instead of one each; the job begins them in one script and runs them side by side as handed-off
 * nodes, whose completions hand off further within the job's width. A 32-way fan-out is then 4
 * jobs to add, fetch and finish instead of 32, and its sources start 8 to a step.
 *
 * Why it keeps the execution model's guarantees, as a handoff does:
 * - the carrier is a child of the run's root job, so the root cannot finalize while it runs;
 * - each node is begun once: the script begins only the nodes still `queued`, in one step, and a
 *   node begun there names the carrier (`carriedBy`);
 * - a crash leaves the carrier to stall and be redelivered: the nodes its dead delivery completed
 *   are completed again and what they handed off walked (`recoverCarriedNode`); those it left
 *   running get jobs of their own and run again, as an interrupted handed-off node does; those it
 *   never began are begun now;
 * - a carried node that has to wait, retry or throw moves to a job of its own (`runHandedOff`).
 *
 * Only a new run's start uses carriers (generation 0, no reused snapshots): its ready nodes are
 * then the graph's roots on every delivery of the start pass, and the run keeps the width it
 * started with (`start-run-6.lua`), so a redelivered pass adds the same carriers again (no-ops)
 * and never puts a node in two jobs.
 */
import type { Job } from 'bullmq';
import { NodeJobData } from '../queues/catalog.js';
import { enqueueNodes, type NodeToEnqueue } from '../queues/run-jobs.js';
import { nowIso } from '../domain/clock.js';
import { executionOf } from '../nodes/index.js';
import { metrics } from '../telemetry/metrics.js';
import { underRunSpan } from '../telemetry/run-span.js';
import { inSpan } from '../telemetry/tracing.js';
import type { CarriedBegin } from '../state/runs/node-state.js';
import type { ExecutorDeps } from './deps.js';
import { carriedStarts } from './handoff.js';
import {
  enqueueReady,
  handedOffExecution,
  nodeJobsOf,
  recoverCarriedNode,
  runHandoffs,
  type Carrier,
  type Execution,
  type NodeJobResult,
} from './node-executor.js';
import type { CompiledPlan } from './plan-cache.js';

/**
 * Attempts of a carrier job. It fails only when recording a carried node's move to a job of its
 * own fails (Redis away); its next delivery recovers what the last one left.
 */
const CARRIER_ATTEMPTS = 3;

/**
 * How many of a run's first nodes one carrier job may take as its start pass begins it: the
 * handoff width, or 0 where the run uses no carriers. Only a new run's start uses them (its ready
 * nodes are then the graph's roots on every delivery); a run with a cap on its parallel nodes
 * holds one slot per job, and one that gives priorities orders its nodes by job: both keep a job
 * per node, as a handoff does; nor does a run whose first nodes make no carrier (a single
 * source), which then records nothing. `start-run-6.lua` keeps the width the run started with, so
 * a redelivered start pass makes the same carriers whatever its own process's settings.
 */
export function carryWidthFor(
  deps: ExecutorDeps,
  plan: CompiledPlan,
  generation: number,
  ready: readonly string[],
): number {
  const width = deps.handoffWidth ?? 1;
  const carries =
    generation === 0 &&
    !plan.reusesSnapshots &&
    (deps.handoff ?? 0) > 0 &&
    width > 1 &&
    ready.length > 1 &&
    plan.maxParallelNodes === null &&
    !plan.prioritized;
  return carries && carriedStarts(plan.nodes, ready, width).carried.length > 0 ? width : 0;
}

/**
 * Enqueues a run's ready nodes at its start: carriers for the groups `carriedStarts` makes of up to
 * `width` (the run's, from `start-run-6.lua`), a job of its own for every other node.
 */
export async function enqueueStart(
  deps: ExecutorDeps,
  plan: CompiledPlan,
  ready: readonly string[],
  generation: number,
  width: number,
): Promise<void> {
  if (width < 2 || generation !== 0 || plan.reusesSnapshots)
    return enqueueReady(deps, plan, ready, generation);
  const { carried, own } = carriedStarts(plan.nodes, ready, width);
  const carriers: NodeToEnqueue[] = carried.map((group) => ({
    id: group[0]!,
    carry: group,
    attempts: CARRIER_ATTEMPTS,
  }));
  // One add for the carriers and the jobs of the others.
  await enqueueNodes(deps.queues, plan.runId, generation, [...carriers, ...nodeJobsOf(deps, plan, own)]);
}

/**
 * Runs a carrier job, in its span: begins its nodes still queued and runs them side by side (and
 * what they hand off) until each has ended or moved to a job of its own, as handed-off nodes do
 * (a call under a flow limit among those moves); recovers first what a crashed delivery left.
 */
export async function executeCarrierJob(
  deps: ExecutorDeps,
  job: Job,
  token: string | undefined,
): Promise<NodeJobResult> {
  const data = NodeJobData.parse(job.data);
  const plan = await deps.plans.get(data.runId, data.generation);
  if (!plan) return { status: 'gone' };
  const ids = (data.carry ?? []).filter((id) => plan.nodes.has(id));
  // A child of the run's span, as the start pass that added it: the jobs a recovery adds (and
  // their nodes' spans) hang under it; the carried nodes' own spans hang under the start pass.
  const parent = data.trace;
  return inSpan(
    `carry ${data.nodeId}`,
    {
      ...(parent ? underRunSpan(data.runId, parent, parent) : {}),
      attributes: { 'tetraloop.run.id': data.runId, 'tetraloop.node.carried': ids.length },
    },
    async () => {
      const executions = await beginCarried(deps, plan, job, token, data, ids);
      metrics.nodeHandoffs.inc({ outcome: 'ran' }, executions.length);
      await runHandoffs(deps, executions);
      return { status: 'carried' as const };
    },
  );
}

/**
 * The carrier's nodes begun in one step, as executions; what a crashed delivery left recovered
 * before any runs, so a failure there leaves the nodes begun now to the next delivery's recovery.
 */
async function beginCarried(
  deps: ExecutorDeps,
  plan: CompiledPlan,
  job: Job,
  token: string | undefined,
  data: ReturnType<typeof NodeJobData.parse>,
  ids: readonly string[],
): Promise<Execution[]> {
  const carrierId = job.id ?? '';
  // Tracked before the script reads the run's status, as for any node's start; released here
  // unless a begun node's execution takes its tracking over.
  const tracks = ids.map(() => deps.aborts.track(plan.runId));
  let executions: Execution[] = [];
  try {
    const begin = await deps.store.beginCarried(plan.runId, {
      generation: data.generation,
      live: { status: 'running', startedAt: nowIso(), attempt: 1, carriedBy: carrierId },
      nodes: ids.map((id) => ({
        id,
        chargeCall: executionOf(plan.nodes.get(id)!).chargesToolCall,
        reads: plan.reads.get(id) ?? [],
      })),
    });
    await recoverCarriedStarts(deps, plan, data.generation, carrierId, begin.others);
    const carrier: Carrier = {
      job,
      token,
      generation: data.generation,
      hopsLeft: deps.handoff ?? 0,
      carrying: { running: begin.begun.length },
      ...(data.trace ? { trace: data.trace } : {}),
    };
    executions = begin.begun.map((handed, i) => handedOffExecution(deps, plan, carrier, handed, tracks[i]!));
  } finally {
    for (const tracked of tracks.slice(executions.length)) tracked.release();
  }
  return executions;
}

/**
 * The carried nodes the script did not begin, on a redelivery: one this carrier left running (or
 * retrying, before its own job was added) gets a job of its own — adding one it has is a no-op —
 * and one it completed is completed again and walked. A node run in a job of its own is that job's.
 */
async function recoverCarriedStarts(
  deps: ExecutorDeps,
  plan: CompiledPlan,
  generation: number,
  carrierId: string,
  others: CarriedBegin['others'],
): Promise<void> {
  if (others.length === 0) return;
  const interrupted = others.filter((o) => o.live?.carriedBy === carrierId).map((o) => o.nodeId);
  await enqueueReady(deps, plan, interrupted, generation);
  const ended = others.filter((o) => o.live === null).map((o) => o.nodeId);
  for (const [id, snapshot] of await deps.store.snapshotsOf(plan.runId, ended)) {
    if (snapshot.attempts.at(-1)?.carriedBy !== carrierId) continue;
    await recoverCarriedNode(deps, plan, generation, carrierId, plan.nodes.get(id)!, snapshot);
  }
}
