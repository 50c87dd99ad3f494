export * from './env.js';
export * from './pools.js';
export * from './health-server.js';
