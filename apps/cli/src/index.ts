/** What the `tetraloop` command's client subcommands do, for programs and tests that call them in-process. */
export * from './lessons-command.js';
export { runGraphFile, type RunIo } from './run-command.js';
export * from './runs-command.js';
export * from './agent-command.js';
export { RunProgress } from './run-progress.js';
export * from './keys-command.js';
export { schedulesCommand, SCHEDULES_USAGE, type SchedulesIo } from './schedules-command.js';
export * from './api-client.js';
export { tetraloopMcpServer } from './mcp-command.js';
export * from './triggers-command.js';
export * from './archive-command.js';
