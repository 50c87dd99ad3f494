export * from './redis-url.js';
export * from './env-schema.js';
export * from './catalog.js';
