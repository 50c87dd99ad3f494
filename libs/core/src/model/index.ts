export * from './model-config.js';
export * from './model-client.js';
export * from './model-errors.js';
export * from './thinking.js';
export * from './json-schema.js';
export * from './prompt-render.js';
export * from './untrusted-data.js';
