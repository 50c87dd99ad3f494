export * from './metrics.js';
export * from './queue-watch.js';
