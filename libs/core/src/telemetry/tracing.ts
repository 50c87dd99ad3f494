/**
 * Traces, through the OpenTelemetry API only: without an SDK registered (no
 * `OTEL_EXPORTER_OTLP_ENDPOINT`, see apps/cli/src/tracing.ts) every call here is the API's no-op,
 * so tracing off costs next to nothing. A run is one trace: its context is carried in the data of
 * the jobs it enqueues (`trace`, a W3C `traceparent`), so a root job continues the request that
 * made the run, and a node job continues the job that released it — the span tree follows the graph.
 */
import {
  SpanKind,
  SpanStatusCode,
  context,
  propagation,
  trace,
  type Attributes,
  type Span,
} from '@opentelemetry/api';
import { z } from 'zod';

export const tracer = trace.getTracer('tetraloop');

/** A W3C trace context as job data carries it. */
export const TraceCarrier = z.object({
  traceparent: z.string().max(128),
  tracestate: z.string().max(512).optional(),
});
export type TraceCarrier = z.infer<typeof TraceCarrier>;

/** The active trace context as a carrier for job data; absent when nothing is traced. */
export function traceCarrier(): { trace: TraceCarrier } | Record<string, never> {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  const parsed = TraceCarrier.safeParse(carrier);
  return parsed.success ? { trace: parsed.data } : {};
}

/** Set on a span's error: the error class (`error.type`), and the status. */
export function failSpan(span: Span, errorType: string, message?: string): void {
  span.setAttribute('error.type', errorType);
  span.setStatus({ code: SpanStatusCode.ERROR, ...(message !== undefined ? { message } : {}) });
}

/**
 * Runs `work` in a span named `name`, a child of `parent` (a carrier from job data) or of the
 * active context. An exception ends the span as an error unless `expected` says it is control
 * flow (a job parking itself, a retry handed to BullMQ: those set their own attributes).
 */
export async function inSpan<T>(
  name: string,
  options: {
    readonly kind?: SpanKind;
    readonly attributes?: Attributes;
    readonly parent?: TraceCarrier;
    readonly expected?: (err: unknown) => boolean;
  },
  work: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = options.parent ? propagation.extract(context.active(), options.parent) : context.active();
  return tracer.startActiveSpan(
    name,
    {
      kind: options.kind ?? SpanKind.INTERNAL,
      ...(options.attributes ? { attributes: options.attributes } : {}),
    },
    parent,
    async (span) => {
      try {
        return await work(span);
      } catch (err) {
        if (!options.expected?.(err)) {
          span.recordException(err as Error);
          failSpan(
            span,
            err instanceof Error ? err.name : 'error',
            err instanceof Error ? err.message : undefined,
          );
        }
        throw err;
      } finally {
        span.end();
      }
    },
  );
}

export { SpanKind };

/**
 * A model call in a span with the OpenTelemetry GenAI semantic conventions (`chat <model>`): the
 * request's model, the answer's model and token usage, the error class when it fails.
 */
export function inChatSpan<
  T extends { model: string; usage: { promptTokens: number; completionTokens: number } },
>(model: string, work: () => Promise<T>): Promise<T> {
  return inSpan(
    `chat ${model}`,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'openai',
        'gen_ai.request.model': model,
      },
    },
    async (span) => {
      const result = await work();
      span.setAttributes({
        'gen_ai.response.model': result.model,
        'gen_ai.usage.input_tokens': result.usage.promptTokens,
        'gen_ai.usage.output_tokens': result.usage.completionTokens,
      });
      return result;
    },
  );
}
