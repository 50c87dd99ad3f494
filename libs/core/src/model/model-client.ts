/**
 * One way to call a model: the `openai` SDK's chat completions, streamed, against OpenAI or any
 * OpenAI-compatible server. Every call reports model, tokens and latency. Failures are thrown as
 * ToolErrors carrying Tetraloop's error classes.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type OpenAI from 'openai';
import { providerHoldOffMs } from '../errors/retry-after.js';
import { ToolError, type NodeErrorData } from '../errors/node-error.js';
import { DEFAULT_BACKOFF, retryDelay, type BackoffPolicy } from '../policy/retry-policy.js';
import { classifyModelError, isRetryableModelError } from './model-errors.js';
import { takesThinking, type ModelConfig } from './model-config.js';

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

export interface FunctionTool {
  readonly name: string;
  readonly description: string;
  readonly parameters: Record<string, unknown>;
}

export interface ChatCall {
  readonly model?: string;
  readonly messages: ChatMessage[];
  /** Ask for a JSON answer matching this schema (structured output). */
  readonly schema?: { readonly name: string; readonly schema: Record<string, unknown> };
  readonly tools?: readonly FunctionTool[];
  /** Sampling temperature; the provider's default when absent. */
  readonly temperature?: number;
  readonly signal?: AbortSignal;
  /** Called with each piece of streamed text. */
  readonly onDelta?: (text: string) => void;
  /** In-process retries of retryable failures. @defaultValue 0 */
  readonly retries?: number;
  /**
   * How hard a reasoning model thinks: sent as `reasoning_effort`. `summary`: keep the reasoning
   * text the server streams (`reasoning_content` or `reasoning` deltas) as the result's `reasoning`.
   */
  readonly thinking?: ThinkingOptions;
}

import type { ThinkingEffort } from '../domain/thinking.js';
export { THINKING_EFFORTS, type ThinkingEffort } from '../domain/thinking.js';

export interface ThinkingOptions {
  readonly effort?: ThinkingEffort;
  readonly summary?: boolean;
}

export interface ModelUsage {
  promptTokens: number;
  completionTokens: number;
  /** Of the prompt tokens, those served from the provider's prompt cache (`prompt_tokens_details.cached_tokens`). */
  cachedPromptTokens?: number;
}

export interface ChatResult {
  readonly model: string;
  readonly text: string;
  readonly toolCalls: { id: string; name: string; arguments: string }[];
  readonly usage: ModelUsage;
  readonly latencyMs: number;
  /** Every call made, including failed attempts that were retried. */
  readonly calls: number;
  /**
   * When the provider's rate-limit headers say a limit is used up (`x-ratelimit-remaining-* : 0`):
   * how long until it resets. Flow control pauses the model's counters that long.
   */
  readonly holdOffMs?: number;
  /** The reasoning the server returned, when the call asked for it (`thinking.summary`). */
  readonly reasoning?: string;
}

/** The reasoning text of a streamed delta: `reasoning_content` (DeepSeek, vLLM) or `reasoning` (OpenRouter, Ollama). */
function reasoningOf(delta: object): string {
  const { reasoning_content: content, reasoning } = delta as {
    reasoning_content?: unknown;
    reasoning?: unknown;
  };
  if (typeof content === 'string') return content;
  return typeof reasoning === 'string' ? reasoning : '';
}

/**
 * The `openai` SDK, loaded at a process's first model call: some 150 modules that a process which
 * calls no model (the API, a tool worker) never loads, so it starts sooner.
 */
let openaiSdk: Promise<typeof OpenAI> | undefined;
const loadOpenAI = (): Promise<typeof OpenAI> => (openaiSdk ??= import('openai').then((m) => m.default));

export class ModelClient {
  private client: Promise<OpenAI> | undefined;
  // Local OpenAI-compatible servers accept any key; the SDK insists on one.
  private apiKey: string;

  constructor(
    readonly config: ModelConfig,
    private readonly backoff: BackoffPolicy = DEFAULT_BACKOFF,
  ) {
    this.apiKey = config.apiKey ?? 'unused';
  }

  /**
   * Uses `apiKey` for the calls from now on: a credential refresh (see `refreshCredentials` in
   * hooks/plugin.ts) that renewed the model's key.
   */
  setApiKey(apiKey: string): void {
    this.apiKey = apiKey;
  }

