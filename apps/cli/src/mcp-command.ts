/**
 * `tetraloop mcp`: Tetraloop as an MCP server over stdio, so an MCP client (an IDE, another agent)
 * can drive it — the same tools and resource as the API's `/mcp` (`@tetraloop/api/mcp`), served
 * here by a client of the API at TETRALOOP_API_URL, like `tetraloop run`, sending
 * TETRALOOP_API_KEY as its bearer key (it needs `runs:write` and `runs:read`): it holds no Redis
 * connection, and the API's auth, ceilings and validation apply to everything it asks. Stdout is
 * the protocol's channel: nothing else is written there.
 */
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { runToolsServer, SettledNodes, type RunBackend } from '@tetraloop/api/mcp';
import { RunWaitTimeoutError, TetraloopApiError, unwrap, type TetraloopClient } from '@tetraloop/client';
import { apiTargetFromEnv, clientOf, describeFailure, type ApiTarget } from './api-client.js';

/**
 * Follows the run's events until it finishes (or `signal`), telling `onProgress` of each node that
 * settles; the iterator ends by itself after the run's final event.
 */
async function followProgress(
  client: TetraloopClient,
  runId: string,
  onProgress: NonNullable<Parameters<RunBackend['wait']>[2]>,
  signal: AbortSignal,
): Promise<void> {
  const nodes = Object.keys((await client.get(runId)).nodes).length;
  const tally = new SettledNodes(nodes > 0 ? nodes : undefined);
  for await (const event of client.events(runId, { signal })) {
    const progress = tally.read(event);
    if (progress) await onProgress(progress);
  }
}

/** The tools' backend: the API at `target`, over HTTP. */
export function apiRunBackend(target: ApiTarget): RunBackend {
  const client = clientOf(target);
  return {
    async submit(request) {
      return { ...(await client.submit(request)) };
    },
    async wait(runId, timeoutMs, onProgress, signal) {
      if (onProgress) {
        const until = AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]);
        await followProgress(client, runId, onProgress, until);
        return { ...(await client.get(runId)) };
      }
      try {
        return { ...(await client.wait(runId, timeoutMs, { signal })) };
      } catch (err) {
        // Still going when the wait ends: the document as it is, to read later with get_run.
        if (err instanceof RunWaitTimeoutError) return { ...err.last };
        throw err;
      }
    },
    async get(runId) {
      return { ...(await client.get(runId)) };
    },
    async cancel(runId) {
      return {
        ...unwrap(await client.api.POST('/v1/runs/{id}/cancel', { params: { path: { id: runId } } })),
      };
    },
    async list(search) {
      return { ...(await client.list(search)) };
    },
    describeFailure: (err) => describeFailure(err, 'TETRALOOP_API_KEY'),
    isNotFound: (err) => err instanceof TetraloopApiError && err.status === 404,
  };
}

/** The server, its tools calling the API at `target`. */
export const tetraloopMcpServer = (target: ApiTarget): McpServer => runToolsServer(apiRunBackend(target));

/** Serves MCP on stdin and stdout until stdin ends. */
export async function runMcpServer(target: ApiTarget = apiTargetFromEnv()): Promise<void> {
  const server = tetraloopMcpServer(target);
  const closed = new Promise<void>((resolve) => {
    server.server.onclose = resolve;
    process.stdin.once('end', resolve);
  });
  await server.connect(new StdioServerTransport());
  await closed;
  await server.close();
}
