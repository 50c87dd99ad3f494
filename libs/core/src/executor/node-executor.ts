/**
 * Executes one node job (the tool loop, L3): read the dependencies' snapshots, guard against
 * loops and spent budgets, run the node by its kind's runner, write its snapshot once, release
 * ready dependents — and run some of them in the same job (`handoff.ts`). A retry is handed back
 * to BullMQ's backoff; a waiting node parks itself in the delayed set; neither holds a worker slot.
 */
import type { Logger } from 'pino';
import { DelayedError, WaitingChildrenError, type Job } from 'bullmq';
import { giveNodeSlot, takeNodeSlot } from './node-slots.js';
import { withSecretsMasked } from '../secrets/secret-ref.js';
import type { NodeSnapshot, NodeUsage, RunStatus } from '../domain/run-model.js';
import type { NodeErrorData } from '../errors/node-error.js';
import { deadlineError, expiryRunError, failureReplans, runErrorForNode } from '../errors/run-error.js';
import { findReferences } from '../graph/references.js';
import { nodeForAttempt } from '../graph/retry-variants.js';
import { expiryOf, fallbackNode, type Expiry } from '../graph/task-ttl.js';
import { DEFAULT_NODE_PRIORITY } from '../graph/schema.js';
import { executionOf, toolOf, type ExecutableNode } from '../nodes/index.js';
import { retriesFor, retryDelay } from '../policy/retry-policy.js';
import { rateLimitFixUsed } from '../reflect/lesson-effects.js';
import type { BeginNodeResult, HandedOffNode, HandoffRequest } from '../state/runs/node-state.js';
import { NodeJobData } from '../queues/catalog.js';
import { enqueueNodes, nodeJobAttempts, wakeParkedNodes, type NodeToEnqueue } from '../queues/run-jobs.js';
import { metrics } from '../telemetry/metrics.js';
import { failSpan, inSpan, traceCarrier, type TraceCarrier } from '../telemetry/tracing.js';
import { underRunSpan } from '../telemetry/run-span.js';
import { readBlobs, withOutputBlob } from './blob-reads.js';
import { nowIso } from '../domain/clock.js';
import { withFingerprints, type SnapshotSizes } from '../domain/fingerprint.js';
import { retryTableFor, type ExecutorDeps } from './deps.js';
import {
  announce,
  attemptRecord,
  enteredAtOf,
  scopeOf,
  snapshotOf,
  type NodeContext,
} from './node-context.js';
import { askEarly, dropEarly, leaveFlow, type EarlyAsk } from './flow-gate.js';
import { nodeRun } from './node-run.js';
import { completeItem, itemReads, itemScope, plannedItem } from './map-items.js';
import type { CompiledPlan } from './plan-cache.js';
import { OwnJobNeeded, handoffCandidates } from './handoff.js';
import { settleCompletedRun } from './run-settle.js';
import { customToolOf, queueOfNode, retryOfNode, runsHere } from './tool-placement.js';

/** Thrown to hand a failed attempt back to BullMQ for a retry after `delayMs`. */
export class RetryNodeError extends Error {
  constructor(
    readonly error: NodeErrorData,
    readonly delayMs: number,
  ) {
    super(`${error.code}: ${error.message}`);
    this.name = 'RetryNodeError';
  }
}

export interface NodeJobResult {
  /**
   * `running`: a handed-off node moved on to a job of its own. `carried`: a carrier job, whose
   * nodes' outcomes are in their snapshots (`carrier-job.ts`).
   */
  readonly status: NodeSnapshot['status'] | 'gone' | 'stale' | 'running' | 'carried';
  /** A failed node's error class. */
  readonly code?: string;
}

/** Milliseconds since an ISO instant of this machine's clock (0 for one in the future). */
const sinceMs = (iso: string): number => Math.max(0, Date.now() - Date.parse(iso));

/** A job parking itself, waiting for its children, or handing a retry to BullMQ: not a crash. */
const controlFlow = (err: unknown): boolean =>
  err instanceof DelayedError || err instanceof WaitingChildrenError || err instanceof RetryNodeError;

/**
 * One execution of a node: by its own job, or handed off in the job of the node that released it
 * (`inline`). The job is the one that carries it; parking, retries and flow-control holds of a
 * handed-off node move it to a job of its own instead of touching the carrier.
 */
export interface Execution {
  readonly job: Job;
  readonly token: string | undefined;
  readonly data: ReturnType<typeof NodeJobData.parse>;
  readonly attempt: number;
  /** Attempts the node may make in all (BullMQ's ceiling, with those made before its job existed). */
  readonly attemptsAllowed: number;
  /** When the node became ready: its job was queued, or it was released for a handoff. */
  readonly queuedAt: number;
  readonly inline: boolean;
  /** How many more hops deep the carrying job may hand off below this node. */
  readonly hopsLeft: number;
  /** The carrying job's nodes running now (this one among them): shared by its executions. */
  readonly carrying: { running: number };
  /**
   * A handed-off node begun by its releaser's completing script (`complete-node.lua`): its begin
   * answer, its start time and the abort tracking taken before that script read the run's status.
   */
  readonly begun?: {
    readonly begin: BeginNodeResult;
    readonly startedAt: string;
    readonly tracked: { signal: AbortSignal; release: () => void };
  };
  /** Set once a job's own node began running in this attempt. */
  runningHere?: boolean;
}

type ExecutionResult = NodeJobResult & { readonly handoffs?: readonly Execution[] };

/**
 * Executes one node job in its span (a child of whatever released the node, from the job's data):
 * one span per execution, so attempts are spans; a failed attempt or node carries its error class.
 * Then the nodes it hands off, each in its own span. Answers for the job's own node.
 */
