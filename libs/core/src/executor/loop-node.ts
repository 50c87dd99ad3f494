/**
 * A loop node: repeats a tool call until its exit condition holds or maxIterations is reached,
 * both checked here by the harness. Each iteration is recorded once (a redelivered job resumes
 * after the last recorded one); between iterations the job parks in the delayed set.
 */
import { DelayedError } from 'bullmq';
import type { NodeErrorData } from '../errors/node-error.js';
import type { LoopNode } from '../graph/schema.js';
import { conditionHolds } from '../policy/condition.js';
import type { NodeSnapshot } from '../runs/run-model.js';
import { callTool, limitFor, nowIso, resolvedArgs, snapshotOf, type NodeContext } from './node-context.js';

/** One iteration as recorded: what the exit condition is evaluated on. */
export interface Iteration {
  iteration: number;
  status: 'succeeded' | 'failed';
  output?: unknown;
  error?: NodeErrorData;
  startedAt: string;
  finishedAt: string;
  durationMs: number;
}

export type StopReason = 'condition' | 'maxIterations';

export async function runLoopNode(
  ctx: NodeContext,
  node: LoopNode,
  onFailure: (error: NodeErrorData) => Promise<NodeSnapshot>,
): Promise<NodeSnapshot> {
  const tool = ctx.options.tools.get(node.body.tool);
  if (!tool) return onFailure({ code: 'validation', message: `unknown tool "${node.body.tool}"` });
  const iterations = [...(ctx.begin.progress as Iteration[])];
  let { toolCalls, toolTimeMs } = ctx.begin;
  const args = resolvedArgs(ctx);

  for (;;) {
    const last = iterations.at(-1);
    if (last && node.until && conditionHolds(node.until, last)) return finished(ctx, iterations, 'condition');
    if (iterations.length >= node.maxIterations) return finished(ctx, iterations, 'maxIterations');
    if (last && node.intervalMs > 0) {
      const nextAt = Date.parse(last.finishedAt) + node.intervalMs;
      if (Date.now() < nextAt) return park(ctx, nextAt);
    }
    if (ctx.begin.budget.toolCalls !== undefined && toolCalls + 1 > ctx.begin.budget.toolCalls) {
      return onFailure({
        code: 'budget_exhausted',
        message: `the run used its ${ctx.begin.budget.toolCalls} tool calls`,
        budget: 'toolCalls',
      });
    }
    const n = iterations.length + 1;
    const startedAt = nowIso();
    const started = performance.now();
    const outcome = await callTool(ctx, tool, args, limitFor(ctx, toolTimeMs));
    if (!outcome.ok && (outcome.error.code === 'aborted' || outcome.error.code === 'budget_exhausted')) {
      return onFailure(outcome.error);
    }
    const iteration: Iteration = {
      iteration: n,
      status: outcome.ok ? 'succeeded' : 'failed',
      ...(outcome.ok ? { output: outcome.output } : { error: outcome.error }),
      startedAt,
      finishedAt: nowIso(),
      durationMs: Math.round(performance.now() - started),
    };
    const recorded = await ctx.engine.store.recordIteration(
      ctx.plan.runId,
      node.id,
      n,
      iteration,
      iteration.durationMs,
      {
        status: 'running',
        startedAt: ctx.startedAt,
        attempt: ctx.attempt,
        iterations: n,
      },
    );
    ({ toolCalls, toolTimeMs } = recorded);
    iterations.push(iteration);
  }
}

function finished(ctx: NodeContext, iterations: Iteration[], stoppedBy: StopReason): NodeSnapshot {
  const last = iterations.at(-1);
  return snapshotOf(ctx, 'succeeded', {
    output: {
      last: last?.output ?? null,
      ...(last?.error ? { lastError: last.error } : {}),
      iterations: iterations.length,
      stoppedBy,
    },
  });
}

async function park(ctx: NodeContext, until: number): Promise<never> {
  if (ctx.token === undefined) throw new Error('a loop node needs a worker token to park');
  await ctx.job.updateData({ ...(ctx.job.data as object), continuation: true });
  await ctx.job.moveToDelayed(until, ctx.token);
  throw new DelayedError();
}
