/**
 * Tetraloop's MCP tools and resource, in one place for both servers that offer them: `tetraloop
 * mcp` (stdio, a client of the API over HTTP) and the API's `/mcp` (streamable HTTP, in the API
 * process). Each gives a `RunBackend` — how to submit, wait for, read, cancel and list runs — and
 * gets the same tools: `run_graph`, `run_task`, `get_run`, `cancel_run`, `list_runs`, and the run
 * document as the resource `tetraloop://runs/{runId}`. A call whose `_meta.progressToken` is set
 * is told, while it waits, of each node that settles (`notifications/progress`).
 */
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { RunSearchQuery } from '../requests.js';
import type { RunProgress } from './settled-nodes.js';

/** A run document or one of the API's short answers about a run: JSON with its id and status. */
export type RunAnswer = Record<string, unknown>;

/** The search `list_runs` takes: the query of `GET /v1/runs`. */
export const RunListArgs = RunSearchQuery;
export type RunListArgs = z.infer<typeof RunListArgs>;

/** What the tools ask of Tetraloop, as the caller they serve; each may throw a refusal. */
export interface RunBackend {
  /** Submits a run request (`POST /v1/runs`'s body): the accepted answer (`runId`, `status`). */
  submit(request: Record<string, unknown>): Promise<RunAnswer>;
  /**
   * The run's document once it settles, or as it is after `timeoutMs`. With `onProgress`, tells
   * it of each node that settles meanwhile, before it answers.
   */
  wait(
    runId: string,
    timeoutMs: number,
    onProgress: ((progress: RunProgress) => Promise<void>) | undefined,
    signal: AbortSignal,
  ): Promise<RunAnswer>;
  get(runId: string): Promise<RunAnswer>;
  /** Cancels the run: `{runId, status}`. */
  cancel(runId: string): Promise<RunAnswer>;
  /** A page of the caller's runs, newest first: `{runs, nextCursor}`. */
  list(search: RunListArgs): Promise<Record<string, unknown>>;
  /**
   * A refusal (an invalid request, an unknown run, a missing scope, a cap) as a tool error's text;
   * undefined for anything else, which is let through.
   */
  describeFailure(err: unknown): string | undefined;
  /** A refusal that says the run is not there (to the caller): the resource read's not found. */
  isNotFound(err: unknown): boolean;
}

/** The URI template of a run document. */
export const RUN_RESOURCE_TEMPLATE = 'tetraloop://runs/{runId}';
export const runResourceUri = (runId: string): string => `tetraloop://runs/${encodeURIComponent(runId)}`;
/** MCP's error code for a resource that is not there (its spec's, not in the SDK's enum). */
const RESOURCE_NOT_FOUND = -32002;

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

const RunId = z.string().min(1).max(200);

/** What a run tool answers (the run document, or the accepted answer): checked by clients. */
const RunShape = { runId: z.string(), status: z.string() };
const RunAnswerSchema = z.looseObject(RunShape);
const RunPageSchema = z.looseObject({
  runs: z.array(z.looseObject(RunShape)),
  nextCursor: z.string().nullable(),
});

const answer = (value: Record<string, unknown>): CallToolResult => ({
  content: [{ type: 'text', text: JSON.stringify(value) }],
  structuredContent: value,
});

const defined = (fields: Record<string, unknown>): Record<string, unknown> =>
  Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));

/** What a tool call carries besides its arguments (the SDK's request extra, as far as it is read). */
interface CallExtra {
  readonly signal: AbortSignal;
  readonly _meta?: { progressToken?: string | number };
  readonly sendNotification: (notification: {
    method: 'notifications/progress';
    params: { progressToken: string | number; progress: number; total?: number; message?: string };
  }) => Promise<void>;
}

