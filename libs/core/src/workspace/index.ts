export * from './workspace.js';
export * from './skills.js';
