export * from './server-config.js';
export * from './server-catalog.js';
export * from './tool-names.js';
export * from './call-result.js';
export * from './mcp-tool.js';
export * from './server-connection.js';
export * from './tool-registry.js';
