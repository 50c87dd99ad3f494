/**
 * An MCP server's tool as a Tetraloop tool: named `mcp.<server>.<tool>`, its args checked against
 * the JSON Schema the server lists (which is also what models and the planner see), its result
 * mapped to an output or an error class (`call-result.ts`).
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ToolError } from '../errors/node-error.js';
import { defineTool, type Tool } from '../tools/tool.js';
import { AnyArgs, type ArgsSchema, type JsonSchema } from './args-schema.js';
import { McpOutput, callError, callOutput } from './call-result.js';
import type { McpToolDef } from './server-catalog.js';
import { mcpToolName } from './tool-names.js';

/** Where a tool's calls go: a worker's connection to the server (the API has none). */
export interface McpCaller {
  /**
   * Calls `tool` with `args`. Rejects with a ToolError (`network` while the server is not
   * connected) or with what the SDK threw.
   */
  callTool(
    tool: string,
    args: Record<string, unknown>,
    options: { readonly signal: AbortSignal; readonly idempotencyKey: string },
  ): Promise<CallToolResult>;
}

/** A caller for a process that only validates graphs (the API): a call there is a bug. */
export const NO_CALLS: McpCaller = {
  callTool: () => Promise.reject(new ToolError('internal', 'MCP tools run in worker processes')),
};

async function call(
  caller: McpCaller,
  name: string,
  tool: string,
  args: Record<string, unknown>,
  ctx: {
    readonly signal: AbortSignal;
    readonly idempotencyKey: string;
  },
): Promise<McpOutput> {
  let result: CallToolResult;
  try {
    result = await caller.callTool(tool, args, ctx);
  } catch (err) {
    if (ctx.signal.aborted) throw new ToolError('aborted', 'call aborted');
    throw callError(err);
  }
  return callOutput(name, result);
}

/** `def` of server `server` as a tool, its args checked by `args` (compiled from `def.inputSchema`). */
export function mcpTool(server: string, def: McpToolDef, args: ArgsSchema, caller: McpCaller): Tool {
  const name = mcpToolName(server, def.name);
  return defineTool({
    name,
    description: def.description ?? `Tool "${def.name}" of MCP server "${server}".`,
    input: args.input,
    inputJsonSchema: def.inputSchema,
    output: McpOutput,
    run: (input, ctx) => call(caller, name, def.name, input, ctx),
  });
}

/**
 * A tool of a configured server whose tools are not known yet (no process has listed them): its
 * args cannot be checked before the call, and the call fails `network` while the server stays
 * out of reach. It is in no catalog — a model cannot be told of it.
 */
export function unlistedTool(server: string, tool: string, caller: McpCaller): Tool {
  const name = mcpToolName(server, tool);
  const schema: JsonSchema = { type: 'object' };
  return defineTool({
    name,
    description: `Tool "${tool}" of MCP server "${server}", whose tools are not known yet.`,
    input: AnyArgs,
    inputJsonSchema: schema,
    output: McpOutput,
    run: (input, ctx) => call(caller, name, tool, input, ctx),
  });
}
