/**
 * A `loop` node, the only place a loop may live: repeats its body until its exit condition holds
 * or maxIterations is reached, both checked here by the harness. The body is a tool call, a nested
 * graph run as a child run per iteration, or a tool-calling agent (one model turn per iteration).
 * Each iteration is recorded once (a redelivered job resumes after the last recorded one); between
 * iterations, and while a child run works, the job parks and holds no worker slot.
 */
import { z } from 'zod';
import { nanoFromUsd, usdFromNano } from '../cost/price-table.js';
import type { Budget, NodeSnapshot, NodeUsage } from '../domain/node-snapshot.js';
import { literalText } from '../graph/references.js';
import { Args, CallNodeFields, Condition, type GraphOf } from '../graph/schema.js';
import { conditionHolds } from '../policy/condition.js';
import { findSecretRefs } from '../secrets/secret-ref.js';
import { isToolUnavailable } from '../tools/custom-tool.js';
import type { ExecutableKindSpec, NodeRun, RunUsageSoFar } from './kind.js';
import { AgentBody, agentIteration } from './loop-agent.js';
import { nowIso } from '../domain/clock.js';
import { NodeEnded, type Iteration, type IterationResult, type IterationRunner } from './loop-iteration.js';

/** A loop body that calls one tool per iteration. */
export const ToolBody = z.strictObject({ tool: z.string().min(1).max(128), args: Args.default({}) });
export type ToolBody = z.infer<typeof ToolBody>;

/**
 * A loop body that runs a nested graph per iteration, as a child run. `graph` is checked by the
 * validator, recursively; `input` is what the nested graph reads as `input.*`.
 */
export const GraphBody = z.strictObject({ graph: z.unknown(), input: z.unknown().optional() });
export type GraphBody = {
  /** Checked by validation like any graph; `Graph` once validated. */
  graph: GraphOf;
  input?: unknown;
};

export const LoopNode = z.strictObject({
  ...CallNodeFields,
  kind: z.literal('loop'),
  /** A tool call (`{tool, args}`), a nested graph (`{graph, input}`) or an agent (`{agent}`). */
  body: z.union([ToolBody, GraphBody, AgentBody]),
  /** Stop as soon as an iteration satisfies this; without it the loop runs maxIterations times. */
  until: Condition.optional(),
  maxIterations: z.number().int().min(1).max(50),
  /** Pause between iterations; the worker slot is released meanwhile. */
  intervalMs: z.number().int().min(0).max(3_600_000).default(0),
});
export type LoopBody = ToolBody | GraphBody | AgentBody;
export type LoopNode = Omit<z.infer<typeof LoopNode>, 'body'> & { body: LoopBody };

export const isGraphBody = (body: LoopBody): body is GraphBody => 'graph' in body;
export const isAgentBody = (body: LoopBody): body is AgentBody => 'agent' in body;

export type StopReason = 'condition' | 'maxIterations' | 'final';

/** The graph of a loop-mode run: one agent loop over the task (taken literally) with the agent's tools. */
export function loopModeGraph(
  task: string,
  tools: readonly string[],
  maxIterations: number,
  system?: string,
  call: Pick<AgentBody['agent'], 'model' | 'thinking' | 'secrets'> = {},
): GraphOf<LoopNode> {
  const prompt = literalText(task);
  const literalSystem = system === undefined ? undefined : literalText(system);
  const agent: AgentBody['agent'] = {
    prompt,
    tools: [...tools],
    ...(literalSystem ? { system: literalSystem } : {}),
    ...(call.model !== undefined ? { model: call.model } : {}),
    ...(call.thinking !== undefined ? { thinking: call.thinking } : {}),
    ...(call.secrets?.length ? { secrets: [...call.secrets] } : {}),
  };
  return {
    nodes: [
      {
        id: 'agent',
        kind: 'loop',
        body: { agent },
        maxIterations,
        intervalMs: 0,
      },
    ],
    edges: [],
  };
}

