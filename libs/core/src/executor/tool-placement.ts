/**
 * Where a node's job runs when it calls a team's own tool: in the tool's queue, on a worker that
 * has the tool's code, with the tool's own retries and time limit when the node gives none. Pure.
 */
import type { NodeRetry } from '../graph/schema.js';
import { executionOf, type ExecutableNode } from '../nodes/index.js';
import { DEFAULT_TOOL_QUEUE, isCustomTool, type CustomTool } from '../tools/custom-tool.js';
import type { ToolRegistry } from '../tools/tool.js';

/** The custom tool a node calls (a tool node's), when it calls one. */
export function customToolOf(tools: ToolRegistry, node: ExecutableNode): CustomTool | undefined {
  const call = executionOf(node).declaredToolCall(node);
  if (!call) return undefined;
  const tool = tools.get(call.tool);
  return tool && isCustomTool(tool) ? tool : undefined;
}

/** The tool queue a node's job goes to: its custom tool's, else undefined (the node queue). */
export function queueOfNode(tools: ToolRegistry, node: ExecutableNode): string | undefined {
  const queue = customToolOf(tools, node)?.custom.queue;
  return queue === DEFAULT_TOOL_QUEUE ? undefined : queue;
}

/**
 * Whether this process may run a node in a job of another of its queues (a handoff): the node's
 * queue is one it serves and, for a custom tool, it has the code. `served` undefined: a process
 * that serves the node queue only (nothing custom is handed off to it).
 */
export function runsHere(tools: ToolRegistry, node: ExecutableNode, served?: readonly string[]): boolean {
  const tool = customToolOf(tools, node);
  const queue = tool?.custom.queue ?? DEFAULT_TOOL_QUEUE;
  if (!(served ?? [DEFAULT_TOOL_QUEUE]).includes(queue)) return false;
  return tool === undefined || tool.codeHere;
}

/** A node's retries: its own per class, else its custom tool's, else the deployment's. */
export function retryOfNode(tools: ToolRegistry, node: ExecutableNode): NodeRetry | undefined {
  const own = executionOf(node).retry(node);
  const toolRetry = customToolOf(tools, node)?.custom.retry;
  return toolRetry ? { ...toolRetry, ...own } : own;
}
