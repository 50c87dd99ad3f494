export * from './signature.js';
export * from './delivery-rules.js';