async function runLoopNode(run: NodeRun<LoopNode>): Promise<NodeSnapshot> {
  const { node } = run;
  const iterations = [...(run.progress as Iteration[])];
  let usage = run.usage;
  const body = node.body;
  const runIteration = isGraphBody(body)
    ? graphIteration(run, body)
    : isAgentBody(body)
      ? agentIteration(run, body, iterations)
      : toolIteration(run, body);
  if (!runIteration)
    return run.fail({ code: 'validation', message: `unknown tool "${(body as ToolBody).tool}"` });

  for (;;) {
    const last = iterations.at(-1);
    if (last && isAgentBody(body) && last.turn && !last.turn.assistant.tool_calls?.length) {
      return finished(run, iterations, 'final');
    }
    if (last && node.until && conditionHolds(node.until, last)) return finished(run, iterations, 'condition');
    if (iterations.length >= node.maxIterations) return finished(run, iterations, 'maxIterations');
    if (last && node.intervalMs > 0) {
      const nextAt = Date.parse(last.finishedAt) + node.intervalMs;
      if (Date.now() < nextAt) return run.park(nextAt);
    }
    const n = iterations.length + 1;
    let result: IterationResult;
    try {
      result = await runIteration(n, usage);
    } catch (err) {
      if (err instanceof NodeEnded) return run.fail(err.error);
      throw err;
    }
    usage = await run.recordIteration(n, result.iteration, result.charge);
    iterations.push(result.iteration);
    if (result.final) return finished(run, iterations, 'final');
  }
}

function toolIteration(run: NodeRun<LoopNode>, body: ToolBody): IterationRunner | undefined {
  const tool = run.tools.get(body.tool);
  if (!tool) return undefined;
  const args = run.resolve(body.args);
  const secrets = findSecretRefs(body.args);
  const { budget } = run;
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
    const outcome = await run.callTool(tool, args, usage.toolTimeMs, { index: String(n), secrets });
    if (
      !outcome.ok &&
      (outcome.error.code === 'aborted' ||
        outcome.error.code === 'budget_exhausted' ||
        isToolUnavailable(outcome.error))
    ) {
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
function graphIteration(run: NodeRun<LoopNode>, body: GraphBody): IterationRunner {
  const input = run.resolve(body.input) ?? null;
  return async (n, usage) => {
    let child = await run.childRun(n);
    let childId = child?.runId;
    if (!child) {
      const budget = childBudget(run.budget, usage);
      const spent =
        (['toolCalls', 'toolTimeMs', 'tokens'] as const).find((k) => (budget[k] ?? 1) < 1) ??
        (budget.costUsd !== undefined && budget.costUsd <= 0 ? 'costUsd' : undefined);
      if (spent) {
        throw new NodeEnded({ code: 'budget_exhausted', message: 'the run used its budget', budget: spent });
      }
      const timeLeft = run.deadlineAt === null ? run.timeoutSeconds * 1000 : run.deadlineAt - Date.now();
      if (timeLeft <= 0) throw new NodeEnded({ code: 'aborted', message: 'the run deadline passed' });
      childId = await run.startChildRun(n, {
        graph: body.graph,
        input,
        timeoutSeconds: Math.max(1, Math.ceil(timeLeft / 1000)),
        budget,
      });
    }
    if (!child?.finishedAt) child = await run.settledChildRun(n);
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
        ...(childId ? { runId: childId } : {}),
        startedAt: started,
        finishedAt,
        durationMs: Math.max(0, Date.parse(finishedAt) - Date.parse(started)),
      },
      // Recorded once with the iteration: the child's calls, time and tokens are the parent's.
      charge: {
        toolCalls: settled?.usage.toolCalls ?? 0,
        toolTimeMs: settled?.usage.toolTimeMs ?? 0,
        promptTokens: settled?.usage.promptTokens ?? 0,
        completionTokens: settled?.usage.completionTokens ?? 0,
        modelCalls: settled?.usage.modelCalls ?? 0,
        costNanoUsd: nanoFromUsd(settled?.usage.costUsd ?? 0),
        unpricedModelCalls: settled?.usage.unpricedModelCalls ?? 0,
      },
    };
  };
}

/**
 * A child run's budget: what is left of the parent's (tool calls, tool time, tokens and money), so
 * a child never spends more than its parent still may.
 */