export async function executeNodeJob(
  deps: ExecutorDeps,
  job: Job,
  token: string | undefined,
): Promise<NodeJobResult> {
  const data = NodeJobData.parse(job.data);
  const own: Execution = {
    job,
    token,
    data,
    attempt: job.attemptsMade + 1 + data.attemptsBefore,
    attemptsAllowed: data.attemptsBefore + (job.opts.attempts ?? 1),
    queuedAt: job.timestamp,
    inline: false,
    hopsLeft: deps.handoff ?? 0,
    carrying: { running: 1 },
  };
  // A run with a cap on its parallel nodes: the job takes a slot first, or parks until one frees.
  const slot = await takeNodeSlot(deps, await deps.plans.get(data.runId, data.generation), job, token);
  try {
    let first: ExecutionResult;
    try {
      first = await inNodeSpan(deps, own, data.trace);
    } catch (err) {
      if (own.runningHere && !controlFlow(err)) await reenterAsBegun(deps, own);
      throw err;
    }
    own.carrying.running -= 1;
    await runHandoffs(deps, first.handoffs ?? []);
    return { status: first.status, ...(first.code !== undefined ? { code: first.code } : {}) };
  } finally {
    // Ended or parked: either way the job runs nothing now.
    if (slot) await giveNodeSlot(deps, slot);
  }
}

/**
 * The job's node began in this attempt and then failed in an unexpected way (Redis away while it
 * completed, say). If the job runs again as the same attempt — sent back while Redis was away, not
 * counted — it re-enters that attempt as begun (`resumes`, as a hand-back on shutdown does): not
 * counted, charged or checked for its TTL again. A failure BullMQ counts makes the next run a new
 * attempt, which the mark does not match. Best effort: unmarked, the attempt re-enters as after
 * a crash.
 */
async function reenterAsBegun(deps: ExecutorDeps, execution: Execution): Promise<void> {
  const { job, attempt } = execution;
  await job
    .updateData({ ...(job.data as object), resumes: attempt })
    .catch((err: unknown) =>
      deps.logger.warn({ err, jobId: job.id }, 'could not mark a begun node to re-enter its attempt'),
    );
}

/**
 * Runs the nodes a job was handed, and those they hand on: one after another down a chain, side
 * by side when a completion handed several (wide handoff). Each ends in its span; a handed-off
 * node that fails in an unexpected way has moved to a job of its own (`runHandedOff`), so what
 * rejects here is the carrying job's own failure, thrown once every branch has ended.
 */
export async function runHandoffs(deps: ExecutorDeps, executions: readonly Execution[]): Promise<void> {
  let next = executions;
  // A chain (one at a time) loops here without a promise per branch.
  while (next.length === 1) next = (await runCarried(deps, next[0]!)).handoffs ?? [];
  if (next.length === 0) return;
  const ended = await Promise.allSettled(
    next.map(async (execution) => runHandoffs(deps, (await runCarried(deps, execution)).handoffs ?? [])),
  );
  const failed = ended.filter((e): e is PromiseRejectedResult => e.status === 'rejected');
  // The job fails with the first; the others are told too.
  for (const other of failed.slice(1)) {
    deps.logger.error({ err: other.reason as unknown }, 'a node run handed off beside another failed');
  }
  if (failed[0]) throw failed[0].reason;
}

/** Runs one handed-off node in its span; its place in the carrying job is free once it ends. */
const runCarried = (deps: ExecutorDeps, execution: Execution): Promise<ExecutionResult> =>
  inNodeSpan(deps, execution, execution.data.trace).finally(() => (execution.carrying.running -= 1));

async function inNodeSpan(
  deps: ExecutorDeps,
  execution: Execution,
  parent: TraceCarrier | undefined,
): Promise<ExecutionResult> {
  const { data } = execution;
  // A child of the run's `invoke_agent` span (whose trace `parent` is in), linked to the span that
  // released the node: the root job's pass, or the node whose completion made it ready.
  return inSpan(
    `node ${data.nodeId}`,
    {
      ...(parent ? underRunSpan(data.runId, parent, parent) : {}),
      attributes: {
        'tetraloop.run.id': data.runId,
        'tetraloop.node.id': data.nodeId,
        'tetraloop.attempt': execution.attempt,
        'tetraloop.generation': data.generation,
        ...(execution.inline ? { 'tetraloop.node.handoff': true } : {}),
      },
      expected: controlFlow,
    },
    async (span) => {
      try {
        const result = execution.inline
          ? await runHandedOff(deps, execution)
          : await runExecution(deps, execution);
        span.setAttribute('tetraloop.node.status', result.status);
        if (result.code !== undefined) failSpan(span, result.code);
        return result;
      } catch (err) {
        if (err instanceof RetryNodeError) failSpan(span, err.error.code, err.error.message);
        else if (err instanceof DelayedError || err instanceof WaitingChildrenError)
          span.setAttribute('tetraloop.node.parked', true);
        throw err;
      }
    },
  );
}

/**
 * A handed-off node. One that must wait — a retry's backoff, a park, a flow-control hold — or that
 * throws goes on in a job of its own with the attempts it has made; the carrier goes on.
 */
