/** How an MCP server's tool is named among Tetraloop's tools: `mcp.<server>.<tool>`. Pure. */

export const MCP_PREFIX = 'mcp.';

export const mcpToolName = (server: string, tool: string): string => `${MCP_PREFIX}${server}.${tool}`;

/**
 * The server and tool a name points at, when it is an MCP tool's. Server names hold no dot, so
 * the first dot after the prefix ends the server's (a tool's own name may hold dots).
 */
export function parseMcpToolName(name: string): { server: string; tool: string } | undefined {
  if (!name.startsWith(MCP_PREFIX)) return undefined;
  const rest = name.slice(MCP_PREFIX.length);
  const dot = rest.indexOf('.');
  if (dot <= 0 || dot === rest.length - 1) return undefined;
  return { server: rest.slice(0, dot), tool: rest.slice(dot + 1) };
}
