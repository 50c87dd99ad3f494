export * from './index-cursor.js';
export * from './run-search.js';
export * from './explain.js';