async function runHandedOff(deps: ExecutorDeps, execution: Execution): Promise<ExecutionResult> {
  try {
    return await runExecution(deps, execution);
  } catch (err) {
    const { runId, nodeId, generation } = execution.data;
    const plan = await deps.plans.get(runId, generation);
    const node = plan?.nodes.get(nodeId);
    if (!plan || !node) throw err;
    const retry = err instanceof RetryNodeError;
    if (!retry && !(err instanceof OwnJobNeeded)) {
      deps.logger.warn({ err, runId, nodeId }, 'a handed-off node failed; moving it to a job of its own');
    }
    // A retry is a new attempt after its delay; anything else re-enters the same attempt, whose
    // begin was made (not counted or charged again).
    const attemptsBefore = retry ? execution.attempt : execution.attempt - 1;
    const queue = queueOfNode(deps.tools, node);
    await enqueueNodes(deps.queues, runId, generation, [
      {
        id: nodeId,
        ...(queue ? { queue } : {}),
        attempts: Math.max(1, execution.attemptsAllowed - attemptsBefore),
        ...(plan.prioritized ? { priority: nodePriorityOf(node) } : {}),
        ...(retry ? { delayMs: err.delayMs } : { moved: true }),
        attemptsBefore,
        carrier: jobIdOf(execution.job),
      },
    ]);
    metrics.nodeHandoffs.inc({ outcome: retry ? 'retry' : 'own_job' });
    return { status: 'running' };
  }
}

/** Whether a failure of this node is data for its dependents rather than the end of the run. */
export const continuesOnFailure = (node: ExecutableNode): boolean =>
  executionOf(node).continuesOnFailure(node);

async function runExecution(deps: ExecutorDeps, execution: Execution): Promise<ExecutionResult> {
  const { job, token, data, attempt } = execution;
  const plan = await deps.plans.get(data.runId, data.generation);
  // A map's item is no node of the plan: its map's template under the item's id.
  const item = plan && !plan.nodes.has(data.nodeId) ? plannedItem(plan, data.nodeId) : undefined;
  const planned = plan?.nodes.get(data.nodeId) ?? item?.node;
  if (!plan || !planned) {
    execution.begun?.tracked.release();
    // The run expired or was deleted: nothing to do, nothing to report to.
    if (!plan) return { status: 'gone' };
    // A node the current plan no longer has: a job of an older generation (another process read
    // the plan after a replan) is stale; otherwise the node was never planned.
    return { status: plan.generation > data.generation ? 'stale' : 'gone' };
  }

  // A custom tool this process has no code for: the job goes back to its queue, unbegun and
  // uncounted, for a worker that has it (a tool on the shared node queue that not every worker
  // of that queue loads).
  const custom = execution.inline ? undefined : customToolOf(deps.tools, planned);
  if (custom && !custom.codeHere) {
    execution.begun?.tracked.release();
    return notServedHere(deps, execution, custom.name, custom.custom.queue);
  }

  // A node not started before its TTL is skipped, failed, or replaced by its fallback — decided
  // when its job is first taken; a downgraded node's retries run the fallback too.
  // A moved node re-enters its begun attempt once; the retries of its own job are new attempts.
  const moved = data.moved && job.attemptsMade === 0;
  // An attempt a worker shutting down handed back re-enters as it was begun.
  const resumed = data.resumes === attempt;
  const reentry = data.continuation || data.throttled || moved || resumed;
  const firstTake = attempt === 1 && !reentry;
  const expiry = firstTake ? expiryOf(planned, execution.queuedAt, Date.now()) : undefined;
  const downgradedAt = data.downgraded ?? (expiry?.onExpire === 'downgrade' ? iso(expiry.at) : undefined);
  // Skipped or failed for its TTL: it does not run, so it is neither counted nor charged.
  const expiredUnrun = expiry !== undefined && expiry.onExpire !== 'downgrade';
  // A retry may run with different parameters (`retry.vary`).
  const { node, variant } = nodeForAttempt(downgradedAt ? fallbackNode(planned) : planned, attempt);
  const kind = executionOf(node);
  // A continuation is the same execution as its first entry in this attempt: it started then.
  const enteredAt = enteredAtOf(data, attempt);
  const startedAt = execution.begun?.startedAt ?? enteredAt ?? nowIso();
  // Tracked before reading the run's status, so an abort published in between is not missed (a
  // node begun by its releaser's script was tracked before that script).
  const tracked = execution.begun?.tracked ?? deps.aborts.track(plan.runId);
  // Asked beside the start script, so the node's call under a limit makes no round trip of its own.
  const early = reentry || execution.inline ? undefined : earlyFlowAsk(deps, plan, node, job);
  try {
    const begin =
      execution.begun?.begin ??
      (await deps.store.beginNode(plan.runId, node.id, {
        generation: data.generation,
        live: {
          status: 'running',
          startedAt,
          attempt,
          ...(execution.inline ? { carriedBy: jobIdOf(job) } : {}),
        },
        // A job re-entering after parking (or after flow control held its call back, or moving on
        // from a handoff) is the same execution: not counted or charged again.
        countExecution: !reentry && !expiredUnrun,
        chargeCall: kind.chargesToolCall && !data.throttled && !moved && !resumed && !expiredUnrun,
        reads: item ? itemReads(item) : (plan.reads.get(node.id) ?? []),
        // An item announces only its failure; its map reports progress.
        ...(item ? { quiet: true } : {}),
      }));
    if (begin.status === 'stale') return { status: 'stale' };
    // A node skipped or failed for its TTL does not run: its redelivery decides its TTL again.
    if (!execution.inline && begin.status === 'running' && !begin.existing && !expiredUnrun)
      execution.runningHere = true;
    // A held-back call whose node will not run now gives its place in the queue up.
    if (data.throttled && (begin.existing || begin.status !== 'running')) await leaveFlow(deps, job);
    const reads = await readBlobs(deps, plan.tenant, node, begin);
    let log: Logger | undefined;
    const ctx: NodeContext = {
      deps,
      job,
      token,
      plan,
      node,
      generation: data.generation,
      continuation: data.continuation,
      inline: execution.inline,
      attempt,
      attemptsAllowed: execution.attemptsAllowed,
      ...(variant !== undefined ? { variant } : {}),
      startedAt,
      started: performance.now() - (enteredAt ? sinceMs(enteredAt) : 0),
      begin,
      scope: {
        ...scopeOf(plan.input, reads.snapshots),
        ...(item ? itemScope(item, data.item) : {}),
      },
      runSignal: tracked.signal,
      // Made when something logs: a child logger per node costs every node otherwise.
      get log() {
        return (log ??= deps.logger.child({ runId: plan.runId, nodeId: node.id, attempt }));
      },
      call: { lessons: [], ...(early ? { early } : {}) },
    };
    if (expiry && !begin.existing && begin.status === 'running') await announceExpiry(ctx, expiry, job);
    // A redelivered job whose node already has a snapshot reports it and does not run again.
    const snapshot =
      begin.existing ??
      (begin.status === 'running'
        ? expiredUnrun
          ? expiredSnapshot(ctx, expiry)
          : withExpiry(await runNode(ctx, reads.error), downgradedAt)
        : notRunSnapshot(begin.status, begin.attempts));
    if (!begin.existing && begin.status === 'running') observeNode(node, snapshot);
    if (item) {
      await completeItem(ctx, item, snapshot, begin.existing !== undefined, (s) => {
        const sizes: SnapshotSizes = {};
        return withOutputBlob(deps, plan, withFingerprints(s, sizes), sizes);
      });
      return { status: snapshot.status, ...(snapshot.error ? { code: snapshot.error.code } : {}) };
    }
    // A redelivered job whose node was complete: it hands nothing off, it finishes what the crashed
    // delivery left (the nodes that one ran handed off and what they released).
    if (begin.existing) {
      const carriers = carriersOf(execution);
      const { ready } = await complete(ctx, snapshot, true, carriers);
      await recoverCarried(deps, plan, data.generation, carriers, node.id, ready);
      return { status: snapshot.status, ...(snapshot.error ? { code: snapshot.error.code } : {}) };
    }
    const handoffs = await completeAndDispatch(ctx, snapshot, execution);
    return {
      status: snapshot.status,
      ...(snapshot.error ? { code: snapshot.error.code } : {}),
      ...(handoffs.length > 0 ? { handoffs } : {}),
    };
  } finally {
    tracked.release();
    // The node did not run, or its call did not take the early answer: its capacity goes back (or
    // its lease runs out). Not thrown: the nodes this one handed off are begun and must run.
    await dropEarly(deps.flow, early).catch((err: unknown) =>
      deps.logger.warn(
        { err, runId: plan.runId, nodeId: node.id },
        'could not give back an early flow answer',
      ),
    );
  }
}

