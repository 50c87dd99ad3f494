export * from './schema.js';
export * from './references.js';
export * from './topology.js';
export * from './validate.js';
export * from './expand.js';
