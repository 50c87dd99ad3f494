export * from './catalog.js';
export * from './retention.js';
export * from './run-jobs.js';
export * from './webhook-jobs.js';
export * from './webhook-delivery.js';
export * from './loop-queues.js';
export * from './queue-shards.js';
export * from './reflect-jobs.js';
