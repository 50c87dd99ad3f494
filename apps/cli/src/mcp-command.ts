/**
 * `tetraloop mcp`: Tetraloop as an MCP server over stdio, so an MCP client (an IDE, another agent)
 * can drive it: `run_graph` and `run_task` submit a run and, unless told not to, wait for it;
 * `get_run` reads one. A client of the API at TETRALOOP_API_URL, like `tetraloop run`, sending
 * TETRALOOP_API_KEY as its bearer key (it needs `runs:write` and `runs:read`): it holds no Redis
 * connection, and the API's auth, ceilings and validation apply to everything it asks. Stdout is
 * the protocol's channel: nothing else is written there.
 */
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { RunWaitTimeoutError } from '@tetraloop/client';
import { apiTargetFromEnv, clientOf, describeFailure, type ApiTarget } from './api-client.js';

/** What `run_graph` and `run_task` take besides the graph or the task. */
const RunOptions = {
  input: z.unknown().optional().describe('The run input: what `{{input.…}}` references read.'),
  agentId: z.string().min(1).max(64).optional().describe('The agent the run is for (default "main").'),
  wait: z
    .boolean()
    .default(true)
    .describe('Wait for the run to settle (up to timeoutMs), or answer once it is accepted.'),
  timeoutMs: z
    .number()
    .int()
    .min(1)
    .max(300_000)
    .default(50_000)
    .describe('How long to wait; a run still going then is answered as it is, to read later with get_run.'),
};

const text = (value: unknown): CallToolResult['content'] => [{ type: 'text', text: JSON.stringify(value) }];

const answer = (value: Record<string, unknown>): CallToolResult => ({
  content: text(value),
  structuredContent: value,
});

/**
 * The API's answers to a tool's requests; its refusals, and an API that cannot be reached, as the
 * tool's error (with what to set).
 */
async function reaching(call: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await call();
  } catch (err) {
    const said = describeFailure(err, 'TETRALOOP_API_KEY');
    if (said === undefined) throw err;
    return { isError: true, content: [{ type: 'text', text: said }] };
  }
}

async function submit(
  target: ApiTarget,
  request: Record<string, unknown>,
  options: { wait: boolean; timeoutMs: number },
): Promise<CallToolResult> {
  const client = clientOf(target);
  const accepted = await client.submit(request);
  if (!options.wait) return answer(accepted);
  try {
    return answer(await client.wait(accepted.runId, options.timeoutMs));
  } catch (err) {
    // Still going when the wait ends: the document as it is, to read later with get_run.
    if (err instanceof RunWaitTimeoutError) return answer(err.last);
    throw err;
  }
}

const defined = (fields: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));

/** The server, its tools calling the API at `target`. */
export function tetraloopMcpServer(target: ApiTarget): McpServer {
  const server = new McpServer({ name: 'tetraloop', version: '0.1.0' });
  server.registerTool(
    'run_graph',
    {
      description:
        'Run a graph of tool and model calls on Tetraloop: {"nodes": [...], "edges": [[from, to], ...]} (see its docs/api.md). Answers the run document once it settles.',
      inputSchema: {
        graph: z.record(z.string(), z.unknown()).describe('The graph: {nodes, edges}.'),
        ...RunOptions,
      },
    },
    ({ graph, input, agentId, wait, timeoutMs }) =>
      reaching(() => submit(target, defined({ graph, input, agentId }), { wait, timeoutMs })),
  );
  server.registerTool(
    'run_task',
    {
      description:
        'Give Tetraloop a task in words: planned into a graph ("dag", the default), planned a few nodes at a time ("window"), or run by the tool-calling agent loop ("loop"). Answers the run document once it settles.',
      inputSchema: {
        task: z.string().min(1).describe('What to do.'),
        mode: z.enum(['dag', 'window', 'loop']).optional(),
        maxIterations: z.number().int().min(1).max(50).optional().describe('Loop mode: most model turns.'),
        ...RunOptions,
      },
    },
    ({ task, mode, maxIterations, input, agentId, wait, timeoutMs }) =>
      reaching(() =>
        submit(target, defined({ task, mode, maxIterations, input, agentId }), { wait, timeoutMs }),
      ),
  );
  server.registerTool(
    'get_run',
    {
      description: "A run's document: its status, every node's status and output, usage, error.",
      inputSchema: { runId: z.string().min(1).max(200) },
    },
    ({ runId }) => reaching(async () => answer(await clientOf(target).get(runId))),
  );
  return server;
}

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
