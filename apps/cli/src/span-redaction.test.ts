import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import {
  bareUrl,
  redactAttributes,
  redactText,
  RedactingSpanProcessor,
  spanRedaction,
  type SpanRedaction,
} from './span-redaction.js';

const off: SpanRedaction = { captureMessageContent: false };
const on: SpanRedaction = { captureMessageContent: true };

describe('bareUrl', () => {
  it('keeps scheme, host, port and path; drops query, fragment and credentials', () => {
    expect(bareUrl('https://api.example.com:8443/v1/items?api_key=s3cret&x=1#frag')).toBe(
      'https://api.example.com:8443/v1/items',
    );
    expect(bareUrl('http://user:p%40ss@127.0.0.1:9000/a/b?token=t')).toBe('http://127.0.0.1:9000/a/b');
    expect(bareUrl('http://user:p@ss@host/x')).toBe('http://host/x');
    expect(bareUrl('redis://:hunter2@redis:6379/0')).toBe('redis://redis:6379/0');
    expect(bareUrl('/v1/runs?token=abc')).toBe('/v1/runs');
    expect(bareUrl('/v1/runs#x?y')).toBe('/v1/runs');
    expect(bareUrl('https://example.com')).toBe('https://example.com');
  });
});

describe('redactText', () => {
  it('cuts every URL in a message down to its bare form, leaving the rest', () => {
    expect(
      redactText('request to http://a:b@h:1/p?k=v, "x" failed; retry https://h2/q?z=1#f then stop'),
    ).toBe('request to http://h:1/p "x" failed; retry https://h2/q then stop');
    // A query runs to the next blank: what a quote after it holds goes with it.
    expect(redactText('GET "http://h/p?token=a"b c"')).toBe('GET "http://h/p c"');
    expect(redactText('Error: HTTP 404\n    at fetch (node:internal)')).toBe(
      'Error: HTTP 404\n    at fetch (node:internal)',
    );
  });
});

describe('redactAttributes', () => {
  it('drops url.query and strips URLs in URL attributes and in other text', () => {
    expect(
      redactAttributes(
        {
          'url.full': 'http://127.0.0.1:1/echo?token=tok%2Fabc',
          'url.query': '?token=tok%2Fabc',
          'url.path': '/echo',
          'http.target': '/echo?token=abc',
          'http.url': 'http://u:p@h/x?y',
          'error.message': 'fetch http://h/x?token=abc failed',
          'some.list': ['http://h/?a=1', 'plain'],
          'http.response.status_code': 200,
        },
        off,
      ),
    ).toEqual({
      'url.full': 'http://127.0.0.1:1/echo',
      'url.path': '/echo',
      'http.target': '/echo',
      'http.url': 'http://h/x',
      'error.message': 'fetch http://h/x failed',
      'some.list': ['http://h/', 'plain'],
      'http.response.status_code': 200,
    });
  });

  it("keeps a Redis span's command name and nothing of its arguments", () => {
    expect(
      redactAttributes(
        {
          'db.system.name': 'redis',
          'db.operation.name': 'PIPELINE evalsha',
          'db.query.text': 'evalsha 1195 6 run:{x} {"prompt":"secret"}',
          'server.address': '127.0.0.1',
          'server.port': 6379,
        },
        off,
      ),
    ).toEqual({
      'db.system.name': 'redis',
      'db.operation.name': 'PIPELINE evalsha',
      'db.query.text': 'evalsha',
      'server.address': '127.0.0.1',
      'server.port': 6379,
    });
    expect(redactAttributes({ 'db.system': 'redis', 'db.statement': 'hset k f v' }, off)).toEqual({
      'db.system': 'redis',
      'db.statement': 'hset',
    });
  });

  it('drops GenAI message content unless captureMessageContent opts in', () => {
    const attributes = {
      'gen_ai.request.model': 'm',
      'gen_ai.usage.input_tokens': 3,
      'gen_ai.input.messages': '[{"role":"user","parts":[{"type":"text","content":"hi"}]}]',
      'gen_ai.output.messages': '[]',
      'gen_ai.system_instructions': 'be brief',
      'gen_ai.tool.call.arguments': '{}',
      'gen_ai.tool.call.result': '{}',
      'gen_ai.prompt.0.content': 'hi',
      'gen_ai.completion': 'hello',
    };
    expect(redactAttributes(attributes, off)).toEqual({
      'gen_ai.request.model': 'm',
      'gen_ai.usage.input_tokens': 3,
    });
    expect(redactAttributes(attributes, on)).toEqual(attributes);
  });
});

describe('spanRedaction', () => {
  it('opts in to message content only with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true', () => {
    expect(spanRedaction({})).toEqual(off);
    expect(spanRedaction({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'false' })).toEqual(off);
    expect(spanRedaction({ OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'TRUE' })).toEqual(on);
  });
});

describe('RedactingSpanProcessor', () => {
  it('hands the exporter a rewritten copy: attributes, status message, events and links', async () => {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({
      spanProcessors: [new RedactingSpanProcessor(new SimpleSpanProcessor(exporter), off)],
    });
    const tracer = provider.getTracer('test');
    const linked = tracer.startSpan('linked');
    linked.end();
    const span = tracer.startSpan('GET', {
      kind: SpanKind.CLIENT,
      attributes: { 'url.full': 'https://h/p?token=abc', 'url.query': '?token=abc' },
      links: [{ context: linked.spanContext(), attributes: { 'url.full': 'https://h/?token=abc' } }],
    });
    span.recordException(new Error('GET https://h/p?token=abc failed'));
    span.addEvent('gen_ai.client.inference.operation.details', { 'gen_ai.input.messages': '[]' });
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'failed: https://u:pw@h/p?token=abc' });
    span.end();
    await provider.forceFlush();

    const exported = exporter.getFinishedSpans().find((s) => s.name === 'GET')!;
    expect(JSON.stringify(exported)).not.toMatch(/token=abc|pw@/);
    expect(exported.attributes).toEqual({ 'url.full': 'https://h/p' });
    expect(exported.status).toEqual({ code: SpanStatusCode.ERROR, message: 'failed: https://h/p' });
    expect(exported.events.map((e) => e.name)).toEqual(['exception']);
    expect(exported.events[0]!.attributes!['exception.message']).toBe('GET https://h/p failed');
    expect(exported.links[0]!.attributes).toEqual({ 'url.full': 'https://h/' });
    expect(exported.spanContext()).toEqual(span.spanContext());
    expect(exported.duration).toEqual((span as unknown as { duration: unknown }).duration);
    await provider.shutdown();
  });
});
