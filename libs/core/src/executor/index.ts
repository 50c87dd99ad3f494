export * from './deps.js';
export * from './plan-cache.js';
export * from './run-aborts.js';
export * from './node-executor.js';
export * from './run-coordinator.js';
export * from './flow-gate.js';
export * from './child-run.js';
export * from './run-admission.js';