/**
 * The early flow-control ask of a node whose one tool call is known before it starts (its kind's
 * `declaredToolCall`: a tool node's): its arguments hold no references (so hooks aside, its target
 * is known) and its time limit is its own or the default. `passFlow` takes the answer when the call
 * asks for the same counters.
 */
function earlyFlowAsk(
  deps: ExecutorDeps,
  plan: CompiledPlan,
  node: ExecutableNode,
  job: Job,
): EarlyAsk | undefined {
  if (!deps.flow || job.id === undefined) return undefined;
  const kind = executionOf(node);
  const call = kind.declaredToolCall(node);
  if (!call) return undefined;
  const tool = deps.tools.get(call.tool);
  if (!tool || findReferences(call.args).length > 0) return undefined;
  // A secret is a string of unknown content until the call: the call is read with it as one.
  const parsed = tool.input.safeParse(withSecretsMasked(call.args));
  if (!parsed.success) return undefined;
  const target = tool.target?.(parsed.data);
  // A call a lesson may give a longer time limit asks when it is made.
  if (target !== undefined && deps.lessons) return undefined;
  const limitMs =
    kind.timeoutMs(node) ?? Math.max(deps.defaultTimeoutMs, tool.minTimeoutMs?.(parsed.data) ?? 0);
  return askEarly(deps.flow, plan, job.id, {
    tool: tool.name,
    ...(target !== undefined ? { host: target } : {}),
    limitMs,
  });
}

async function runNode(ctx: NodeContext, blobError?: NodeErrorData): Promise<NodeSnapshot> {
  const { begin, deps } = ctx;
  if (!ctx.continuation && begin.executions > deps.maxNodeExecutions) {
    ctx.log.warn({ executions: begin.executions }, 'suspected loop: node stopped');
    return failedSnapshot(ctx, {
      code: 'suspected_loop',
      message: `executed ${begin.executions} times in this run (limit ${deps.maxNodeExecutions})`,
      executions: begin.executions,
    });
  }
  const spent = budgetSpent(ctx);
  if (spent) return failedSnapshot(ctx, spent);
  // An output it reads is no longer stored: retrying would not bring it back.
  if (blobError) return failedSnapshot(ctx, blobError);
  const kind = executionOf(ctx.node);
  return kind.run(nodeRun(ctx, (error, usage) => failureSnapshot(ctx, error, usage)));
}

/** The run's budget is spent before this call: the node ends `budget_exhausted`. */
function budgetSpent(ctx: NodeContext): NodeErrorData | undefined {
  const { begin } = ctx;
  const kind = executionOf(ctx.node);
  if (
    kind.chargesToolCall &&
    begin.budget.toolCalls !== undefined &&
    begin.toolCalls > begin.budget.toolCalls
  ) {
    return {
      code: 'budget_exhausted',
      message: `the run used its ${begin.budget.toolCalls} tool calls`,
      budget: 'toolCalls',
    };
  }
  if (
    kind.usesToolTime &&
    begin.budget.toolTimeMs !== undefined &&
    begin.toolTimeMs >= begin.budget.toolTimeMs
  ) {
    return {
      code: 'budget_exhausted',
      message: `the run used its ${begin.budget.toolTimeMs} ms of tool time`,
      budget: 'toolTimeMs',
    };
  }
  return undefined;
}

