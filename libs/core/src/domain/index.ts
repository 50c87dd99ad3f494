export * from './run-model.js';
export * from './blob.js';
export * from './tenant.js';
export * from './caller.js';
export * from './key-grant.js';
export * from './run-id.js';
export * from './webhook.js';
export * from './event.js';
