export * from './env.js';
export * from './pools.js';
export * from './health-server.js';
export { deferWhileRedisAway, type RedisAwayOptions } from './pools/redis-away.js';
