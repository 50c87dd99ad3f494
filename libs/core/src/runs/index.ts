export * from './run-request.js';
export * from './run-service.js';
export * from './rerun-set.js';
export * from './run-waiter.js';
export * from './reconcile.js';
export * from './run-event-hub.js';
