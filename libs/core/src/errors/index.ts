export * from './node-error.js';
export * from './run-error.js';
export * from './limit-error.js';
export * from './retry-after.js';
