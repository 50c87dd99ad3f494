/**
 * Calls the model for a node: under the node's time limit and the run's abort signal, with
 * streamed text appended to the run's events (batched) and usage reported as an event.
 */
import { ToolError, toErrorData, type NodeErrorData } from '../errors/node-error.js';
import type { ChatCall, ChatResult } from '../model/model-client.js';
import { MODEL_VARIABLES } from '../model/model-config.js';
import { metrics } from '../telemetry/metrics.js';
import { limitFor, type NodeContext } from './node-context.js';

export function observeModelCall(result: Pick<ChatResult, 'model' | 'usage' | 'calls'>): void {
  metrics.modelCalls.inc({ model: result.model }, result.calls);
  metrics.modelTokens.inc({ model: result.model, type: 'prompt' }, result.usage.promptTokens);
  metrics.modelTokens.inc({ model: result.model, type: 'completion' }, result.usage.completionTokens);
}

/** How often streamed text is flushed to the event stream. */
const DELTA_FLUSH_MS = 50;

export type ModelOutcome = { ok: true; result: ChatResult } | { ok: false; error: NodeErrorData };

export async function callModel(
  ctx: NodeContext,
  call: Omit<ChatCall, 'signal' | 'onDelta'>,
  used: { tokens: number; toolTimeMs: number } = {
    tokens: ctx.begin.tokens,
    toolTimeMs: ctx.begin.toolTimeMs,
  },
): Promise<ModelOutcome> {
  const model = ctx.options.model;
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
  const limit = limitFor(ctx, used.toolTimeMs, 0, true);
  if (limit.ms <= 0) return { ok: false, error: { code: 'aborted', message: 'the run deadline passed' } };
  const timeout = AbortSignal.timeout(limit.ms);
  const signal = AbortSignal.any([ctx.runSignal, timeout]);

  const { store } = ctx.engine;
  let pending = '';
  let flushing: Promise<void> = Promise.resolve();
  const flush = (): void => {
    if (!pending) return;
    const text = pending;
    pending = '';
    flushing = flushing
      .then(() => store.appendEvent(ctx.plan.runId, 'assistant.delta', ctx.node.id, { text }))
      .catch(() => undefined);
  };
  const timer = setInterval(flush, DELTA_FLUSH_MS);
  try {
    const result = await model.chat({ ...call, signal, onDelta: (text) => (pending += text) });
    observeModelCall(result);
    await store.appendEvent(ctx.plan.runId, 'usage', ctx.node.id, {
      model: result.model,
      promptTokens: result.usage.promptTokens,
      completionTokens: result.usage.completionTokens,
      latencyMs: result.latencyMs,
    });
    return { ok: true, result };
  } catch (err) {
    if (ctx.runSignal.aborted) return { ok: false, error: { code: 'aborted', message: 'run aborted' } };
    if (timeout.aborted) {
      return {
        ok: false,
        error:
          limit.kind === 'timeout'
            ? { code: 'timeout', message: `model call timed out after ${limit.ms} ms` }
            : limit.kind === 'deadline'
              ? { code: 'aborted', message: 'the run deadline passed' }
              : {
                  code: 'budget_exhausted',
                  message: 'the run used up its tool-time budget',
                  budget: 'toolTimeMs',
                },
      };
    }
    return { ok: false, error: err instanceof ToolError ? err.toData() : toErrorData(err) };
  } finally {
    clearInterval(timer);
    flush();
    await flushing;
  }
}
