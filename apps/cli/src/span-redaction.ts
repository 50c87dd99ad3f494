/**
 * What a span may carry when it leaves a `tetraloop` process. Spans go to a collector outside the
 * trust boundary of the run data, so every span is rewritten on its way to the exporter:
 *
 * - a URL keeps its scheme, host, port and path: never its query (a token in `?api_key=`), its
 *   credentials (`user:pass@`) or its fragment — in `url.full`, `http.url`, `http.target` and in
 *   any text (an error's message or stack quoting a URL); `url.query` is dropped;
 * - a Redis command's span names the command only (`db.query.text`, `db.statement`): its
 *   arguments are run inputs, outputs, prompts and graph documents;
 * - message content of the OpenTelemetry GenAI conventions (prompts, completions, tool call
 *   arguments and results, as attributes or `gen_ai.*` events) only when
 *   `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` opts in, as those conventions ask.
 *   Tetraloop's own model spans record none.
 *
 * The instrumentations' hooks (apps/cli/src/tracing.ts) already keep most of these values out of a
 * span when it starts; this is the rule that cannot be skipped. It is a span processor that hands
 * the next processor a rewritten copy, because: a hook runs only at the start of a span, and
 * messages and exception events are set after it (undici's and ioredis' errors); some hooks cannot
 * see the URL at all (the http instrumentation's outgoing one gets request options); an
 * instrumentation added later brings hooks of its own shape or none; and an ended span is
 * read-only, so a processor cannot edit it in place. Pure apart from the processor's hand-off.
 */
import type { Attributes, AttributeValue, Context, Link, SpanStatus } from '@opentelemetry/api';
import type { ReadableSpan, Span, SpanProcessor, TimedEvent } from '@opentelemetry/sdk-trace-base';

/** The redaction settings, from the standard OpenTelemetry variables. */
export interface SpanRedaction {
  /**
   * Whether GenAI message content may be exported
   * (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`).
   * @defaultValue false
   */
  readonly captureMessageContent: boolean;
}

export function spanRedaction(env: NodeJS.ProcessEnv): SpanRedaction {
  return {
    captureMessageContent:
      env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT?.trim().toLowerCase() === 'true',
  };
}

/**
 * A URL in text, in parts: scheme, credentials, host and path, query, fragment. Credentials run to
 * the last `@` before the path (a password may hold one); a query and a fragment run to the next
 * blank, so whatever a quote or bracket after them holds goes with them.
 */
const URL_IN_TEXT = /\b([a-z][a-z0-9+.-]*:\/\/)(?:[^\s/?#]*@)?([^\s?#]*)(?:\?[^\s#]*)?(?:#\S*)?/gi;

/** Text with every URL in it cut to scheme, host, port and path. */
export function redactText(text: string): string {
  return text.replace(URL_IN_TEXT, '$1$2');
}

/** A URL (absolute, or a path as `http.target` holds) without credentials, query and fragment. */
export function bareUrl(url: string): string {
  return url.startsWith('/') ? url.replace(/[?#][\s\S]*$/, '') : redactText(url);
}

/** Attributes never exported: the query string of a URL. */
const DROPPED = new Set(['url.query']);
/** Attributes that hold one whole URL (or, `http.target`, a path with its query). */
const URL_KEYS = new Set(['url.full', 'http.url', 'http.target', 'url.original']);
/** A database client span's statement. */
const STATEMENT_KEYS = new Set(['db.query.text', 'db.statement']);
/** GenAI message content as attributes, current and earlier names. */
const CONTENT_KEYS = new Set([
  'gen_ai.input.messages',
  'gen_ai.output.messages',
  'gen_ai.system_instructions',
  'gen_ai.tool.call.arguments',
  'gen_ai.tool.call.result',
]);
const CONTENT_PREFIXES = ['gen_ai.prompt', 'gen_ai.completion'];

function isContent(key: string): boolean {
  return CONTENT_KEYS.has(key) || CONTENT_PREFIXES.some((p) => key === p || key.startsWith(`${p}.`));
}

function redactValue(value: AttributeValue): AttributeValue {
  if (typeof value === 'string') return redactText(value);
  if (Array.isArray(value))
    return value.map((v: unknown) => (typeof v === 'string' ? redactText(v) : v)) as AttributeValue;
  return value;
}

/** A span's attributes (or an event's, a link's) as they may be exported. */
export function redactAttributes(attributes: Attributes, redaction: SpanRedaction): Attributes {
  const redis = attributes['db.system.name'] === 'redis' || attributes['db.system'] === 'redis';
  const out: Attributes = {};
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined || DROPPED.has(key)) continue;
    if (!redaction.captureMessageContent && isContent(key)) continue;
    if (redis && STATEMENT_KEYS.has(key)) out[key] = String(value).trim().split(/\s/, 1)[0] ?? '';
    else if (URL_KEYS.has(key) && typeof value === 'string') out[key] = bareUrl(value);
    else out[key] = redactValue(value);
  }
  return out;
}

function redactStatus(status: SpanStatus): SpanStatus {
  return status.message === undefined ? status : { ...status, message: redactText(status.message) };
}

function redactEvents(events: TimedEvent[], redaction: SpanRedaction): TimedEvent[] {
  return events
    .filter((e) => redaction.captureMessageContent || !e.name.startsWith('gen_ai.'))
    .map((e) => (e.attributes ? { ...e, attributes: redactAttributes(e.attributes, redaction) } : e));
}

function redactLinks(links: Link[], redaction: SpanRedaction): Link[] {
  return links.map((l) =>
    l.attributes ? { ...l, attributes: redactAttributes(l.attributes, redaction) } : l,
  );
}

/** A copy of an ended span as it may be exported. */
export function redactSpan(span: ReadableSpan, redaction: SpanRedaction): ReadableSpan {
  return {
    name: redactText(span.name),
    kind: span.kind,
    spanContext: () => span.spanContext(),
    parentSpanContext: span.parentSpanContext,
    startTime: span.startTime,
    endTime: span.endTime,
    status: redactStatus(span.status),
    attributes: redactAttributes(span.attributes, redaction),
    links: redactLinks(span.links, redaction),
    events: redactEvents(span.events, redaction),
    duration: span.duration,
    ended: span.ended,
    resource: span.resource,
    instrumentationScope: span.instrumentationScope,
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
  };
}

/** Hands `next` (the exporting processor) each ended span rewritten by `redactSpan`. */
export class RedactingSpanProcessor implements SpanProcessor {
  constructor(
    private readonly next: SpanProcessor,
    private readonly redaction: SpanRedaction,
  ) {}

  onStart(span: Span, parentContext: Context): void {
    this.next.onStart(span, parentContext);
  }

  onEnd(span: ReadableSpan): void {
    this.next.onEnd(redactSpan(span, this.redaction));
  }

  forceFlush(): Promise<void> {
    return this.next.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.next.shutdown();
  }
}
