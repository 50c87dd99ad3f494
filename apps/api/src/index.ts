export * from './env.js';
export * from './app.js';
export * from './server.js';
export * from './route-table.js';
export { KeyBody } from './requests.js';
export * from './openapi/index.js';
export { waitForJob, type JobOutcome } from './job-wait.js';