export function childBudget(limit: Budget, used: RunUsageSoFar): Budget {
  return {
    ...(limit.toolCalls !== undefined ? { toolCalls: limit.toolCalls - used.toolCalls } : {}),
    ...(limit.toolTimeMs !== undefined ? { toolTimeMs: limit.toolTimeMs - used.toolTimeMs } : {}),
    ...(limit.tokens !== undefined ? { tokens: limit.tokens - used.tokens } : {}),
    ...(limit.costUsd !== undefined
      ? { costUsd: usdFromNano(nanoFromUsd(limit.costUsd) - used.costNanoUsd) }
      : {}),
  };
}

function finished(run: NodeRun<LoopNode>, iterations: Iteration[], stoppedBy: StopReason): NodeSnapshot {
  const last = iterations.at(-1);
  const usage = agentUsage(iterations);
  return run.snapshot('succeeded', {
    ...(usage ? { usage } : {}),
    output: {
      ...(last?.turn ? { text: last.turn.assistant.content ?? '' } : {}),
      ...(last?.turn?.reasoning ? { reasoning: last.turn.reasoning } : {}),
      last: last?.output ?? null,
      ...(last?.error ? { lastError: last.error } : {}),
      iterations: iterations.length,
      stoppedBy,
    },
  });
}

/** Tokens, calls and cost of an agent loop, for its snapshot (already charged to the run per iteration). */
function agentUsage(iterations: readonly Iteration[]): NodeUsage | undefined {
  const turns = iterations.filter((i) => i.turn);
  if (turns.length === 0) return undefined;
  const sum = (k: 'promptTokens' | 'completionTokens' | 'cachedPromptTokens'): number =>
    turns.reduce((t, i) => t + (i.turn?.usage[k] ?? 0), 0);
  const promptTokens = sum('promptTokens');
  const completionTokens = sum('completionTokens');
  const cachedPromptTokens = sum('cachedPromptTokens');
  const priced = turns.filter((i) => i.turn?.costUsd !== undefined);
  // Summed in nano-dollars, as the run's usage is.
  const costNano = priced.reduce((t, i) => t + nanoFromUsd(i.turn?.costUsd ?? 0), 0);
  return {
    promptTokens,
    completionTokens,
    totalTokens: promptTokens + completionTokens,
    modelCalls: turns.length,
    ...(cachedPromptTokens > 0 ? { cachedPromptTokens } : {}),
    ...(priced.length > 0 ? { costUsd: usdFromNano(costNano) } : {}),
  };
}

export const loopKind: ExecutableKindSpec<LoopNode> = {
  kind: 'loop',
  schema: LoopNode,
  // Only the body's own fields exist for each kind of body; the others are absent and skipped.
  referenceFields: [
    ['body', 'args'],
    ['body', 'input'],
    ['body', 'agent', 'prompt'],
    ['body', 'agent', 'system'],
    ['fallback'],
  ],
  check: (node, check) => {
    const body = node.body;
    if (isAgentBody(body)) {
      let ok = check.model(body.agent.model, ['body', 'agent', 'model']);
      (body.agent.tools ?? []).forEach((name, t) => {
        ok = check.toolName(name, ['body', 'agent', 'tools', t]) && ok;
      });
      ok = check.secretNames(body.agent.secrets ?? [], ['body', 'agent', 'secrets']) && ok;
      return ok ? node : undefined;
    }
    if (!isGraphBody(body)) {
      return check.toolCall(body.tool, body.args, ['body'])
        ? { ...node, body: { tool: body.tool, args: body.args } }
        : undefined;
    }
    const inner = check.nested(body.graph, ['body', 'graph']);
    return inner ? { ...node, body: { ...body, graph: inner } } : undefined;
  },
  variesOnRetry: false,
  mayBeFallback: false,
  replansInWindow: false,
  retry: (node) => node.retry,
  retryable: true,
  // Loop bodies charge each iteration as it happens.
  chargesToolCall: false,
  usesToolTime: true,
  defaultTimeout: 'per-call',
  timeoutMs: (node) => node.timeoutMs,
  // It parks between iterations and while a child run works.
  mayRunHandedOff: false,
  // A call per iteration, asked for when it is made.
  declaredToolCall: () => undefined,
  label: (node) => ('tool' in node.body ? node.body.tool : 'loop'),
  continuesOnFailure: (node) => node.onError === 'continue',
  replansOnFailure: (node) => node.onError === 'replan',
  charge: () => ({}),
  run: runLoopNode,
};