/**
 * What a failed execution becomes: a retry (thrown to BullMQ, with its delay), a cancelled node
 * (aborted), or a failed snapshot (with `{error}` as output when the node continues on failure).
 */
async function failureSnapshot(
  ctx: NodeContext,
  error: NodeErrorData,
  usage?: NodeUsage,
): Promise<NodeSnapshot> {
  const { deps, node } = ctx;
  const kind = executionOf(node);
  if (error.code === 'aborted') return snapshotOf(ctx, 'cancelled', { error });
  const retry = kind.retryable ? retryOfNode(deps.tools, node) : undefined;
  const base = kind.retryable ? retriesFor(error.code, retryTableFor(deps), retry) : 0;
  // A template lesson about a rate-limited service: more retries (as many as the job has room
  // for), spaced at least its floor apart — unless the node (or its tool) sets its own retries.
  const own = retry?.rate_limited;
  const fix =
    kind.retryable && error.code === 'rate_limited' && own === undefined ? ctx.call.rateLimit : undefined;
  const room = ctx.attemptsAllowed - 1;
  const retries = fix ? Math.max(base, Math.min(fix.retries, room)) : base;
  if (ctx.attempt > retries || ctx.runSignal.aborted) return failedSnapshot(ctx, error, usage);
  const delayMs = Math.max(retryDelay(ctx.attempt, error, deps.backoff), fix?.backoffFloorMs ?? 0);
  if (fix) {
    if (!ctx.call.lessons.includes(fix.lessonId)) ctx.call.lessons.push(fix.lessonId);
    rateLimitFixUsed();
  }
  if (error.code === 'auth' && deps.hooks.refreshCredentials) {
    try {
      const tool = kind.label(node);
      const renewed = await deps.hooks.refreshCredentials({
        runId: ctx.plan.runId,
        nodeId: node.id,
        tool,
        error,
      });
      // A new model key (never logged, never stored with the run) serves this worker's calls from now on.
      if (renewed?.modelApiKey) deps.model?.setApiKey(renewed.modelApiKey);
    } catch (err) {
      ctx.log.warn({ err }, 'credential refresh failed; not retrying');
      return failedSnapshot(ctx, error, usage);
    }
  }
  const until = new Date(Date.now() + delayMs).toISOString();
  await deps.store.recordAttempt(
    ctx.plan.runId,
    node.id,
    attemptRecord(ctx, { error, retryDelayMs: delayMs }),
    // A handed-off node keeps naming its carrier until its own job exists, so no other job's
    // recovery gives it one meanwhile.
    {
      status: 'retrying',
      attempt: ctx.attempt,
      until,
      ...(ctx.inline && ctx.job.id !== undefined ? { carriedBy: ctx.job.id } : {}),
    },
  );
  ctx.log.info({ code: error.code, delayMs }, 'node attempt failed; retrying');
  metrics.nodeRetries.inc({ code: error.code });
  metrics.backoffDelay.observe({ code: error.code }, delayMs / 1000);
  metrics.nodeAttempts.inc({ kind: node.kind, tool: kind.label(node), outcome: error.code });
  throw new RetryNodeError(error, delayMs);
}

function failedSnapshot(ctx: NodeContext, error: NodeErrorData, usage?: NodeUsage): NodeSnapshot {
  ctx.log.info({ code: error.code, message: error.message }, 'node failed');
  // With onError "continue" the failure becomes data for the dependents.
  const output = continuesOnFailure(ctx.node)
    ? { error: { code: error.code, message: error.message } }
    : undefined;
  return snapshotOf(ctx, 'failed', { error, ...(output ? { output } : {}), ...(usage ? { usage } : {}) });
}

const iso = (ms: number): string => new Date(ms).toISOString();

/**
 * Tells the run a node expired (`node.expired`); a downgrading one notes it in its job's data first,
 * so its retries run the fallback too.
 */
async function announceExpiry(ctx: NodeContext, expiry: Expiry, job: Job): Promise<void> {
  const at = iso(expiry.at);
  if (expiry.onExpire === 'downgrade') await job.updateData({ ...(job.data as object), downgraded: at });
  await ctx.deps.store.appendEvent(ctx.plan.runId, 'node.expired', ctx.node.id, {
    expiredAt: at,
    onExpire: expiry.onExpire,
  });
  metrics.nodesExpired.inc({ onExpire: expiry.onExpire });
}

/** A node skipped or failed because it was not started before its TTL. */
function expiredSnapshot(ctx: NodeContext, expiry: Expiry): NodeSnapshot {
  const expired = { at: iso(expiry.at), onExpire: expiry.onExpire };
  if (expiry.onExpire === 'fail') {
    const message = `not started before it expired at ${expired.at}`;
    return { ...failedSnapshot(ctx, { code: 'timeout', message, expired: true }), expired };
  }
  // Its dependents run and read this output.
  return {
    status: 'skipped',
    output: { expired: true },
    attempts: [],
    finishedAt: nowIso(),
    durationMs: 0,
    expired,
  };
}

/**
 * A planned node that expired unstarted (skipped or failed for its TTL) hands its task run back to
 * the planner, which is told what expired: the replan, or the next window. Asked before the node's
 * snapshot is written, so its dependents are not released meanwhile (nothing new starts while a
 * run waits to be replanned). A fixed graph has no planner, and a run whose replans are used up
 * asks in vain: there the node is skipped or fails as its `onExpire` says. A downgraded node ran
 * its fallback: nothing to hand back.
 */
