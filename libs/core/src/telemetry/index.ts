export * from './metrics.js';
export * from './queue-watch.js';
export { registerSpanIds, type SpanIdSource } from './tracing.js';
export { recordRunSpan, runSpanCarrier, type SettledRun } from './run-span.js';
