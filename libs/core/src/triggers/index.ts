export * from './filter.js';
export * from './event-refs.js';
export * from './trigger-model.js';
export * from './trigger-jobs.js';
export * from './trigger-book.js';
export * from './event-intake.js';
export * from './trigger-firing.js';
