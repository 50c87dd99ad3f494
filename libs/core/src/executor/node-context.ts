/** What every node kind's runner gets: the job, the node, the run's state as read at begin. */
import { hostname } from 'node:os';
import type { Job } from 'bullmq';
import type { Logger } from 'pino';
import type { NodeErrorData } from '../errors/node-error.js';
import type { ExecutableNode } from '../graph/schema.js';
import { resolveReferences } from '../graph/references.js';
import { callLimit, type CallLimit } from '../policy/limits.js';
import type { AttemptRecord, NodeSnapshot, NodeUsage } from '../runs/run-model.js';
import type { ModelClient } from '../model/model-client.js';
import type { BeginNodeResult } from '../state/run-store.js';
import type { Tool, ToolRegistry } from '../tools/tool.js';
import type { Engine } from './engine.js';
import { invokeTool, type ToolOutcome } from './invoke-tool.js';
import { argsOf, type CompiledPlan } from './plan-cache.js';
import type { RunAborts } from './run-aborts.js';

export const WORKER = `${hostname()}/${process.pid}`;

export interface NodeExecutorOptions {
  readonly tools: ToolRegistry;
  readonly aborts: RunAborts;
  /** @defaultValue 10000 */
  readonly defaultTimeoutMs: number;
  /** Absent when no model is configured: llm nodes and agents then fail with a clear error. */
  readonly model?: ModelClient;
  /** Each referenced value in a prompt is cut to this many characters. @defaultValue 8000 */
  readonly modelInputChars: number;
}

export interface NodeContext {
  readonly engine: Engine;
  readonly options: NodeExecutorOptions;
  readonly job: Job;
  readonly token: string | undefined;
  readonly plan: CompiledPlan;
  readonly node: ExecutableNode;
  readonly generation: number;
  /** The job re-entered after parking itself (loop interval, wait). */
  readonly continuation: boolean;
  /** 1-based attempt number of this execution. */
  readonly attempt: number;
  readonly startedAt: string;
  readonly started: number;
  readonly begin: BeginNodeResult;
  /** Aborted when the run is cancelled, fails elsewhere or times out. */
  readonly runSignal: AbortSignal;
  readonly log: Logger;
}

export const nowIso = (): string => new Date().toISOString();

/** This execution as an attempt record. */
export function attemptRecord(
  ctx: NodeContext,
  extra: { error?: NodeErrorData; retryDelayMs?: number } = {},
): AttemptRecord {
  return {
    attempt: ctx.attempt,
    startedAt: ctx.startedAt,
    finishedAt: nowIso(),
    durationMs: Math.round(performance.now() - ctx.started),
    worker: WORKER,
    ...extra,
  };
}

/** A final snapshot of this execution, with the attempts recorded before it. */
export function snapshotOf(
  ctx: NodeContext,
  status: NodeSnapshot['status'],
  result: { output?: unknown; error?: NodeErrorData; usage?: NodeUsage },
): NodeSnapshot {
  const attempt = attemptRecord(ctx, result.error ? { error: result.error } : {});
  return {
    status,
    ...(result.output !== undefined ? { output: result.output } : {}),
    ...(result.error ? { error: result.error } : {}),
    attempts: [...ctx.begin.attempts, attempt],
    startedAt: ctx.begin.attempts[0]?.startedAt ?? ctx.startedAt,
    finishedAt: attempt.finishedAt,
    durationMs: attempt.durationMs,
    ...(result.usage ? { usage: result.usage } : {}),
  };
}

/** The node's args with its dependencies' snapshots and the run input substituted. */
export function resolvedArgs(ctx: NodeContext): unknown {
  const scope: Record<string, unknown> = { input: ctx.plan.input, ...Object.fromEntries(ctx.begin.reads) };
  return resolveReferences(argsOf(ctx.node), scope);
}

/**
 * The tightest limit on a tool call made now. Without a `timeoutMs` of its own a node gets the
 * default timeout, or the tool's own minimum for these args when that is longer.
 */
export function limitFor(
  ctx: NodeContext,
  toolTimeUsedMs: number,
  toolMinimumMs = 0,
  modelCall = false,
): CallLimit {
  const timeoutMs = ctx.node.kind === 'wait' ? undefined : ctx.node.timeoutMs;
  // Model calls take longer than tool calls; their default is the model client's own timeout.
  const fallback =
    modelCall && ctx.options.model ? ctx.options.model.config.timeoutMs : ctx.options.defaultTimeoutMs;
  return callLimit({
    nodeTimeoutMs: timeoutMs ?? Math.max(fallback, toolMinimumMs),
    now: Date.now(),
    deadlineAt: ctx.begin.deadlineAt,
    toolTimeBudgetMs: ctx.begin.budget.toolTimeMs,
    toolTimeUsedMs,
  });
}

/**
 * Calls `tool` under the tightest limit. A call cut off by the run deadline is reported as aborted, one cut
 * off by the tool-time budget as budget_exhausted; only the node's own timeout is a `timeout`.
 */
export async function callTool(
  ctx: NodeContext,
  tool: Tool,
  args: unknown,
  toolTimeUsedMs: number,
): Promise<ToolOutcome> {
  const parsed = tool.input.safeParse(args);
  const limit = limitFor(ctx, toolTimeUsedMs, parsed.success ? tool.minTimeoutMs?.(parsed.data) : undefined);
  if (limit.ms <= 0) return { ok: false, error: limitError(limit) };
  const outcome = await invokeTool(
    tool,
    args,
    { runId: ctx.plan.runId, nodeId: ctx.node.id, idempotencyKey: `${ctx.plan.runId}:${ctx.node.id}` },
    { timeoutMs: limit.ms, runSignal: ctx.runSignal },
  );
  if (!outcome.ok && outcome.error.code === 'timeout' && limit.kind !== 'timeout') {
    return { ok: false, error: limitError(limit) };
  }
  return outcome;
}

function limitError(limit: CallLimit): NodeErrorData {
  switch (limit.kind) {
    case 'deadline':
      return { code: 'aborted', message: 'the run deadline passed' };
    case 'budget':
      return {
        code: 'budget_exhausted',
        message: 'the run used up its tool-time budget',
        budget: 'toolTimeMs',
      };
    case 'timeout':
      return { code: 'timeout', message: `timed out after ${limit.ms} ms` };
  }
}
