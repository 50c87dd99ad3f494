export * from './retry-policy.js';
export * from './retrying.js';