async function handBackExpiry(ctx: NodeContext, snapshot: NodeSnapshot): Promise<void> {
  const { expired } = snapshot;
  if (!expired || expired.onExpire === 'downgrade') return;
  const { deps, plan, node } = ctx;
  const error = expiryRunError(node.id, expired.at);
  if (await deps.store.requestReplan(plan.runId, error, ctx.generation)) {
    ctx.log.info({ expiredAt: expired.at }, 'expired node handed the run back to the plan loop');
  }
}

/** A downgraded node's snapshot says so. */
const withExpiry = (snapshot: NodeSnapshot, downgradedAt: string | undefined): NodeSnapshot =>
  downgradedAt ? { ...snapshot, expired: { at: downgradedAt, onExpire: 'downgrade' } } : snapshot;

/**
 * Whether a node's snapshot lets its dependents run: it succeeded, it failed and continues on
 * failure, or it was skipped for its TTL.
 */
export function releasesDependents(
  node: ExecutableNode | undefined,
  snapshot: NodeSnapshot | undefined,
): boolean {
  if (!snapshot) return false;
  if (snapshot.status === 'succeeded') return true;
  if (snapshot.status === 'failed') return node !== undefined && continuesOnFailure(node);
  return snapshot.status === 'skipped' && snapshot.expired !== undefined;
}

/** The snapshot of a node that will not run (its run ended); attempts made before are kept. */
function notRunSnapshot(runStatus: RunStatus | null, attempts: NodeSnapshot['attempts']): NodeSnapshot {
  return {
    status: runStatus === 'cancelled' ? 'cancelled' : 'skipped',
    attempts,
    finishedAt: nowIso(),
    durationMs: 0,
  };
}

/**
 * Writes the node's snapshot (once) and answers the dependents it released, not yet enqueued, and
 * those of `handoff`'s candidates the same script began.
 */
async function complete(
  ctx: NodeContext,
  snapshot: NodeSnapshot,
  existed: boolean,
  carriers: readonly string[],
  handoff?: HandoffRequest,
): Promise<{ ready: readonly string[]; handedOff: readonly HandedOffNode[] }> {
  const { deps, plan, node } = ctx;
  const kind = executionOf(node);
  const failsRun = snapshot.status === 'failed' && !kind.continuesOnFailure(node);
  const release = releasesDependents(node, snapshot);
  const tool = toolOf(node);
  if (!existed) await handBackExpiry(ctx, snapshot);
  // Fingerprinted before a large value is stored as a blob: the hashes are of the values.
  const sizes: SnapshotSizes = {};
  const stored = existed
    ? snapshot
    : await withOutputBlob(deps, plan, withFingerprints(snapshot, sizes), sizes);
  const done = await deps.store.completeNode(plan.runId, node.id, stored, {
    release,
    children: plan.topology.children.get(node.id) ?? [],
    charge: existed ? {} : kind.charge(snapshot),
    jobs: carriers,
    // A node that is one tool call names its tool in its completion event.
    ...(tool !== undefined ? { tool } : {}),
    ...(handoff ? { handoff } : {}),
    // The last node of the plan to succeed decides the run (and settles it, below).
    ...(existed ? {} : { planned: { nodes: plan.nodes.size, generation: ctx.generation } }),
  });
  if (done.decided) await settleCompletedRun(deps, plan, ctx.generation);
  const now = nowIso();
  if (failsRun) {
    await decideFailure(deps, plan, node, snapshot, ctx.generation);
  } else if (
    snapshot.status === 'cancelled' &&
    ctx.begin.deadlineAt !== null &&
    Date.now() >= ctx.begin.deadlineAt
  ) {
    await deps.store.decideError(plan.runId, deadlineError(plan.timeoutSeconds), now, ctx.generation);
  }
  if (snapshot.status === 'failed' && snapshot.error) {
    const { code, message } = snapshot.error;
    await announce(ctx, {
      type: 'node.failed',
      key: `${node.id}@${ctx.generation}`,
      data: { nodeId: node.id, error: { code, message }, attempts: snapshot.attempts.length, failsRun },
    });
  }
  const dispatch = done.status === 'running' && done.generation === ctx.generation;
  return dispatch ? { ready: done.ready, handedOff: done.handedOff } : { ready: [], handedOff: [] };
}

/**
 * What a node's failure does to its run: in a task run some failures hand the run back to the plan
 * loop; otherwise the run fails (the first decision wins) and its parked nodes are woken.
 */
async function decideFailure(
  deps: ExecutorDeps,
  plan: CompiledPlan,
  node: ExecutableNode,
  snapshot: NodeSnapshot,
  generation: number,
): Promise<void> {
  if (!snapshot.error) return;
  const error = runErrorForNode(node.id, snapshot.error);
  const replan = executionOf(node).replansOnFailure(node) || failureReplans(snapshot.error);
  if (replan && (await deps.store.requestReplan(plan.runId, error, generation))) {
    deps.logger.info(
      { runId: plan.runId, nodeId: node.id, code: snapshot.error.code },
      'node handed the run back to the plan loop',
    );
  } else if (await deps.store.decideError(plan.runId, error, nowIso(), generation)) {
    await wakeParkedNodes(deps.store, deps.queues, plan.runId);
  }
}

/**
 * Writes the node's snapshot and dispatches what it released: some of them (node handoff) begun by
 * the same script and answered as the job's next executions — one down a chain, up to the job's
 * handoff width side by side — the others enqueued. Ready nodes are enqueued (or begun) before the
 * job finishes, so the root job cannot finish early and a crash cannot strand them.
 */
