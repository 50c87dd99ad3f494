/** How Tetraloop reaches a model: any OpenAI-compatible endpoint, through the `openai` SDK. */
export interface ModelConfig {
  readonly apiKey: string | undefined;
  /** OpenAI-compatible base URL (vLLM, Ollama, LM Studio, llama.cpp server…); unset means OpenAI. */
  readonly baseUrl: string | undefined;
  /** Model of `llm` nodes and loop agents. */
  readonly model: string;
  /** Model that plans tasks into graphs. */
  readonly plannerModel: string;
  /** Per-request timeout. */
  readonly timeoutMs: number;
  /** In-process retries of a planner call (node calls are retried by the node harness instead). */
  readonly maxRetries: number;
  /**
   * The models that take a reasoning effort (`reasoning_effort`): names, or prefixes ending in `*`.
   * A call asking another model to think sends no effort. @defaultValue DEFAULT_THINKING_MODELS
   */
  readonly thinkingModels?: readonly string[];
}

/** OpenAI's reasoning models: what `TETRALOOP_THINKING_MODELS` is when unset. */
export const DEFAULT_THINKING_MODELS = ['o1*', 'o3*', 'o4*', 'gpt-5*'] as const;

/** Whether `model` takes a reasoning effort, by the configured list (names, or prefixes ending in `*`). Pure. */
export function takesThinking(config: Pick<ModelConfig, 'thinkingModels'>, model: string): boolean {
  return (config.thinkingModels ?? DEFAULT_THINKING_MODELS).some((entry) =>
    entry.endsWith('*') ? model.startsWith(entry.slice(0, -1)) : entry === model,
  );
}

/** The variables to set when no model is configured; named in the error a client gets. */
export const MODEL_VARIABLES =
  'OPENAI_API_KEY (for OpenAI) or OPENAI_BASE_URL (for an OpenAI-compatible server)';

export const isModelConfigured = (config: ModelConfig | undefined): config is ModelConfig =>
  config !== undefined && (config.apiKey !== undefined || config.baseUrl !== undefined);
