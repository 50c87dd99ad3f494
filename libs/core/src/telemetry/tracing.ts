/**
 * Traces, through the OpenTelemetry API only: without an SDK registered (no
 * `OTEL_EXPORTER_OTLP_ENDPOINT`, see apps/cli/src/tracing.ts) every call here is the API's no-op,
 * so tracing off costs next to nothing. A run is one trace under its `invoke_agent` span (see
 * `run-span.ts`): its context is carried in the data of the jobs it enqueues (`trace`, a W3C
 * `traceparent`), so every pass of its root job and every node job is a child of the run's span,
 * linked to the span that released it.
 */
import {
  INVALID_SPAN_CONTEXT,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  context,
  propagation,
  trace,
  type Attributes,
  type Context,
  type Link,
  type Span,
  type SpanOptions,
} from '@opentelemetry/api';
import { z } from 'zod';

export const tracer = trace.getTracer('tetraloop');

/** The span work in {@link inSpan} gets while tracing is off: it records nothing. */
const NO_SPAN: Span = trace.wrapSpanContext(INVALID_SPAN_CONTEXT);

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
  // Untraced, the carrier stays empty: answered without a failed parse, on every job enqueued.
  if (carrier.traceparent === undefined) return {};
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
 * flow (a job parking itself, a retry handed to BullMQ: those set their own attributes). With
 * tracing off ({@link tracingOn}) it only runs `work`.
 */
export async function inSpan<T>(
  name: string,
  options: {
    readonly kind?: SpanKind;
    readonly attributes?: Attributes;
    readonly parent?: TraceCarrier;
    /** Related spans that are not the parent (the node that released this one). */
    readonly links?: readonly TraceCarrier[];
    readonly expected?: (err: unknown) => boolean;
  },
  work: (span: Span) => Promise<T>,
): Promise<T> {
  // Off, the work runs as it is: no context to extract, no span to start, end or hand on.
  if (!tracingOn()) return work(NO_SPAN);
  const parent = options.parent ? propagation.extract(context.active(), options.parent) : context.active();
  return tracer.startActiveSpan(
    name,
    {
      kind: options.kind ?? SpanKind.INTERNAL,
      ...(options.attributes ? { attributes: options.attributes } : {}),
      ...(options.links?.length ? { links: options.links.flatMap(linkTo) } : {}),
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

/** A link to the span a carrier names; none for a carrier that names no valid span. */
function linkTo(carrier: TraceCarrier): Link[] {
  const linked = trace.getSpanContext(propagation.extract(ROOT_CONTEXT, carrier));
  return linked && trace.isSpanContextValid(linked) ? [{ context: linked }] : [];
}

/** The ids a tracer gives new spans (the SDK's `IdGenerator`). */
export interface SpanIdSource {
  generateTraceId(): string;
  generateSpanId(): string;
}

/**
 * The SDK's id generator (apps/cli/src/tracing.ts gives it to the tracer provider): random ids,
 * except for a span started inside `withIds`, which gets the ids given there. The run's span is
 * recorded at settle with ids every process could compute from the run before (`run-span.ts`);
 * the SDK lets no other way choose a span's id. `startSpan` draws its ids synchronously, so the
 * pinned ids go to that one span and no other.
 */
export class SpanIds implements SpanIdSource {
  private pinned: { traceId: string; spanId: string } | undefined;

  constructor(private readonly random: SpanIdSource) {}

  generateTraceId(): string {
    return this.pinned?.traceId ?? this.random.generateTraceId();
  }

  generateSpanId(): string {
    return this.pinned?.spanId ?? this.random.generateSpanId();
  }

  withIds<T>(ids: { traceId: string; spanId: string }, start: () => T): T {
    this.pinned = ids;
    try {
      return start();
    } finally {
      this.pinned = undefined;
    }
  }
}

let spanIds: SpanIds | undefined;

/** The id generator of this process's tracer provider; registering it turns `tracingOn()` on. */
export function registerSpanIds(random: SpanIdSource): SpanIds {
  spanIds = new SpanIds(random);
  return spanIds;
}

/** Whether this process exports traces (an SDK registered with `registerSpanIds`). */
export function tracingOn(): boolean {
  return spanIds !== undefined;
}

/** Starts a span with the ids given, where the SDK's id generator is this module's. */
export function startSpanWithIds(
  ids: { traceId: string; spanId: string },
  name: string,
  options: SpanOptions,
  parent: Context,
): Span | undefined {
  return spanIds?.withIds(ids, () => tracer.startSpan(name, options, parent));
}

export { SpanKind };
