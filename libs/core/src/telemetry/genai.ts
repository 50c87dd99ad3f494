/**
 * The OpenTelemetry GenAI semantic conventions, as Tetraloop records them (names from
 * `@opentelemetry/semantic-conventions/incubating`: the GenAI conventions are still incubating):
 * - a `chat <model>` span per model call (node and planner calls), and the two client metrics each
 *   call records, `gen_ai.client.token.usage` (input and output tokens) and
 *   `gen_ai.client.operation.duration`;
 * - an `execute_tool <tool>` span per tool call's attributes;
 * - the `invoke_agent` span of a run: `run-span.ts`.
 *
 * Metrics go through the OpenTelemetry API's global meter provider, which apps/cli/src/tracing.ts
 * registers only when OTLP is configured; otherwise the instruments are the API's no-ops. The API
 * has no proxy for meters (unlike tracers): the instruments are made at the first call, after the
 * process has registered its provider at start.
 */
import { context, metrics, trace, type Attributes, type Histogram, type Span } from '@opentelemetry/api';
import {
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_REQUEST_TEMPERATURE,
  ATTR_GEN_AI_RESPONSE_MODEL,
  ATTR_GEN_AI_TOKEN_TYPE,
  ATTR_GEN_AI_TOOL_CALL_ID,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_GEN_AI_TOOL_TYPE,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  GEN_AI_OPERATION_NAME_VALUE_CHAT,
  GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL,
  GEN_AI_PROVIDER_NAME_VALUE_OPENAI,
  GEN_AI_TOKEN_TYPE_VALUE_INPUT,
  GEN_AI_TOKEN_TYPE_VALUE_OUTPUT,
  METRIC_GEN_AI_CLIENT_OPERATION_DURATION,
  METRIC_GEN_AI_CLIENT_TOKEN_USAGE,
} from '@opentelemetry/semantic-conventions/incubating';
import { SpanKind, failSpan, tracer } from './tracing.js';

/**
 * The provider every model call goes to: Tetraloop speaks the OpenAI API (its base URL may point
 * at any server that speaks it).
 */
export const GEN_AI_PROVIDER = GEN_AI_PROVIDER_NAME_VALUE_OPENAI;

interface ChatInstruments {
  readonly tokens: Histogram;
  readonly duration: Histogram;
}

let instruments: ChatInstruments | undefined;

/** The two client metrics, with the bucket boundaries the conventions advise. */
function chatInstruments(): ChatInstruments {
  if (instruments) return instruments;
  const meter = metrics.getMeter('tetraloop');
  const histogram = (name: string, unit: string, description: string, buckets: number[]): Histogram =>
    meter.createHistogram(name, { unit, description, advice: { explicitBucketBoundaries: buckets } });
  instruments = {
    // 1, 4, 16, … 4^13
    tokens: histogram(
      METRIC_GEN_AI_CLIENT_TOKEN_USAGE,
      '{token}',
      'Number of input and output tokens used',
      Array.from({ length: 14 }, (_, i) => 4 ** i),
    ),
    // 0.01 s, doubling, … 81.92 s
    duration: histogram(
      METRIC_GEN_AI_CLIENT_OPERATION_DURATION,
      's',
      'GenAI operation duration',
      Array.from({ length: 14 }, (_, i) => 0.01 * 2 ** i),
    ),
  };
  return instruments;
}

/** A model call in progress: its span and when it started. */
export interface ChatCallSpan {
  readonly span: Span;
  readonly model: string;
  readonly startedAt: number;
}

/** The answer of a model call as its span and metrics record it. */
export interface ChatAnswer {
  readonly model: string;
  readonly usage: { readonly promptTokens: number; readonly completionTokens: number };
}

/** Starts the span of a call to `model` (`chat <model>`, a client span); `endChat` ends it. */
export function startChat(model: string, temperature?: number): ChatCallSpan {
  const span = tracer.startSpan(`chat ${model}`, {
    kind: SpanKind.CLIENT,
    attributes: {
      ...chatAttributes(model),
      ...(temperature !== undefined ? { [ATTR_GEN_AI_REQUEST_TEMPERATURE]: temperature } : {}),
    },
  });
  return { span, model, startedAt: performance.now() };
}

/**
 * Ends a model call: its span gets the answer's model and usage (or the error class), and the
 * call is measured: its duration, and its input and output tokens.
 */
export function endChat(
  call: ChatCallSpan,
  outcome: { readonly answer: ChatAnswer } | { readonly errorType: string; readonly message?: string },
): void {
  const seconds = (performance.now() - call.startedAt) / 1000;
  const measured: Attributes = chatAttributes(call.model);
  if ('answer' in outcome) {
    const { answer } = outcome;
    call.span.setAttributes({
      [ATTR_GEN_AI_RESPONSE_MODEL]: answer.model,
      [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: answer.usage.promptTokens,
      [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: answer.usage.completionTokens,
    });
    measured[ATTR_GEN_AI_RESPONSE_MODEL] = answer.model;
    const { tokens } = chatInstruments();
    tokens.record(answer.usage.promptTokens, {
      ...measured,
      [ATTR_GEN_AI_TOKEN_TYPE]: GEN_AI_TOKEN_TYPE_VALUE_INPUT,
    });
    tokens.record(answer.usage.completionTokens, {
      ...measured,
      [ATTR_GEN_AI_TOKEN_TYPE]: GEN_AI_TOKEN_TYPE_VALUE_OUTPUT,
    });
  } else {
    failSpan(call.span, outcome.errorType, outcome.message);
    measured[ATTR_ERROR_TYPE] = outcome.errorType;
  }
  chatInstruments().duration.record(seconds, measured);
  call.span.end();
}

/**
 * A model call in its span, measured (see `startChat`, `endChat`); `work` runs with the span
 * active, so the HTTP call it makes is the span's child.
 */
export async function inChatSpan<T extends ChatAnswer>(model: string, work: () => Promise<T>): Promise<T> {
  const call = startChat(model);
  try {
    const answer = await callIn(call, work);
    endChat(call, { answer });
    return answer;
  } catch (err) {
    endChat(call, {
      errorType: err instanceof Error ? err.name : 'error',
      ...(err instanceof Error ? { message: err.message } : {}),
    });
    throw err;
  }
}

/** Runs `work` with the call's span active. */
export function callIn<T>(call: ChatCallSpan, work: () => Promise<T>): Promise<T> {
  return context.with(trace.setSpan(context.active(), call.span), work);
}

function chatAttributes(model: string): Attributes {
  return {
    [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_NAME_VALUE_CHAT,
    [ATTR_GEN_AI_PROVIDER_NAME]: GEN_AI_PROVIDER,
    [ATTR_GEN_AI_REQUEST_MODEL]: model,
  };
}

/**
 * The attributes of a tool call's `execute_tool` span. `callId`: the model's id for the call when
 * a model asked for it, else the call's place in the run (`<node>:<index>`). A custom tool is
 * code a team registered, called with the arguments given (`function`); a built-in or MCP tool
 * reaches an outside service for the agent (`extension`).
 */
export function toolCallAttributes(tool: { name: string; custom: boolean }, callId: string): Attributes {
  return {
    [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL,
    [ATTR_GEN_AI_TOOL_NAME]: tool.name,
    [ATTR_GEN_AI_TOOL_CALL_ID]: callId,
    [ATTR_GEN_AI_TOOL_TYPE]: tool.custom ? 'function' : 'extension',
  };
}
