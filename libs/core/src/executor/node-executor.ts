/**
 * Executes one node job (the tool loop, L3): read the dependencies' snapshots, guard against
 * loops and spent budgets, run the node by its kind, write its snapshot once, release ready
 * dependents. A retry is handed back to BullMQ's backoff; a waiting node parks itself in the
 * delayed set; neither holds a worker slot.
 */
import type { Job } from 'bullmq';
import type { NodeErrorData } from '../errors/node-error.js';
import type { ExecutableNode } from '../graph/schema.js';
import { retriesFor, retryDelay } from '../policy/retry-policy.js';
import { NodeJobData } from '../queues/catalog.js';
import type { NodeSnapshot, NodeUsage, RunError, RunStatus } from '../runs/run-model.js';
import type { UsageCharge } from '../state/run-store.js';
import { metrics } from '../telemetry/metrics.js';
import { runLlmNode } from './llm-node.js';
import { enqueueNodes, retryTableFor, wakeParkedNodes, type Engine } from './engine.js';
import { runLoopNode } from './loop-node.js';
import {
  attemptRecord,
  callTool,
  nowIso,
  resolvedArgs,
  snapshotOf,
  type NodeContext,
  type NodeExecutorOptions,
} from './node-context.js';
import { afterToolCall, beforeToolCall } from './tool-hooks.js';
import { runWaitNode } from './wait-node.js';

export type { NodeExecutorOptions } from './node-context.js';

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
  readonly status: NodeSnapshot['status'] | 'gone' | 'stale';
}

/** Whether a failure of this node is data for its dependents rather than the end of the run. */
export const continuesOnFailure = (node: ExecutableNode): boolean =>
  node.kind === 'wait' ? node.onTimeout === 'continue' : node.onError === 'continue';

export async function executeNodeJob(
  engine: Engine,
  options: NodeExecutorOptions,
  job: Job,
  token: string | undefined,
): Promise<NodeJobResult> {
  const data = NodeJobData.parse(job.data);
  const plan = await engine.plans.get(data.runId, data.generation);
  const node = plan?.nodes.get(data.nodeId);
  // The run expired or was deleted: nothing to do, nothing to report to.
  if (!plan || !node) return { status: 'gone' };

  const attempt = job.attemptsMade + 1;
  const startedAt = nowIso();
  // Tracked before reading the run's status, so an abort published in between is not missed.
  const tracked = options.aborts.track(plan.runId);
  try {
    const begin = await engine.store.beginNode(plan.runId, node.id, {
      generation: data.generation,
      live: { status: 'running', startedAt, attempt },
      countExecution: !data.continuation,
      chargeCall: node.kind === 'tool',
      reads: plan.reads.get(node.id) ?? [],
    });
    if (begin.status === 'stale') return { status: 'stale' };
    const ctx: NodeContext = {
      engine,
      options,
      job,
      token,
      plan,
      node,
      generation: data.generation,
      continuation: data.continuation,
      attempt,
      startedAt,
      started: performance.now(),
      begin,
      runSignal: tracked.signal,
      log: engine.logger.child({ runId: plan.runId, nodeId: node.id, attempt }),
    };
    // A redelivered job whose node already has a snapshot reports it and does not run again.
    const snapshot =
      begin.own ??
      (begin.status === 'running' ? await runNode(ctx) : notRunSnapshot(begin.status, begin.attempts));
    if (!begin.own && begin.status === 'running') observeNode(node, snapshot);
    await complete(ctx, snapshot, begin.own !== null);
    return { status: snapshot.status };
  } finally {
    tracked.release();
  }
}

