export * from './schema.js';
export * from './references.js';
export * from './topology.js';
export * from './limits.js';
