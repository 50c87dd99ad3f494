/**
 * An `llm` node: one model call. Minimal context by construction: the model gets the node's system
 * prompt and its prompt with the referenced dependency outputs filled in — nothing else of the run.
 * With `schema` (a JSON schema) the answer is structured and validated; without, the output is `{text}`.
 */
import { z } from 'zod';
import { nanoFromUsd, usdFromNano } from '../cost/price-table.js';
import type { NodeSnapshot, NodeUsage } from '../domain/node-snapshot.js';
import { CallNodeFields, PlannedNodeFields } from '../graph/schema.js';
import { compileSchema, schemaProblems } from '../model/json-schema.js';
import type { ChatMessage } from '../model/model-client.js';
import { renderPrompt } from '../model/prompt-render.js';
import { Thinking, thinkingOptions } from '../model/thinking.js';
import type { ExecutableKindSpec, NodeRun } from './kind.js';

export const LlmNode = z.strictObject({
  ...CallNodeFields,
  kind: z.literal('llm'),
  prompt: z.string().min(1).max(200_000),
  system: z.string().max(200_000).optional(),
  schema: z.record(z.string(), z.unknown()).optional(),
  model: z.string().min(1).max(200).optional(),
  /** How hard a reasoning model thinks, and whether its reasoning is kept (see model/thinking.ts). */
  thinking: Thinking.optional(),
});
export type LlmNode = z.infer<typeof LlmNode>;

async function runLlmNode(run: NodeRun<LlmNode>): Promise<NodeSnapshot> {
  const { node } = run;
  const max = run.modelInputChars;
  const messages: ChatMessage[] = [];
  const system = node.system ? renderPrompt(node.system, run.scope, max) : undefined;
  const prompt = renderPrompt(node.prompt, run.scope, max);
  if (system !== undefined) messages.push({ role: 'system', content: system });
  messages.push({ role: 'user', content: prompt });
  run.recordInput({ ...(system !== undefined ? { system } : {}), prompt });

  const thinking = thinkingOptions(node.thinking);
  const outcome = await run.callModel({
    ...(node.model ? { model: node.model } : {}),
    ...(thinking ? { thinking } : {}),
    messages,
    ...(node.schema ? { schema: { name: 'answer', schema: node.schema } } : {}),
  });
  if (!outcome.ok) return run.fail(outcome.error);
  const { result, costNanoUsd } = outcome;
  const usage: NodeUsage = {
    promptTokens: result.usage.promptTokens,
    completionTokens: result.usage.completionTokens,
    totalTokens: result.usage.promptTokens + result.usage.completionTokens,
    modelCalls: result.calls,
    ...(result.usage.cachedPromptTokens ? { cachedPromptTokens: result.usage.cachedPromptTokens } : {}),
    ...(costNanoUsd !== undefined ? { costUsd: usdFromNano(costNanoUsd) } : {}),
  };
  if (!node.schema) {
    const output = { text: result.text, ...(result.reasoning ? { reasoning: result.reasoning } : {}) };
    return run.snapshot('succeeded', { output, usage });
  }

  let parsed: unknown;
  try {
    parsed = JSON.parse(result.text) as unknown;
  } catch {
    return run.fail(
      { code: 'validation', message: 'the model answer is not JSON', invalidAnswer: true },
      usage,
    );
  }
  const problems = schemaProblems(node.schema, parsed);
  if (problems.length > 0) {
    return run.fail(
      {
        code: 'validation',
        message: `the model answer does not match the schema: ${problems.join('; ')}`,
        invalidAnswer: true,
      },
      usage,
    );
  }
  return run.snapshot('succeeded', { output: parsed, usage });
}

export const llmKind: ExecutableKindSpec<LlmNode> = {
  kind: 'llm',
  schema: LlmNode,
  referenceFields: [['prompt'], ['system'], ['retry', 'vary'], ['fallback']],
  check: (node, check) => {
    const ok = check.model(node.model, ['model']);
    if (node.schema) {
      try {
        compileSchema(node.schema);
      } catch (err) {
        check.issue(['schema'], `not a valid JSON schema: ${(err as Error).message}`);
        return undefined;
      }
    }
    return ok ? node : undefined;
  },
  planner: {
    schema: z.object({
      id: z.string(),
      kind: z.literal('llm'),
      prompt: z.string(),
      system: z.string().optional(),
      ...PlannedNodeFields,
    }),
    rule: 'An "llm" node: {"id", "kind": "llm", "prompt": "..."} (optional "system"); it sees only what its prompt references.',
  },
  variesOnRetry: true,
  mayBeFallback: true,
  replansInWindow: true,
  retry: (node) => node.retry,
  retryable: true,
  chargesToolCall: false,
  usesToolTime: true,
  // Model calls take longer than tool calls; their default is the model client's own timeout.
  defaultTimeout: 'model',
  timeoutMs: (node) => node.timeoutMs,
  mayRunHandedOff: true,
  // Its call is a model call, asked for when it is made.
  declaredToolCall: () => undefined,
  label: () => 'llm',
  continuesOnFailure: (node) => node.onError === 'continue',
  replansOnFailure: (node) => node.onError === 'replan',
  charge: (snapshot) =>
    snapshot.usage
      ? {
          promptTokens: snapshot.usage.promptTokens,
          completionTokens: snapshot.usage.completionTokens,
          modelCalls: snapshot.usage.modelCalls,
          // Its one call is priced (costUsd, exact in nano-dollars) or not.
          ...(snapshot.usage.costUsd !== undefined
            ? { costNanoUsd: nanoFromUsd(snapshot.usage.costUsd) }
            : { unpricedModelCalls: snapshot.usage.modelCalls }),
        }
      : {},
  run: runLlmNode,
};
