export * from './mcp-tools.js';
export * from './redis.js';
export * from './redis-server.js';
export * from './redis-cluster-server.js';
export * from './redis-container.js';
export * from './embedded-redis.js';
export * from './services.js';
export * from './custom-tools.js';
