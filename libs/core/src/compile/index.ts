export * from './validate.js';
export * from './expand.js';