async function completeAndDispatch(
  ctx: NodeContext,
  snapshot: NodeSnapshot,
  from: Execution,
): Promise<Execution[]> {
  const { deps, plan } = ctx;
  const generation = from.data.generation;
  const candidates =
    from.hopsLeft > 0 && !deps.stopping?.()
      ? handoffCandidates(
          plan.nodes,
          (plan.topology.children.get(ctx.node.id) ?? []).filter((id) =>
            runsHere(deps.tools, plan.nodes.get(id)!, deps.servedQueues),
          ),
          plan.prioritized,
        )
      : [];
  // This node's place in the job passes on; the job runs at most `width` nodes at once. A run with
  // a cap on its parallel nodes holds one slot per job, and with flow limits in force a handed-off
  // call under one moves to a job of its own (where it asks early): both go one node at a time.
  const width =
    plan.maxParallelNodes === null && !flowLimitsInForce(deps)
      ? Math.max(1, (deps.handoffWidth ?? 1) - (from.carrying.running - 1))
      : 1;
  // The places are taken before the script, so a sibling completing meanwhile counts them; those
  // the script did not fill are given back after it.
  const reserved = Math.min(width, candidates.length);
  from.carrying.running += reserved;
  const startedAt = nowIso();
  // Tracked before the script reads the run's status, as for a node's own start: one for each node
  // the script may begin, those it did not given back after it.
  const tracks = Array.from({ length: reserved }, () => deps.aborts.track(plan.runId));
  let executions: Execution[] = [];
  try {
    const done = await complete(
      ctx,
      snapshot,
      false,
      carriersOf(from),
      candidates.length > 0
        ? {
            generation,
            live: { status: 'running', startedAt, attempt: 1, carriedBy: jobIdOf(from.job) },
            width,
            candidates: candidates.map((id) => ({
              id,
              chargeCall: executionOf(plan.nodes.get(id)!).chargesToolCall,
              reads: plan.reads.get(id) ?? [],
            })),
          }
        : undefined,
    );
    const begun = new Set(done.handedOff.map((h) => h.nodeId));
    await enqueueReady(
      deps,
      plan,
      done.ready.filter((id) => !begun.has(id)),
      generation,
    );
    const carrier: Carrier = {
      job: from.job,
      token: from.token,
      generation,
      hopsLeft: from.hopsLeft - 1,
      carrying: from.carrying,
      ...traceCarrier(),
    };
    executions = done.handedOff.map((handed, i) =>
      handedOffExecution(deps, plan, carrier, handed, tracks[i]!),
    );
  } finally {
    // On a failure the nodes begun stay to the job's redelivery, which finds them by `carriedBy`.
    from.carrying.running -= reserved - executions.length;
    for (const tracked of tracks.slice(executions.length)) tracked.release();
  }
  metrics.nodeHandoffs.inc({ outcome: 'ran' }, executions.length);
  return executions;
}

/** Whether flow limits may apply to a call: some are in force, or the gate's copy is stale. */
export const flowLimitsInForce = (deps: ExecutorDeps): boolean =>
  deps.flow !== undefined && (deps.flow.cachedLimits()?.limits.length ?? 1) > 0;

/** The job a handed-off node runs in, as its executions see it. */
export interface Carrier {
  readonly job: Job;
  readonly token: string | undefined;
  readonly generation: number;
  /** How many more hops deep the job may hand off below the node. */
  readonly hopsLeft: number;
  readonly carrying: { running: number };
  /** The span that released the node (tracing on). */
  readonly trace?: TraceCarrier;
}

/**
 * A node begun by its releaser's completion (or by a carrier job, `carrier-job.ts`), to run next
 * in the same job.
 */
export function handedOffExecution(
  deps: ExecutorDeps,
  plan: CompiledPlan,
  carrier: Carrier,
  handed: HandedOffNode,
  tracked: { signal: AbortSignal; release: () => void },
): Execution {
  const node = plan.nodes.get(handed.nodeId)!;
  return {
    job: carrier.job,
    token: carrier.token,
    data: {
      runId: plan.runId,
      nodeId: handed.nodeId,
      generation: carrier.generation,
      continuation: false,
      throttled: false,
      moved: false,
      attemptsBefore: 0,
      ...(carrier.trace ? { trace: carrier.trace } : {}),
    },
    attempt: 1,
    attemptsAllowed: nodeJobAttempts(
      node,
      retryTableFor(deps),
      deps.lessons?.maxRetries,
      retryOfNode(deps.tools, node),
    ),
    queuedAt: Date.now(),
    inline: true,
    hopsLeft: carrier.hopsLeft,
    carrying: carrier.carrying,
    begun: { begin: handed.begin, startedAt: handed.startedAt, tracked },
  };
}

/**
 * After a crash, finishes what the crashed delivery of a job left: enqueues the ready children its
 * node released (the caller re-completed it), then walks the nodes the job ran handed off (their
 * last attempt names it, `carriedBy`), re-completing each — `complete-node.lua` on an existing
 * snapshot writes nothing and answers the ready children that node released and no other job runs —
 * and enqueues what they released. Job ids are deterministic, so an existing job is not added
 * twice; a node another job runs handed off is never answered, so nothing runs twice.
 */
async function recoverCarried(
  deps: ExecutorDeps,
  plan: CompiledPlan,
  generation: number,
  carriers: readonly string[],
  from: string,
  ready: readonly string[],
): Promise<void> {
  await enqueueReady(deps, plan, ready, generation);
  const seen = new Set<string>([from]);
  let frontier = [from];
  while (frontier.length > 0) {
    const children = [...new Set(frontier.flatMap((id) => plan.topology.children.get(id) ?? []))].filter(
      (id) => !seen.has(id),
    );
    const snapshots = await deps.store.snapshotsOf(plan.runId, children);
    frontier = [];
    for (const [child, snapshot] of snapshots) {
      const node = plan.nodes.get(child);
      const carriedBy = snapshot.attempts.at(-1)?.carriedBy;
      if (!node || carriedBy === undefined || !carriers.includes(carriedBy)) continue;
      seen.add(child);
      frontier.push(child);
      await enqueueReady(
        deps,
        plan,
        await recomplete(deps, plan, generation, carriers, node, snapshot),
        generation,
      );
    }
  }
}

