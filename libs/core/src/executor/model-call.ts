/**
 * Calls the model for a node: under the node's time limit and the run's abort signal, with
 * streamed text appended to the run's events (batched), and usage and cost reported as an event.
 */
import { limitError } from '../errors/limit-error.js';
import { ToolError, toErrorData } from '../errors/node-error.js';
import type { ChatCall } from '../model/model-client.js';
import { MODEL_CALL_TOOL } from '../memory/lesson-rules.js';
import { MODEL_VARIABLES } from '../model/model-config.js';
import type { ModelOutcome, RunUsageSoFar } from '../nodes/index.js';
import { lessonsForModelCall } from '../reflect/lesson-effects.js';
import { metrics, observeModelCall } from '../telemetry/metrics.js';
import { callIn, endChat, startChat } from '../telemetry/genai.js';
import { failedCallEnd, passFlow } from './flow-gate.js';
import { costFields, costGate, recordModelCost } from './model-cost.js';
import { limitFor, type NodeContext } from './node-context.js';
import { linkedAbort } from './linked-abort.js';

/** How often streamed text is flushed to the event stream. */
const DELTA_FLUSH_MS = 50;

export async function callModel(
  ctx: NodeContext,
  call: Omit<ChatCall, 'signal' | 'onDelta'>,
  used: Pick<RunUsageSoFar, 'tokens' | 'toolTimeMs' | 'costNanoUsd'> = ctx.begin,
): Promise<ModelOutcome> {
  const model = ctx.deps.model;
  if (!model)
    return {
      ok: false,
      error: { code: 'validation', message: `no model is configured: set ${MODEL_VARIABLES}` },
    };
  const { budget } = ctx.begin;
  if (budget.tokens !== undefined && used.tokens >= budget.tokens) {
    return {
      ok: false,
      error: {
        code: 'budget_exhausted',
        message: `the run used its ${budget.tokens} tokens`,
        budget: 'tokens',
      },
    };
  }
  // The tenant's daily cap and the money budget (spent: fail, or park for a budget decision).
  const overBudget = await costGate(ctx, used.costNanoUsd);
  if (overBudget) return { ok: false, error: overBudget };
  const modelName = call.model ?? model.config.model;
  ctx.call.tool = MODEL_CALL_TOOL;
  ctx.call.target = modelName;
  ctx.call.rateLimit = undefined;
  if (ctx.deps.lessons) {
    const shaped = await lessonsForModelCall(
      ctx.deps.lessons,
      ctx.plan.memoryAgent,
      modelName,
      ctx.node.id,
      call,
    );
    call = shaped.call;
    if (shaped.applied && !ctx.call.lessons.includes(shaped.applied)) ctx.call.lessons.push(shaped.applied);
  }
  const limit = limitFor(ctx, used.toolTimeMs, 0, true);
  if (limit.ms <= 0) return { ok: false, error: limitError(limit) };
  const flow = await passFlow(ctx, {
    tool: MODEL_CALL_TOOL,
    model: modelName,
    promptChars: call.messages.reduce((n, m) => n + JSON.stringify(m).length, 0),
    limitMs: limit.ms,
  });
  if (!flow.ok) return flow;
  const stop = linkedAbort([ctx.runSignal], limit.ms);
  const { signal } = stop;

  const { store } = ctx.deps;
  let pending = '';
  let flushing: Promise<void> = Promise.resolve();
  const flush = (): void => {
    if (!pending) return;
    const text = pending;
    pending = '';
    flushing = flushing
      .then(async () => {
        await store.appendEvent(ctx.plan.runId, 'assistant.delta', ctx.node.id, { text });
      })
      .catch(() => undefined);
  };
  const timer = setInterval(flush, DELTA_FLUSH_MS);
  // A model call's span and metrics, with the OpenTelemetry GenAI semantic conventions.
  const chat = startChat(modelName, call.temperature);
  let ended = false;
  try {
    const result = await callIn(chat, () =>
      model.chat({ ...call, signal, onDelta: (text) => (pending += text) }),
    );
    endChat(chat, { answer: result });
    ended = true;
    await flow.pass?.end({
      succeeded: true,
      usedTokens: result.usage.promptTokens + result.usage.completionTokens,
      ...(result.holdOffMs !== undefined ? { holdOffMs: result.holdOffMs } : {}),
    });
    observeModelCall(result, ctx.plan.agentId);
    const costNanoUsd = await recordModelCost(ctx.deps, ctx.plan, result.model, result.usage, result.calls);
    await store.appendEvent(ctx.plan.runId, 'usage', ctx.node.id, {
      model: result.model,
      promptTokens: result.usage.promptTokens,
      completionTokens: result.usage.completionTokens,
      ...(result.usage.cachedPromptTokens ? { cachedPromptTokens: result.usage.cachedPromptTokens } : {}),
      ...costFields(costNanoUsd),
      latencyMs: result.latencyMs,
    });
    return { ok: true, result, ...(costNanoUsd !== undefined ? { costNanoUsd } : {}) };
  } catch (err) {
    const error = err instanceof ToolError ? err.toData() : toErrorData(err);
    // The model call's own failure (not one of the bookkeeping after its answer).
    if (!ended) endChat(chat, { errorType: error.code, message: error.message });
    await flow.pass?.end(failedCallEnd(error));
    if (error.code !== 'aborted') metrics.modelCallErrors.inc({ model: modelName, code: error.code });
    if (ctx.runSignal.aborted) return { ok: false, error: { code: 'aborted', message: 'run aborted' } };
    if (stop.timedOut()) return { ok: false, error: limitError(limit, 'model call') };
    return { ok: false, error };
  } finally {
    stop.release();
    clearInterval(timer);
    flush();
    await flushing;
  }
}
