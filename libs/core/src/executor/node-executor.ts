/**
 * Executes one node job (the tool loop, L3): read the dependencies' snapshots, run the tool
 * under its deadline, write the node's snapshot once, release ready dependents.
 */
import { hostname } from 'node:os';
import type { Job } from 'bullmq';
import type { NodeErrorData } from '../errors/node-error.js';
import { resolveReferences } from '../graph/references.js';
import type { GraphNode } from '../graph/schema.js';
import { retriesFor, retryDelay } from '../policy/retry-policy.js';
import { NodeJobData } from '../queues/catalog.js';
import type { NodeSnapshot, RunStatus } from '../runs/run-model.js';
import type { ToolRegistry } from '../tools/tool.js';
import { enqueueNodes, type Engine } from './engine.js';
import { invokeTool } from './invoke-tool.js';
import type { CompiledPlan } from './plan-cache.js';
import type { RunAborts } from './run-aborts.js';

export interface NodeExecutorOptions {
  readonly tools: ToolRegistry;
  readonly aborts: RunAborts;
  /** @defaultValue 10000 */
  readonly defaultTimeoutMs: number;
}

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

const WORKER = `${hostname()}/${process.pid}`;

export interface NodeJobResult {
  readonly status: NodeSnapshot['status'] | 'gone';
}

export async function executeNodeJob(
  engine: Engine,
  options: NodeExecutorOptions,
  job: Job,
): Promise<NodeJobResult> {
  const { runId, nodeId } = NodeJobData.parse(job.data);
  const plan = await engine.plans.get(runId);
  const node = plan?.nodes.get(nodeId);
  // The run expired or was deleted: nothing to do, nothing to report to.
  if (!plan || !node) return { status: 'gone' };

  const attempt = job.attemptsMade + 1;
  const startedAt = new Date().toISOString();
  const reads = plan.reads.get(nodeId) ?? [];
  const begin = await engine.store.beginNode(runId, nodeId, reads, { status: 'running', startedAt, attempt });

  // A redelivered job whose node already has a snapshot reports it and does not run again.
  const snapshot =
    begin.own ??
    (begin.status === 'running'
      ? await runNode(engine, options, plan, node, attempt, startedAt, begin.reads)
      : notRunSnapshot(begin.status));

  await complete(engine, plan, node, snapshot);
  return { status: snapshot.status };
}

async function runNode(
  engine: Engine,
  options: NodeExecutorOptions,
  plan: CompiledPlan,
  node: GraphNode,
  attempt: number,
  startedAt: string,
  reads: ReadonlyMap<string, NodeSnapshot>,
): Promise<NodeSnapshot> {
  const tool = options.tools.get(node.tool);
  const log = engine.logger.child({ runId: plan.runId, nodeId: node.id, attempt });
  const started = performance.now();
  const scope: Record<string, unknown> = { input: plan.input, ...Object.fromEntries(reads) };
  const tracked = options.aborts.track(plan.runId);
  const outcome = tool
    ? await invokeTool(
        tool,
        resolveReferences(node.args, scope),
        { runId: plan.runId, nodeId: node.id, idempotencyKey: `${plan.runId}:${node.id}` },
        { timeoutMs: node.timeoutMs ?? options.defaultTimeoutMs, runSignal: tracked.signal },
      ).finally(tracked.release)
    : {
        ok: false as const,
        error: { code: 'validation', message: `unknown tool "${node.tool}"` } satisfies NodeErrorData,
      };
  const durationMs = Math.round(performance.now() - started);
  const base = {
    attempts: attempt,
    startedAt,
    finishedAt: new Date().toISOString(),
    durationMs,
    worker: WORKER,
  };

  if (outcome.ok) {
    log.debug({ durationMs }, 'node succeeded');
    return { status: 'succeeded', output: outcome.output, ...base };
  }
  const error = outcome.error;
  if (error.code === 'aborted') return { status: 'cancelled', error, ...base };
  if (attempt <= retriesFor(error.code, engine.retries, node.retry)) {
    const delayMs = retryDelay(attempt, error, engine.backoff);
    log.info({ code: error.code, delayMs }, 'node attempt failed; retrying');
    throw new RetryNodeError(error, delayMs);
  }
  log.info({ code: error.code, message: error.message }, 'node failed');
  // With onError "continue" the failure becomes data for the dependents.
  const output =
    node.onError === 'continue' ? { error: { code: error.code, message: error.message } } : undefined;
  return { status: 'failed', error, ...(output ? { output } : {}), ...base };
}

function notRunSnapshot(runStatus: RunStatus | null): NodeSnapshot {
  const now = new Date().toISOString();
  return {
    status: runStatus === 'cancelled' ? 'cancelled' : 'skipped',
    attempts: 0,
    finishedAt: now,
    durationMs: 0,
  };
}

async function complete(
  engine: Engine,
  plan: CompiledPlan,
  node: GraphNode,
  snapshot: NodeSnapshot,
): Promise<void> {
  const failsRun = snapshot.status === 'failed' && node.onError !== 'continue';
  const releases = snapshot.status === 'succeeded' || (snapshot.status === 'failed' && !failsRun);
  const children = plan.topology.children.get(node.id) ?? [];
  const done = await engine.store.completeNode(plan.runId, node.id, snapshot, releases ? children : []);
  if (failsRun && snapshot.error) {
    await engine.store.decide(
      plan.runId,
      'failed',
      {
        code: 'node_failed',
        message: `node "${node.id}" failed: ${snapshot.error.message}`,
        nodeId: node.id,
        cause: snapshot.error,
      },
      new Date().toISOString(),
    );
  }
  if (done.status === 'running') await enqueueNodes(engine, plan, done.ready);
}
