export * from './schedule-model.js';
export * from './schedule-service.js';
