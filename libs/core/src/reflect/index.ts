export * from './lesson-book.js';
export * from './lesson-effects.js';
export * from './memory-service.js';
export * from './reflection.js';
