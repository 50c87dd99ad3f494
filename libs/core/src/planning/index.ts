export * from './plan-run.js';
export * from './cached-plan.js';
export { PLANNER_SCHEMA } from './planner.js';
export { PLANNER_PROMPT_VERSION, plannerMessages } from './planner-prompt.js';
export * from './plan-window.js';
export { WINDOW_PROMPT_VERSION, carriedGraph, checkWindow, windowHistory, windowMessages } from './window.js';
export * from './system-prompt.js';
