export * from './accept-durability.js';
export * from './accept-barrier.js';
