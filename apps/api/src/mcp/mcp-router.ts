/**
 * `/mcp`: Tetraloop's MCP tools over streamable HTTP, stateless. Each `POST` is served by a server
 * and transport of its own, made for the request's caller and closed with it: nothing of a client
 * is kept between requests, so any API replica behind a load balancer can answer any request, and
 * no session store is needed. A tool call answers as an SSE stream when it sends progress, so
 * progress and answer travel on the request that asked. `GET` (a stream for server-initiated
 * messages, which only a session could have) is `405`, as the protocol lets a server answer.
 */
import type { RequestHandler } from 'express';
import { callerOf } from '../auth.js';
import { HttpError, sendError, zodToHttp } from '../http-errors.js';
import type { RouteName } from '../route-table.js';
import { inProcessRuns, type InProcessRunsDeps } from './in-process-runs.js';
import { McpMessage } from './mcp-messages.js';

export type McpRouterDeps = InProcessRunsDeps;

/**
 * The SDK's server side, loaded at the first `/mcp` request: an API that serves none never loads it
 * (its message schemas are a noticeable part of a cold start).
 */
let loading:
  | Promise<
      [typeof import('./run-tools.js'), typeof import('@modelcontextprotocol/sdk/server/streamableHttp.js')]
    >
  | undefined;
const serverParts = () =>
  (loading ??= Promise.all([
    import('./run-tools.js'),
    import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
  ]));

export function mcpHandlers(deps: McpRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const message: RequestHandler = async (req, res) => {
    // What the transport would refuse in JSON-RPC's words, refused first in the API's: the
    // status, and the field or header at fault.
    if (!req.is('application/json')) {
      throw new HttpError(415, 'unsupported_media_type', 'send the message as application/json');
    }
    const accept = req.get('accept') ?? '';
    if (!accept.includes('application/json') || !accept.includes('text/event-stream')) {
      throw new HttpError(
        406,
        'not_acceptable',
        'accept both answers streamable HTTP may give: Accept: application/json, text/event-stream',
      );
    }
    const body = McpMessage.safeParse(req.body);
    if (!body.success) throw zodToHttp(body.error);
    const [{ runToolsServer }, { StreamableHTTPServerTransport }] = await serverParts();
    const server = runToolsServer(inProcessRuns(deps, callerOf(res)));
    // Stateless: no session id is handed out, and the transport serves this one request.
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    // The answer ended or the client went away: a waiting tool call stops waiting (its run goes on).
    res.on('close', () => {
      void server.close();
    });
    await server.connect(transport);
    // The body was parsed (and its size and depth checked) like a `/v1` body.
    await transport.handleRequest(req, res, body.data);
  };

  const stream: RequestHandler = (_req, res) => {
    res.set('allow', 'POST');
    sendError(
      res,
      new HttpError(
        405,
        'method_not_allowed',
        'this MCP endpoint is stateless: it has no stream for server-initiated messages; POST each message',
      ),
    );
  };

  return { 'mcp.message': message, 'mcp.stream': stream };
}