/** The MCP server with Tetraloop's tools and resource, served by `backend`. */
export function runToolsServer(backend: RunBackend): McpServer {
  const server = new McpServer(
    { name: 'tetraloop', version: '0.1.0' },
    { instructions: 'Run graphs and tasks on Tetraloop; read, list and cancel its runs.' },
  );

  /** The backend's refusals as the tool's error; anything else is let through. */
  const reaching = async (call: () => Promise<CallToolResult>): Promise<CallToolResult> => {
    try {
      return await call();
    } catch (err) {
      const said = backend.describeFailure(err);
      if (said === undefined) throw err;
      return { isError: true, content: [{ type: 'text', text: said }] };
    }
  };

  const submit = async (
    request: Record<string, unknown>,
    options: { wait: boolean; timeoutMs: number },
    extra: CallExtra,
  ): Promise<CallToolResult> => {
    const accepted = await backend.submit(request);
    if (!options.wait) return answer(accepted);
    const token = extra._meta?.progressToken;
    const onProgress =
      token === undefined
        ? undefined
        : (p: RunProgress) =>
            extra.sendNotification({
              method: 'notifications/progress',
              params: { progressToken: token, ...p },
            });
    return answer(await backend.wait(String(accepted.runId), options.timeoutMs, onProgress, extra.signal));
  };

  server.registerTool(
    'run_graph',
    {
      description:
        'Run a graph of tool and model calls on Tetraloop: {"nodes": [...], "edges": [[from, to], ...]} (see its docs/api.md). Answers the run document once it settles; with a progress token, reports each node as it settles.',
      inputSchema: {
        graph: z.record(z.string(), z.unknown()).describe('The graph: {nodes, edges}.'),
        ...RunOptions,
      },
      outputSchema: RunAnswerSchema,
    },
    ({ graph, input, agentId, wait, timeoutMs }, extra) =>
      reaching(() => submit(defined({ graph, input, agentId }), { wait, timeoutMs }, extra)),
  );
  server.registerTool(
    'run_task',
    {
      description:
        'Give Tetraloop a task in words: planned into a graph ("dag", the default), planned a few nodes at a time ("window"), or run by the tool-calling agent loop ("loop"). Answers the run document once it settles; with a progress token, reports each node as it settles.',
      inputSchema: {
        task: z.string().min(1).describe('What to do.'),
        mode: z.enum(['dag', 'window', 'loop']).optional(),
        maxIterations: z.number().int().min(1).max(50).optional().describe('Loop mode: most model turns.'),
        ...RunOptions,
      },
      outputSchema: RunAnswerSchema,
    },
    ({ task, mode, maxIterations, input, agentId, wait, timeoutMs }, extra) =>
      reaching(() =>
        submit(defined({ task, mode, maxIterations, input, agentId }), { wait, timeoutMs }, extra),
      ),
  );
  server.registerTool(
    'get_run',
    {
      description: "A run's document: its status, every node's status and output, usage, error.",
      inputSchema: { runId: RunId },
      outputSchema: RunAnswerSchema,
    },
    ({ runId }) => reaching(async () => answer(await backend.get(runId))),
  );
  server.registerTool(
    'cancel_run',
    {
      description: 'Cancel a run that has not settled: its running nodes stop, the rest do not start.',
      inputSchema: { runId: RunId },
      outputSchema: RunAnswerSchema,
      annotations: { destructiveHint: true, idempotentHint: true },
    },
    ({ runId }) => reaching(async () => answer(await backend.cancel(runId))),
  );
  server.registerTool(
    'list_runs',
    {
      description:
        'Your runs, newest first, a page at a time (pass nextCursor as cursor for the next): filtered by status, agent, session, tag, and creation time (since/until: an ISO time or a duration before now such as 15m, 1h, 7d).',
      inputSchema: RunListArgs.shape,
      outputSchema: RunPageSchema,
      annotations: { readOnlyHint: true },
    },
    (search) => reaching(async () => answer(await backend.list(search))),
  );

  server.registerResource(
    'run',
    new ResourceTemplate(RUN_RESOURCE_TEMPLATE, { list: undefined }),
    {
      title: 'Run document',
      description: "A run's document (as get_run answers it), as JSON.",
      mimeType: 'application/json',
    },
    async (uri, { runId }) => {
      const id = Array.isArray(runId) ? runId[0] : runId;
      try {
        const doc = await backend.get(decodeURIComponent(id ?? ''));
        return { contents: [{ uri: uri.href, mimeType: 'application/json', text: JSON.stringify(doc) }] };
      } catch (err) {
        if (backend.isNotFound(err)) throw new McpError(RESOURCE_NOT_FOUND, `no such run: ${uri.href}`);
        const said = backend.describeFailure(err);
        if (said === undefined) throw err;
        throw new McpError(ErrorCode.InvalidRequest, said);
      }
    },
  );
  return server;
}
