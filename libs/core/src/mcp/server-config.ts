/**
 * The MCP servers a deployment takes tools from (`TETRALOOP_MCP_SERVERS`): a command run over
 * stdio, or a URL spoken to over streamable HTTP. Pure.
 */
import { z } from 'zod';

/** A server's name: it stands between the dots of `mcp.<server>.<tool>`, so it holds none. */
export const McpServerName = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,32}$/, 'letters, digits, _ and - only, 1 to 32 of them');

/** A server each worker starts as a child process and speaks to over its stdin and stdout. */
export const McpStdioServer = z.strictObject({
  name: McpServerName,
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  /**
   * The child's environment beside the few variables it inherits (`HOME`, `LOGNAME`, `PATH`,
   * `SHELL`, `TERM`, `USER`): nothing else of the worker's environment reaches it.
   */
  env: z.record(z.string(), z.string()).default({}),
});
export type McpStdioServer = z.infer<typeof McpStdioServer>;

/** A server reached over streamable HTTP. */
export const McpHttpServer = z.strictObject({
  name: McpServerName,
  url: z.url({ protocol: /^https?$/ }),
  /** Sent with every request (an `Authorization` header, say). */
  headers: z.record(z.string(), z.string()).default({}),
});
export type McpHttpServer = z.infer<typeof McpHttpServer>;

export type McpServerConfig = McpStdioServer | McpHttpServer;

export const isStdioServer = (server: McpServerConfig): server is McpStdioServer => 'command' in server;

/**
 * One server: an object with `url` is an HTTP server, any other a stdio server. Checked by that
 * one schema, so each problem names its own field (`TETRALOOP_MCP_SERVERS.1.command`) rather than
 * "matches neither".
 */
const McpServerEntry = z.unknown().transform((value, ctx): McpServerConfig => {
  const schema =
    typeof value === 'object' && value !== null && 'url' in value ? McpHttpServer : McpStdioServer;
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues)
    ctx.addIssue({ code: 'custom', message: issue.message, path: issue.path });
  return z.NEVER;
});

/** The servers, each name once. */
export const McpServers = z.array(McpServerEntry).superRefine((servers, ctx) => {
  const seen = new Set<string>();
  servers.forEach((server, i) => {
    if (seen.has(server.name))
      ctx.addIssue({ code: 'custom', message: `server "${server.name}" is named twice`, path: [i, 'name'] });
    seen.add(server.name);
  });
});
