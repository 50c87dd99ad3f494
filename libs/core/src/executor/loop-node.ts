/**
 * A loop node: repeats its body until its exit condition holds or maxIterations is reached, both
 * checked here by the harness. The body is a tool call, a nested graph run as a child run per
 * iteration, or a tool-calling agent (one model turn per iteration). Each iteration is recorded once (a redelivered job resumes after the last recorded
 * one); between iterations, and while a child run works, the job parks and holds no worker slot.
 */
import { DelayedError, WaitingChildrenError } from 'bullmq';
import type { NodeErrorData } from '../errors/node-error.js';
import { isAgentBody, isGraphBody, type GraphBody, type LoopNode, type ToolBody } from '../graph/schema.js';
import type { NodeUsage } from '../runs/run-model.js';
import { agentIteration } from './agent-iteration.js';
import { NodeEnded, type Iteration, type IterationResult, type IterationRunner } from './loop-iteration.js';
import { conditionHolds } from '../policy/condition.js';
import type { NodeSnapshot } from '../runs/run-model.js';
import { derivedRunId, startChildRun } from './child-run.js';
import { callTool, nowIso, resolvedArgs, snapshotOf, type NodeContext } from './node-context.js';

export type StopReason = 'condition' | 'maxIterations' | 'final';

export async function runLoopNode(
  ctx: NodeContext,
  node: LoopNode,
  onFailure: (error: NodeErrorData) => Promise<NodeSnapshot>,
): Promise<NodeSnapshot> {
  const iterations = [...(ctx.begin.progress as Iteration[])];
  let usage = { toolCalls: ctx.begin.toolCalls, toolTimeMs: ctx.begin.toolTimeMs, tokens: ctx.begin.tokens };
  const body = node.body;
  const runIteration = isGraphBody(body)
    ? graphIteration(ctx, node, body)
    : isAgentBody(body)
      ? agentIteration(ctx, body, iterations)
      : toolIteration(ctx, body);
  if (!runIteration)
    return onFailure({ code: 'validation', message: `unknown tool "${(body as ToolBody).tool}"` });

  for (;;) {
    const last = iterations.at(-1);
    if (last && isAgentBody(body) && last.turn && !last.turn.assistant.tool_calls?.length) {
      return finished(ctx, iterations, 'final');
    }
    if (last && node.until && conditionHolds(node.until, last)) return finished(ctx, iterations, 'condition');
    if (iterations.length >= node.maxIterations) return finished(ctx, iterations, 'maxIterations');
    if (last && node.intervalMs > 0) {
      const nextAt = Date.parse(last.finishedAt) + node.intervalMs;
      if (Date.now() < nextAt) return park(ctx, nextAt);
    }
    const n = iterations.length + 1;
    let result: IterationResult;
    try {
      result = await runIteration(n, usage);
    } catch (err) {
      if (err instanceof NodeEnded) return onFailure(err.error);
      throw err;
    }
    const recorded = await ctx.engine.store.recordIteration(
      ctx.plan.runId,
      node.id,
      n,
      result.iteration,
      result.charge,
      {
        status: 'running',
        startedAt: ctx.startedAt,
        attempt: ctx.attempt,
        iterations: n,
      },
    );
    usage = { toolCalls: recorded.toolCalls, toolTimeMs: recorded.toolTimeMs, tokens: recorded.tokens };
    iterations.push(result.iteration);
    if (result.final) return finished(ctx, iterations, 'final');
  }
}

function toolIteration(ctx: NodeContext, body: ToolBody): IterationRunner | undefined {
  const tool = ctx.options.tools.get(body.tool);
  if (!tool) return undefined;
  const args = resolvedArgs(ctx);
  const { budget } = ctx.begin;
  return async (n, usage) => {
    if (budget.toolCalls !== undefined && usage.toolCalls + 1 > budget.toolCalls) {
      throw new NodeEnded({
        code: 'budget_exhausted',
        message: `the run used its ${budget.toolCalls} tool calls`,
        budget: 'toolCalls',
      });
    }
    const startedAt = nowIso();
    const started = performance.now();
    const outcome = await callTool(ctx, tool, args, usage.toolTimeMs);
    if (!outcome.ok && (outcome.error.code === 'aborted' || outcome.error.code === 'budget_exhausted')) {
      throw new NodeEnded(outcome.error);
    }
    const durationMs = Math.round(performance.now() - started);
    return {
      iteration: {
        iteration: n,
        status: outcome.ok ? 'succeeded' : 'failed',
        ...(outcome.ok ? { output: outcome.output } : { error: outcome.error }),
        startedAt,
        finishedAt: nowIso(),
        durationMs,
      },
      charge: { toolCalls: 1, toolTimeMs: durationMs },
    };
  };
}

