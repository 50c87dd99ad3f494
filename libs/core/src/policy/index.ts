export * from './retry-policy.js';