/**
 * A node a crashed delivery of a job ran handed off and completed: `complete-node.lua` on its
 * existing snapshot writes nothing and answers the ready children it released that no other job
 * runs; the decision its failure asks for is made again, as the crash may have cut it off.
 */
async function recomplete(
  deps: ExecutorDeps,
  plan: CompiledPlan,
  generation: number,
  carriers: readonly string[],
  node: ExecutableNode,
  snapshot: NodeSnapshot,
): Promise<readonly string[]> {
  const done = await deps.store.completeNode(plan.runId, node.id, snapshot, {
    release: releasesDependents(node, snapshot),
    children: plan.topology.children.get(node.id) ?? [],
    charge: {},
    jobs: carriers,
  });
  if (snapshot.status === 'failed' && !continuesOnFailure(node)) {
    await decideFailure(deps, plan, node, snapshot, generation);
  }
  return done.status === 'running' && done.generation === generation ? done.ready : [];
}

/**
 * A node a crashed delivery of carrier job `carrier` ran and completed (`carrier-job.ts`): completed
 * again, then the nodes it handed off walked, as a redelivered node job does for its own node.
 */
export async function recoverCarriedNode(
  deps: ExecutorDeps,
  plan: CompiledPlan,
  generation: number,
  carrier: string,
  node: ExecutableNode,
  snapshot: NodeSnapshot,
): Promise<void> {
  const ready = await recomplete(deps, plan, generation, [carrier], node, snapshot);
  await recoverCarried(deps, plan, generation, [carrier], node.id, ready);
}

/** How long a job of a tool this process has no code for waits before it is offered again. */
const NOT_SERVED_HERE_DELAY_MS = 1000;

async function notServedHere(
  deps: ExecutorDeps,
  execution: Execution,
  tool: string,
  queue: string,
): Promise<never> {
  metrics.toolNotServedHere.inc({ tool, queue });
  deps.logger.warn(
    { runId: execution.data.runId, nodeId: execution.data.nodeId, tool, queue },
    'a node job of a custom tool this process has no code for: put back in its queue',
  );
  if (execution.token === undefined) throw new Error('putting a node job back needs a worker token');
  await execution.job.moveToDelayed(Date.now() + NOT_SERVED_HERE_DELAY_MS, execution.token);
  throw new DelayedError();
}

/** The id of a node job (BullMQ sets it; node jobs are added with one). */
const jobIdOf = (job: Job): string => job.id ?? '';

/**
 * The jobs whose handed-off nodes count as this execution's own: the job running it, and for a
 * node moved to its own job, the job it was handed off in.
 */
const carriersOf = (execution: Execution): string[] => [
  jobIdOf(execution.job),
  ...(execution.data.carrier !== undefined && !execution.inline ? [execution.data.carrier] : []),
];

/** A node's dispatch priority: its own, or the default for a node that gives none (wait nodes). */
const nodePriorityOf = (node: ExecutableNode): number =>
  ('priority' in node && typeof node.priority === 'number' ? node.priority : undefined) ??
  DEFAULT_NODE_PRIORITY;

/** Enqueues nodes of `plan` whose dependencies are all released. */
export async function enqueueReady(
  deps: Pick<ExecutorDeps, 'queues' | 'retries' | 'hooks' | 'logger' | 'lessons' | 'tools'>,
  plan: CompiledPlan,
  nodeIds: readonly string[],
  generation: number,
): Promise<void> {
  await enqueueNodes(deps.queues, plan.runId, generation, nodeJobsOf(deps, plan, nodeIds));
}

/** The jobs of nodes of `plan`, each with its attempts, queue and priority. */
export function nodeJobsOf(
  deps: Pick<ExecutorDeps, 'retries' | 'hooks' | 'logger' | 'lessons' | 'tools'>,
  plan: CompiledPlan,
  nodeIds: readonly string[],
): NodeToEnqueue[] {
  const table = retryTableFor(deps);
  return nodeIds.flatMap((id) => {
    const node = plan.nodes.get(id);
    if (!node) deps.logger.error({ runId: plan.runId, nodeId: id }, 'a ready node is not in the plan');
    if (!node) return [];
    const attempts = nodeJobAttempts(node, table, deps.lessons?.maxRetries, retryOfNode(deps.tools, node));
    const queue = queueOfNode(deps.tools, node);
    return [
      {
        id,
        attempts,
        ...(queue ? { queue } : {}),
        ...(plan.prioritized ? { priority: nodePriorityOf(node) } : {}),
      },
    ];
  });
}

function observeNode(node: ExecutableNode, snapshot: NodeSnapshot): void {
  const last = snapshot.attempts.at(-1);
  const label = executionOf(node).label(node);
  const outcome = snapshot.error?.code ?? (snapshot.status === 'succeeded' ? 'ok' : snapshot.status);
  metrics.nodeAttempts.inc({ kind: node.kind, tool: label, outcome });
  if (last) metrics.nodeDuration.observe({ kind: node.kind, tool: label }, last.durationMs / 1000);
  if (snapshot.error?.code === 'suspected_loop') metrics.loopSuspicions.inc();
  if (snapshot.error?.code === 'budget_exhausted')
    metrics.budgetExhaustions.inc({ budget: snapshot.error.budget });
}
