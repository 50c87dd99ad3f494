/**
 * OpenTelemetry of a `tetraloop` process: traces when the standard variables name an OTLP
 * endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), the GenAI
 * client metrics (`libs/core/src/telemetry/genai.ts`) when they name one for metrics
 * (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`), off otherwise — then
 * the SDKs are never loaded and the spans and instruments Tetraloop makes are the OpenTelemetry
 * API's no-ops. Started before anything else is imported, so the instrumentations of incoming HTTP
 * (the API's requests, `traceparent` honoured), outgoing fetches (tool calls, model calls) and
 * ioredis see their modules load. What a span may carry (no URL query or credentials, Redis
 * commands without their arguments, no prompt or completion unless opted in) is enforced in
 * `span-redaction.ts`.
 */
import type { SpanIdSource } from '@tetraloop/core/telemetry';
import { bareUrl, RedactingSpanProcessor, spanRedaction } from './span-redaction.js';

let stop: (() => Promise<void>) | undefined;
let stopMetrics: (() => Promise<void>) | undefined;

/** Whether the OpenTelemetry variables in `env` ask for traces. */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED === 'true' || env.OTEL_TRACES_EXPORTER === 'none') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/** Whether the OpenTelemetry variables in `env` ask for metrics. */
export function metricsConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED === 'true' || env.OTEL_METRICS_EXPORTER === 'none') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_METRICS_ENDPOINT);
}

/** The resource every signal of this process carries: its service name. */
async function processResource(service: string) {
  const { resourceFromAttributes } = await import('@opentelemetry/resources');
  return resourceFromAttributes({ 'service.name': process.env.OTEL_SERVICE_NAME ?? `tetraloop-${service}` });
}

/**
 * Starts exporting traces and metrics over OTLP/HTTP, each when configured; `service` names the
 * process type.
 */
export async function startTracing(service: string): Promise<void> {
  if (metricsConfigured() && !stopMetrics) await startMetrics(service);
  if (!tracingConfigured() || stop) return;
  const [{ NodeTracerProvider, BatchSpanProcessor, RandomIdGenerator }, { OTLPTraceExporter }] =
    await Promise.all([
      import('@opentelemetry/sdk-trace-node'),
      import('@opentelemetry/exporter-trace-otlp-http'),
    ]);
  const [
    { registerInstrumentations },
    { HttpInstrumentation },
    { UndiciInstrumentation },
    { IORedisInstrumentation },
  ] = await Promise.all([
    import('@opentelemetry/instrumentation'),
    import('@opentelemetry/instrumentation-http'),
    import('@opentelemetry/instrumentation-undici'),
    import('@opentelemetry/instrumentation-ioredis'),
  ]);
  // ESM imports (ioredis is imported, not required) are patched through import-in-the-middle's hook,
  // for ioredis alone: wrapping every module breaks re-exports of Tetraloop's own packages.
  const { register } = await import('node:module');
  register('@opentelemetry/instrumentation/hook.mjs', import.meta.url, { data: { include: ['ioredis'] } });
  // Random span ids, until Tetraloop's own generator takes over below: it also gives a run's
  // `invoke_agent` span the ids every process derived for it (libs/core/src/telemetry/run-span.ts).
  let ids: SpanIdSource = new RandomIdGenerator();
  const provider = new NodeTracerProvider({
    resource: await processResource(service),
    idGenerator: {
      generateTraceId: () => ids.generateTraceId(),
      generateSpanId: () => ids.generateSpanId(),
    },
    // Endpoint, headers and batching from the standard OTEL_* variables; every span rewritten as
    // span-redaction.ts says before it is batched.
    spanProcessors: [
      new RedactingSpanProcessor(new BatchSpanProcessor(new OTLPTraceExporter()), spanRedaction(process.env)),
    ],
  });
  // The AsyncLocalStorage context manager and the W3C trace-context propagator.
  provider.register();
  registerInstrumentations({
    instrumentations: [
      // Only requests and calls inside a trace: not health checks' outgoing calls, not BullMQ's polling.
      // The hooks keep a URL's query (a token in it) and a Redis command's arguments (run data) out
      // of a span from its start: an attribute a start hook sets to undefined is not set at all.
      new HttpInstrumentation({
        requireParentforOutgoingSpans: true,
        startIncomingSpanHook: () => ({ 'url.query': undefined }),
      }),
      new UndiciInstrumentation({
        requireParentforSpans: true,
        startSpanHook: (request) => ({
          'url.full': bareUrl(new URL(request.path, request.origin).href),
          'url.query': undefined,
        }),
      }),
      new IORedisInstrumentation({ requireParentSpan: true, dbStatementSerializer: (command) => command }),
    ],
  });
  // Tetraloop's modules only now, after the instrumentations: they import ioredis.
  const { registerSpanIds } = await import('@tetraloop/core/telemetry');
  ids = registerSpanIds(ids);
  stop = () => provider.shutdown();
}

/**
 * Exports the metrics made through the OpenTelemetry API (the GenAI client metrics) every
 * `OTEL_METRIC_EXPORT_INTERVAL` ms (default 60000), cumulative unless
 * `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE` says otherwise.
 */
async function startMetrics(service: string): Promise<void> {
  const [{ metrics }, { MeterProvider, PeriodicExportingMetricReader }, { OTLPMetricExporter }] =
    await Promise.all([
      import('@opentelemetry/api'),
      import('@opentelemetry/sdk-metrics'),
      import('@opentelemetry/exporter-metrics-otlp-http'),
    ]);
  const interval = Number(process.env.OTEL_METRIC_EXPORT_INTERVAL);
  const exportIntervalMillis = Number.isInteger(interval) && interval > 0 ? interval : 60_000;
  const provider = new MeterProvider({
    resource: await processResource(service),
    readers: [
      new PeriodicExportingMetricReader({
        exporter: new OTLPMetricExporter(),
        exportIntervalMillis,
        exportTimeoutMillis: Math.min(30_000, exportIntervalMillis),
      }),
    ],
  });
  metrics.setGlobalMeterProvider(provider);
  stopMetrics = () => provider.shutdown();
}

/** Sends what is buffered and stops; a no-op when tracing and metrics are off. */
export async function stopTracing(): Promise<void> {
  await Promise.all([stop?.(), stopMetrics?.()]);
  stop = undefined;
  stopMetrics = undefined;
}
