/**
 * `@tetraloop/api/mcp`: Tetraloop's MCP tools, for a server other than the API's `/mcp` (the
 * stdio command `tetraloop mcp`) to offer the same ones over its own backend.
 */
export { runToolsServer, runResourceUri, RUN_RESOURCE_TEMPLATE, RunListArgs } from './run-tools.js';
export type { RunAnswer, RunBackend } from './run-tools.js';
export { SettledNodes, type ProgressEvent, type RunProgress } from './settled-nodes.js';
