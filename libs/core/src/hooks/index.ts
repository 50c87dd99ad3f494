export * from './hook-registry.js';
export * from './plugins.js';
