export * from './tool.js';
export * from './builtins.js';
export * from './egress-policy.js';
export * from './egress-client.js';
export * from './http-tool.js';
export * from './tool-catalog.js';
export * from './function-names.js';
export * from './custom-tool.js';
