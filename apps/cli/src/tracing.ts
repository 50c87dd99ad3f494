/**
 * Tracing of a `tetraloop` process: on when the standard OpenTelemetry variables name an OTLP
 * endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), off otherwise —
 * then the SDK is never loaded and the spans Tetraloop makes (`libs/core/src/telemetry/tracing.ts`)
 * are the OpenTelemetry API's no-ops. Started before anything else is imported, so the
 * instrumentations of incoming HTTP (the API's requests, `traceparent` honoured), outgoing fetches
 * (tool calls, model calls) and ioredis see their modules load. What a span may carry (no URL
 * query or credentials, Redis commands without their arguments, no prompt or completion unless
 * opted in) is enforced in `span-redaction.ts`.
 */
import { bareUrl, RedactingSpanProcessor, spanRedaction } from './span-redaction.js';

let stop: (() => Promise<void>) | undefined;

/** Whether the OpenTelemetry variables in `env` ask for traces. */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED === 'true' || env.OTEL_TRACES_EXPORTER === 'none') return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/** Starts exporting traces over OTLP/HTTP when configured; `service` names the process type. */
export async function startTracing(service: string): Promise<void> {
  if (!tracingConfigured() || stop) return;
  const [{ NodeTracerProvider, BatchSpanProcessor }, { OTLPTraceExporter }, { resourceFromAttributes }] =
    await Promise.all([
      import('@opentelemetry/sdk-trace-node'),
      import('@opentelemetry/exporter-trace-otlp-http'),
      import('@opentelemetry/resources'),
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
  const provider = new NodeTracerProvider({
    resource: resourceFromAttributes({
      'service.name': process.env.OTEL_SERVICE_NAME ?? `tetraloop-${service}`,
    }),
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
  stop = () => provider.shutdown();
}

/** Sends what is buffered and stops; a no-op when tracing is off. */
export async function stopTracing(): Promise<void> {
  await stop?.();
  stop = undefined;
}
