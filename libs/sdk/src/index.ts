/**
 * `@tetraloop/sdk`: a team's own tools, written in TypeScript and served by its own worker
 * processes. `defineTool` checks a definition and makes it a tool; `ToolError` fails a call with
 * an error class; `startWorker` serves tools on their queues (what `tetraloop worker --pool tool
 * --tools <module> --queues <names>` does).
 */
import { defineCustomTool, type CustomTool, type CustomToolDefinition } from '@tetraloop/core/tools';

export { ToolError } from '@tetraloop/core/errors';
export type { ErrorCode, NodeErrorData } from '@tetraloop/core/errors';
export {
  ToolDefinitionError,
  type CustomTool,
  type CustomToolContext as ToolContext,
  type CustomToolDefinition as ToolDefinition,
  type ToolRetry,
} from '@tetraloop/core/tools';

/** Checks a tool's definition (each wrong field throws, naming it) and makes it a tool. */
export function defineTool<I, O>(definition: CustomToolDefinition<I, O>): CustomTool<I, O> {
  return defineCustomTool(definition);
}

export { startWorker, type StartWorkerOptions, type ToolWorker } from './worker.js';
