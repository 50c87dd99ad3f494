/**
 * An llm node. Minimal context by construction: the model gets the node's system prompt and its
 * prompt with the referenced dependency outputs filled in — nothing else of the run.
 */
import type { NodeErrorData } from '../errors/node-error.js';
import type { LlmNode } from '../graph/schema.js';
import { schemaProblems } from '../model/json-schema.js';
import type { ChatMessage } from '../model/model-client.js';
import { renderPrompt } from '../model/prompt-render.js';
import type { NodeSnapshot, NodeUsage } from '../runs/run-model.js';
import { callModel } from './model-call.js';
import { snapshotOf, type NodeContext } from './node-context.js';

export async function runLlmNode(
  ctx: NodeContext,
  node: LlmNode,
  onFailure: (error: NodeErrorData, usage?: NodeUsage) => Promise<NodeSnapshot>,
): Promise<NodeSnapshot> {
  const scope: Record<string, unknown> = { input: ctx.plan.input, ...Object.fromEntries(ctx.begin.reads) };
  const max = ctx.options.modelInputChars;
  const messages: ChatMessage[] = [];
  if (node.system) messages.push({ role: 'system', content: renderPrompt(node.system, scope, max) });
  messages.push({ role: 'user', content: renderPrompt(node.prompt, scope, max) });

  const outcome = await callModel(ctx, {
    ...(node.model ? { model: node.model } : {}),
    messages,
    ...(node.schema ? { schema: { name: 'answer', schema: node.schema } } : {}),
  });
  if (!outcome.ok) return onFailure(outcome.error);
  const { result } = outcome;
  const usage: NodeUsage = {
    promptTokens: result.usage.promptTokens,
    completionTokens: result.usage.completionTokens,
    totalTokens: result.usage.promptTokens + result.usage.completionTokens,
    modelCalls: result.calls,
  };
  if (!node.schema) return snapshotOf(ctx, 'succeeded', { output: { text: result.text }, usage });

  let parsed: unknown;
  try {
    parsed = JSON.parse(result.text) as unknown;
  } catch {
    return onFailure({ code: 'validation', message: 'the model answer is not JSON' }, usage);
  }
  const problems = schemaProblems(node.schema, parsed);
  if (problems.length > 0) {
    return onFailure(
      { code: 'validation', message: `the model answer does not match the schema: ${problems.join('; ')}` },
      usage,
    );
  }
  return snapshotOf(ctx, 'succeeded', { output: parsed, usage });
}