async function runNode(ctx: NodeContext): Promise<NodeSnapshot> {
  const { begin, engine, node } = ctx;
  if (!ctx.continuation) {
    if (begin.executions > engine.maxNodeExecutions) {
      ctx.log.warn({ executions: begin.executions }, 'suspected loop: node stopped');
      return failedSnapshot(ctx, {
        code: 'suspected_loop',
        message: `executed ${begin.executions} times in this run (limit ${engine.maxNodeExecutions})`,
        executions: begin.executions,
      });
    }
  }
  const spent = budgetSpent(ctx);
  if (spent) return failedSnapshot(ctx, spent);
  switch (node.kind) {
    case 'tool':
      return runToolNode(ctx, node.tool);
    case 'wait':
      return runWaitNode(ctx, node);
    case 'llm':
      return runLlmNode(ctx, node, (error, usage) => failureSnapshot(ctx, error, usage));
    case 'loop':
      return runLoopNode(ctx, node, (error) => failureSnapshot(ctx, error));
  }
}

/** The run's budget is spent before this call: the node ends `budget_exhausted`. */
export function budgetSpent(ctx: NodeContext): NodeErrorData | undefined {
  const { begin, node } = ctx;
  if (
    node.kind === 'tool' &&
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
    node.kind !== 'wait' &&
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

async function runToolNode(ctx: NodeContext, name: string): Promise<NodeSnapshot> {
  const tool = ctx.options.tools.get(name);
  if (!tool)
    return snapshotOf(ctx, 'failed', { error: { code: 'validation', message: `unknown tool "${name}"` } });
  const before = await beforeToolCall(ctx, name, resolvedArgs(ctx));
  if (!before.ok) return failedSnapshot(ctx, before.error);
  const outcome = await callTool(ctx, tool, before.args, ctx.begin.toolTimeMs);
  await afterToolCall(ctx, name, before.args, outcome);
  if (outcome.ok) return snapshotOf(ctx, 'succeeded', { output: outcome.output });
  return failureSnapshot(ctx, outcome.error);
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
  const { engine, node } = ctx;
  if (error.code === 'aborted') return snapshotOf(ctx, 'cancelled', { error });
  const retries = node.kind === 'wait' ? 0 : retriesFor(error.code, retryTableFor(engine), node.retry);
  if (ctx.attempt <= retries && !ctx.runSignal.aborted) {
    const delayMs = retryDelay(ctx.attempt, error, engine.backoff);
    if (error.code === 'auth' && engine.hooks.refreshCredentials && node.kind !== 'wait') {
      const tool =
        node.kind === 'tool'
          ? node.tool
          : node.kind === 'loop' && 'tool' in node.body
            ? node.body.tool
            : node.kind;
      try {
        await engine.hooks.refreshCredentials({ runId: ctx.plan.runId, nodeId: node.id, tool, error });
      } catch (err) {
        ctx.log.warn({ err }, 'credential refresh failed; not retrying');
        return failedSnapshot(ctx, error, usage);
      }
    }
    const until = new Date(Date.now() + delayMs).toISOString();
    await engine.store.recordAttempt(
      ctx.plan.runId,
      node.id,
      attemptRecord(ctx, { error, retryDelayMs: delayMs }),
      {
        status: 'retrying',
        attempt: ctx.attempt,
        until,
      },
    );
    ctx.log.info({ code: error.code, delayMs }, 'node attempt failed; retrying');
    metrics.nodeRetries.inc({ code: error.code });
    metrics.backoffDelay.observe({ code: error.code }, delayMs / 1000);
    metrics.nodeAttempts.inc({ kind: node.kind, tool: toolLabel(node), outcome: error.code });
    throw new RetryNodeError(error, delayMs);
  }
  return failedSnapshot(ctx, error, usage);
}

function failedSnapshot(ctx: NodeContext, error: NodeErrorData, usage?: NodeUsage): NodeSnapshot {
  ctx.log.info({ code: error.code, message: error.message }, 'node failed');
  // With onError "continue" the failure becomes data for the dependents.
  const output = continuesOnFailure(ctx.node)
    ? { error: { code: error.code, message: error.message } }
    : undefined;
  return snapshotOf(ctx, 'failed', { error, ...(output ? { output } : {}), ...(usage ? { usage } : {}) });
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

/** How a node's failure ends the run. */
function runErrorFor(nodeId: string, error: NodeErrorData): { status: RunStatus; error: RunError } {
  const code =
    error.code === 'budget_exhausted' || error.code === 'suspected_loop' ? error.code : 'node_failed';
  return {
    status: 'failed',
    error: { code, message: `node "${nodeId}" failed: ${error.message}`, nodeId, cause: error },
  };
}

async function complete(ctx: NodeContext, snapshot: NodeSnapshot, existed: boolean): Promise<void> {
  const { engine, plan, node } = ctx;
  const failsRun = snapshot.status === 'failed' && !continuesOnFailure(node);
  const release = snapshot.status === 'succeeded' || (snapshot.status === 'failed' && !failsRun);
  const done = await engine.store.completeNode(plan.runId, node.id, snapshot, {
    release,
    children: plan.topology.children.get(node.id) ?? [],
    charge: existed ? {} : chargeOf(node, snapshot),
    ...(node.kind === 'tool' ? { tool: node.tool } : {}),
  });
  const now = nowIso();
  if (failsRun && snapshot.error) {
    const { status, error } = runErrorFor(node.id, snapshot.error);
    // In a task run, some failures hand the run back to the plan loop instead of ending it.
    const replan =
      (node.kind !== 'wait' && node.onError === 'replan') ||
      snapshot.error.code === 'budget_exhausted' ||
      snapshot.error.code === 'suspected_loop';
    if (replan && (await engine.store.requestReplan(plan.runId, error, ctx.generation))) {
      ctx.log.info({ code: snapshot.error.code }, 'node handed the run back to the plan loop');
    } else if (await engine.store.decide(plan.runId, status, error, now, ctx.generation)) {
      await wakeParkedNodes(engine.store, engine.toolQueue, plan.runId);
    }
  } else if (
    snapshot.status === 'cancelled' &&
    ctx.begin.deadlineAt !== null &&
    Date.now() >= ctx.begin.deadlineAt
  ) {
    await engine.store.decide(
      plan.runId,
      'timed_out',
      deadlineError(plan.timeoutSeconds),
      now,
      ctx.generation,
    );
  }
  if (done.status === 'running' && done.generation === ctx.generation) {
    await enqueueNodes(engine, plan, done.ready, ctx.generation);
  }
}

/** The tool label of a node: its tool, or its kind for nodes that are not one tool. */
function toolLabel(node: ExecutableNode): string {
  if (node.kind === 'tool') return node.tool;
  if (node.kind === 'loop' && 'tool' in node.body) return node.body.tool;
  return node.kind;
}

function observeNode(node: ExecutableNode, snapshot: NodeSnapshot): void {
  const last = snapshot.attempts.at(-1);
  const outcome = snapshot.error?.code ?? (snapshot.status === 'succeeded' ? 'ok' : snapshot.status);
  metrics.nodeAttempts.inc({ kind: node.kind, tool: toolLabel(node), outcome });
  if (last) metrics.nodeDuration.observe({ kind: node.kind, tool: toolLabel(node) }, last.durationMs / 1000);
  if (snapshot.error?.code === 'suspected_loop') metrics.loopSuspicions.inc();
  if (snapshot.error?.code === 'budget_exhausted')
    metrics.budgetExhaustions.inc({ budget: snapshot.error.budget });
}

/** What a node's final execution used, charged to the run (loops charge per iteration instead). */
function chargeOf(node: ExecutableNode, snapshot: NodeSnapshot): UsageCharge {
  const last = snapshot.attempts.at(-1);
  return {
    ...(node.kind === 'tool' && last ? { toolTimeMs: last.durationMs } : {}),
    // Loop bodies charge each iteration as it happens; only llm nodes are charged here.
    ...(node.kind === 'llm' && snapshot.usage
      ? {
          promptTokens: snapshot.usage.promptTokens,
          completionTokens: snapshot.usage.completionTokens,
          modelCalls: snapshot.usage.modelCalls,
        }
      : {}),
  };
}

export const deadlineError = (timeoutSeconds: number): RunError => ({
  code: 'timed_out',
  message: `the run passed its ${timeoutSeconds} s deadline`,
});
