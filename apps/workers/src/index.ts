export * from './env.js';
export * from './pools.js';
