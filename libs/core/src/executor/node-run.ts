/**
 * The harness as a node kind's runner sees it ({@link NodeRun}): built per execution from the
 * node context, so runners never touch the store, the job or the queues themselves.
 */
import { WaitingChildrenError } from 'bullmq';
import type { NodeErrorData } from '../errors/node-error.js';
import type { NodeSnapshot, NodeUsage, RunDocument } from '../domain/run-model.js';
import type { ExecutableNode, MapNode, NodeRun } from '../nodes/index.js';
import { derivedRunId } from '../domain/run-id.js';
import { startChildRun } from './child-run.js';
import { callModel } from './model-call.js';
import {
  awaitSignal,
  callTool,
  markContinuation,
  ownJobFor,
  park,
  resolve,
  snapshotOf,
  type NodeContext,
} from './node-context.js';
import { mapItems } from './map-items.js';
import { sleepUntil } from './sleep.js';
import { afterToolCall, beforeToolCall } from './tool-hooks.js';

export function nodeRun<N extends ExecutableNode>(
  ctx: NodeContext & { node: N },
  fail: (error: NodeErrorData, usage?: NodeUsage) => Promise<NodeSnapshot>,
): NodeRun<N> {
  const { deps, plan, begin, node } = ctx;
  const runId = plan.runId;
  const childId = (n: number): string => derivedRunId(runId, node.id, ctx.generation, n);
  // A child run's output is the iteration's output: its blobs are read, as if the body ran here.
  const childOutcome = async (doc: RunDocument | null): Promise<RunDocument | null> =>
    doc && deps.store.blobs.expandDocument(doc, { nodes: false });
  return {
    node,
    runId,
    generation: ctx.generation,
    timeoutSeconds: plan.timeoutSeconds,
    attempt: ctx.attempt,
    startedAt: ctx.startedAt,
    usage: {
      toolCalls: begin.toolCalls,
      toolTimeMs: begin.toolTimeMs,
      tokens: begin.tokens,
      costNanoUsd: begin.costNanoUsd,
    },
    budget: begin.budget,
    deadlineAt: begin.deadlineAt,
    progress: begin.progress,
    tools: deps.tools,
    allowedTools: () => deps.allowedTools?.(plan.agentId),
    modelInputChars: deps.modelInputChars,
    signal: ctx.runSignal,
    // Read through, so the node's child logger is made only when its runner logs.
    get log() {
      return ctx.log;
    },
    scope: ctx.scope,
    resolve: (value) => resolve(ctx, value),
    recordInput: (value) => {
      ctx.call.input = value;
    },
    snapshot: (status, result) => snapshotOf(ctx, status, result),
    fail,
    callTool: (tool, args, used, call) => callTool(ctx, tool, args, used, call),
    beforeToolCall: (tool, args, request) => beforeToolCall(ctx, tool, args, request),
    afterToolCall: (tool, args, outcome) => afterToolCall(ctx, tool, args, outcome),
    callModel: (call, used) => callModel(ctx, call, used),
    awaitSignal: (signal, timeoutSeconds) => awaitSignal(ctx, { signal }, timeoutSeconds),
    park: (until) => park(ctx, until),
    sleepUntil: (wakeAt) => sleepUntil(ctx, wakeAt),
    recordIteration: async (n, iteration, charge) => {
      const recorded = await deps.store.recordIteration(runId, node.id, n, iteration, charge, {
        status: 'running',
        startedAt: ctx.startedAt,
        attempt: ctx.attempt,
        iterations: n,
      });
      return {
        toolCalls: recorded.toolCalls,
        toolTimeMs: recorded.toolTimeMs,
        tokens: recorded.tokens,
        costNanoUsd: recorded.costNanoUsd,
      };
    },
    steering: () => deps.store.steering(runId),
    event: async (type, data) => {
      await deps.store.appendEvent(runId, type, node.id, data);
    },
    childRun: async (n) => childOutcome(await deps.store.document(childId(n))),
    startChildRun: async (n, request) => {
      ownJobFor(ctx, 'start a child run');
      const id = childId(n);
      await startChildRun(
        deps,
        {
          runId: id,
          parentRunId: runId,
          parentNodeId: node.id,
          iteration: n,
          agentId: ctx.plan.agentId,
          tenant: ctx.plan.tenant,
          priority: ctx.plan.priority,
          ...request,
        },
        ctx.job,
      );
      return id;
    },
    mapItems: (items, options) => mapItems(ctx as NodeContext & { node: MapNode }, items, options),
    settledChildRun: async (n) => {
      if (ctx.token === undefined)
        throw new Error('a loop node needs a worker token to wait for a child run');
      await markContinuation(ctx);
      if (await ctx.job.moveToWaitingChildren(ctx.token)) throw new WaitingChildrenError();
      return childOutcome(await deps.store.document(childId(n)));
    },
  };
}
