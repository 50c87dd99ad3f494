export * from './latency.js';
export * from './run-summary.js';
export * from './lesson.js';
export * from './lesson-rules.js';
export * from './lesson-lifecycle.js';
