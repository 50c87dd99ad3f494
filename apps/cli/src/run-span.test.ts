/**
 * A run's `invoke_agent` span (libs/core/src/telemetry/run-span.ts) through the real trace SDK with
 * Tetraloop's id generator, as apps/cli/src/tracing.ts registers it: recorded at settle with the
 * ids every process derived for the run before, under the context the run was created in.
 */
import { context, propagation, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider, RandomIdGenerator } from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordRunSpan, registerSpanIds, runSpanCarrier } from '@tetraloop/core/telemetry';

const exporter = new InMemorySpanExporter();

beforeAll(() => {
  // As tracing.ts registers it: the W3C propagator, Tetraloop's id generator.
  new NodeTracerProvider({
    idGenerator: registerSpanIds(new RandomIdGenerator()),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  }).register();
});

afterAll(() => {
  trace.disable();
  propagation.disable();
  context.disable();
});

const CALLER = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

describe('runSpanCarrier', () => {
  it("puts the run's own span id in the trace it is given; the same for every caller", () => {
    const fromNode = runSpanCarrier('run-1', {
      traceparent: CALLER.replace('b7ad6b7169203331', '1111111111111111'),
    });
    const fromRequest = runSpanCarrier('run-1', { traceparent: CALLER, tracestate: 'k=v' });
    expect(fromNode.traceparent).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/);
    expect(fromRequest).toEqual({ traceparent: fromNode.traceparent, tracestate: 'k=v' });
    expect(runSpanCarrier('run-2', { traceparent: CALLER }).traceparent).not.toBe(fromNode.traceparent);
  });

  it('derives a trace of its own for a run made outside any trace', () => {
    const own = runSpanCarrier('run-1', undefined).traceparent;
    expect(own).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(runSpanCarrier('run-1', { traceparent: 'not a traceparent' }).traceparent).toBe(own);
    expect(own.split('-')[2]).toBe(
      runSpanCarrier('run-1', { traceparent: CALLER }).traceparent.split('-')[2],
    );
  });
});

describe('recordRunSpan', () => {
  it('records the span with the derived ids, under the creating context, from the acceptance time', () => {
    exporter.reset();
    recordRunSpan({
      runId: 'run-1',
      agentId: 'main',
      sessionId: 'chat-7',
      createdAt: '2026-01-02T03:04:05.678Z',
      created: { traceparent: CALLER },
      status: 'failed',
      errorType: 'node_failed',
    });
    // A span after it gets random ids again.
    trace.getTracer('test').startSpan('after').end();
    const [run, after] = exporter.getFinishedSpans();
    const [, traceId, spanId] = runSpanCarrier('run-1', { traceparent: CALLER }).traceparent.split('-');
    expect(run!.name).toBe('invoke_agent main');
    expect(run!.spanContext()).toMatchObject({ traceId, spanId });
    expect(run!.parentSpanContext?.spanId).toBe('b7ad6b7169203331');
    expect(run!.startTime).toEqual([(Date.parse('2026-01-02T03:04:05.678Z') / 1000) | 0, 678_000_000]);
    expect(run!.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.id': 'main',
      'gen_ai.agent.name': 'main',
      'gen_ai.conversation.id': 'chat-7',
      'tetraloop.run.id': 'run-1',
      'error.type': 'node_failed',
    });
    expect(run!.status.code).toBe(2);
    expect(after!.spanContext().spanId).not.toBe(spanId);
    expect(after!.spanContext().traceId).not.toBe(traceId);
  });

  it('is a root span in the derived trace for a run made outside any trace', () => {
    exporter.reset();
    recordRunSpan({
      runId: 'run-9',
      agentId: 'main',
      sessionId: null,
      createdAt: '2026-01-02T03:04:05.678Z',
      created: null,
      status: 'succeeded',
      errorType: null,
    });
    const [run] = exporter.getFinishedSpans();
    const [, traceId, spanId] = runSpanCarrier('run-9', undefined).traceparent.split('-');
    expect(run!.spanContext()).toMatchObject({ traceId, spanId });
    expect(run!.parentSpanContext).toBeUndefined();
    expect(run!.attributes['gen_ai.conversation.id']).toBeUndefined();
    expect(run!.status.code).toBe(0);
  });
});