/**
 * Runs iteration `n` as a child run of the nested graph: starts it (once), parks the loop job in
 * waiting-children until it settles, then reads its outcome. The child gets what is left of the
 * parent's deadline and budget, and its usage is charged to the parent.
 */
function graphIteration(ctx: NodeContext, node: LoopNode, body: GraphBody): IterationRunner {
  const { engine, plan, job, begin } = ctx;
  const input = (resolvedArgs(ctx) as { input?: unknown }).input ?? null;
  return async (n, usage) => {
    const childId = derivedRunId(plan.runId, node.id, ctx.generation, n);
    let child = await engine.store.document(childId);
    if (!child) {
      const budget = {
        ...(begin.budget.toolCalls !== undefined
          ? { toolCalls: begin.budget.toolCalls - usage.toolCalls }
          : {}),
        ...(begin.budget.toolTimeMs !== undefined
          ? { toolTimeMs: begin.budget.toolTimeMs - usage.toolTimeMs }
          : {}),
      };
      if ((budget.toolCalls ?? 1) < 1 || (budget.toolTimeMs ?? 1) < 1) {
        throw new NodeEnded({
          code: 'budget_exhausted',
          message: 'the run used its budget',
          budget: (budget.toolCalls ?? 1) < 1 ? 'toolCalls' : 'toolTimeMs',
        });
      }
      const timeLeft = begin.deadlineAt === null ? plan.timeoutSeconds * 1000 : begin.deadlineAt - Date.now();
      if (timeLeft <= 0) throw new NodeEnded({ code: 'aborted', message: 'the run deadline passed' });
      await startChildRun(
        engine,
        {
          runId: childId,
          parentRunId: plan.runId,
          parentNodeId: node.id,
          iteration: n,
          graph: body.graph,
          input,
          timeoutSeconds: Math.max(1, Math.ceil(timeLeft / 1000)),
          budget,
        },
        job,
      );
    }
    if (!child?.finishedAt) {
      if (ctx.token === undefined)
        throw new Error('a loop node needs a worker token to wait for a child run');
      await job.updateData({ ...(job.data as object), continuation: true });
      if (await job.moveToWaitingChildren(ctx.token)) throw new WaitingChildrenError();
      child = await engine.store.document(childId);
    }
    const settled = child?.finishedAt ? child : null;
    const started = child?.createdAt ?? nowIso();
    const finishedAt = settled?.finishedAt ?? nowIso();
    return {
      iteration: {
        iteration: n,
        status: settled?.status === 'succeeded' ? 'succeeded' : 'failed',
        ...(settled?.status === 'succeeded'
          ? { output: settled.output }
          : {
              error: settled?.error ?? { code: 'internal', message: `child run ${childId} did not settle` },
            }),
        runId: childId,
        startedAt: started,
        finishedAt,
        durationMs: Math.max(0, Date.parse(finishedAt) - Date.parse(started)),
      },
      charge: { toolCalls: settled?.usage.toolCalls ?? 0, toolTimeMs: settled?.usage.toolTimeMs ?? 0 },
    };
  };
}

function finished(ctx: NodeContext, iterations: Iteration[], stoppedBy: StopReason): NodeSnapshot {
  const last = iterations.at(-1);
  const usage = agentUsage(iterations);
  return snapshotOf(ctx, 'succeeded', {
    ...(usage ? { usage } : {}),
    output: {
      ...(last?.turn ? { text: last.turn.assistant.content ?? '' } : {}),
      last: last?.output ?? null,
      ...(last?.error ? { lastError: last.error } : {}),
      iterations: iterations.length,
      stoppedBy,
    },
  });
}

/** Tokens and calls of an agent loop, for its snapshot (already charged to the run per iteration). */
function agentUsage(iterations: readonly Iteration[]): NodeUsage | undefined {
  const turns = iterations.filter((i) => i.turn);
  if (turns.length === 0) return undefined;
  const sum = (k: 'promptTokens' | 'completionTokens'): number =>
    turns.reduce((t, i) => t + (i.turn?.usage[k] ?? 0), 0);
  const promptTokens = sum('promptTokens');
  const completionTokens = sum('completionTokens');
  return {
    promptTokens,
    completionTokens,
    totalTokens: promptTokens + completionTokens,
    modelCalls: turns.length,
  };
}

async function park(ctx: NodeContext, until: number): Promise<never> {
  if (ctx.token === undefined) throw new Error('a loop node needs a worker token to park');
  await ctx.job.updateData({ ...(ctx.job.data as object), continuation: true });
  await ctx.job.moveToDelayed(until, ctx.token);
  throw new DelayedError();
}