  /** The SDK's client, made at the first call, with the key set last. */
  private async sdkClient(): Promise<OpenAI> {
    this.client ??= loadOpenAI().then(
      (OpenAI) =>
        new OpenAI({
          apiKey: this.apiKey,
          ...(this.config.baseUrl ? { baseURL: this.config.baseUrl } : {}),
          timeout: this.config.timeoutMs,
          // Retries follow Tetraloop's own policy (error classes, jitter), not the SDK's.
          maxRetries: 0,
        }),
    );
    const client = await this.client;
    client.apiKey = this.apiKey;
    return client;
  }

  async chat(call: ChatCall): Promise<ChatResult> {
    const retries = call.retries ?? 0;
    for (let attempt = 1; ; attempt++) {
      try {
        const result = await this.once(call);
        return { ...result, calls: attempt };
      } catch (err) {
        const error: NodeErrorData =
          err instanceof ToolError ? err.toData() : classifyModelError(err, await loadOpenAI());
        if (attempt > retries || !isRetryableModelError(error) || call.signal?.aborted) {
          throw new ToolError(error.code, error.message, extraOf(error));
        }
        await sleep(
          retryDelay(attempt, error, this.backoff),
          undefined,
          call.signal ? { signal: call.signal } : {},
        );
      }
    }
  }

  private async once(call: ChatCall): Promise<Omit<ChatResult, 'calls'>> {
    const model = call.model ?? this.config.model;
    const started = performance.now();
    const client = await this.sdkClient();
    const { data: stream, response } = await client.chat.completions
      .create(
        {
          model,
          messages: call.messages as OpenAI.Chat.ChatCompletionMessageParam[],
          stream: true,
          stream_options: { include_usage: true },
          ...(call.temperature !== undefined ? { temperature: call.temperature } : {}),
          // Only to a model that takes it: another would refuse the request.
          ...(call.thinking?.effort && takesThinking(this.config, model)
            ? { reasoning_effort: call.thinking.effort }
            : {}),
          ...(call.schema
            ? {
                response_format: {
                  type: 'json_schema',
                  json_schema: { name: call.schema.name, schema: call.schema.schema },
                },
              }
            : {}),
          ...(call.tools?.length
            ? {
                tools: call.tools.map((t) => ({
                  type: 'function' as const,
                  function: { name: t.name, description: t.description, parameters: t.parameters },
                })),
              }
            : {}),
        },
        call.signal ? { signal: call.signal } : {},
      )
      .withResponse();
    const holdOffMs = providerHoldOffMs(response.headers);
    let text = '';
    let reasoning = '';
    const calls: { id: string; name: string; arguments: string }[] = [];
    const usage: ModelUsage = { promptTokens: 0, completionTokens: 0 };
    for await (const chunk of stream) {
      if (chunk.usage) {
        usage.promptTokens = chunk.usage.prompt_tokens;
        usage.completionTokens = chunk.usage.completion_tokens;
        const cached = chunk.usage.prompt_tokens_details?.cached_tokens;
        if (typeof cached === 'number' && cached > 0) usage.cachedPromptTokens = cached;
      }
      const delta = chunk.choices[0]?.delta;
      if (!delta) continue;
      if (call.thinking?.summary) reasoning += reasoningOf(delta);
      if (delta.content) {
        text += delta.content;
        call.onDelta?.(delta.content);
      }
      for (const tc of delta.tool_calls ?? []) {
        const slot = (calls[tc.index] ??= { id: '', name: '', arguments: '' });
        if (tc.id) slot.id = tc.id;
        if (tc.function?.name) slot.name += tc.function.name;
        if (tc.function?.arguments) slot.arguments += tc.function.arguments;
      }
    }
    return {
      model,
      text,
      toolCalls: calls.filter(Boolean),
      usage,
      latencyMs: Math.round(performance.now() - started),
      ...(holdOffMs !== undefined ? { holdOffMs } : {}),
      ...(reasoning ? { reasoning } : {}),
    };
  }
}

function extraOf(error: NodeErrorData): Record<string, unknown> {
  const { code: _code, message: _message, ...extra } = error;
  return extra;
}
