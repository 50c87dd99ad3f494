export * from './price-table.js';
export * from './budget-rules.js';
