/**
 * A scripted, OpenAI-compatible chat-completions server on loopback, for tests and benchmarks that
 * drive the real `openai` SDK without a network or a real model. A `Script` decides each answer:
 * text, tool calls, an HTTP error, or a hang; every parsed request is recorded so tests can check
 * what the agent actually sent.
 *
 *   POST /v1/chat/completions   scripted reply, plain JSON or server-sent events (`stream: true`)
 *   GET  /v1/models             one model, `scripted`
 *   anything else               404; a body that is not a JSON request object: 400
 */
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  name?: string;
}

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  stream?: boolean;
  tools?: unknown[];
  response_format?: unknown;
  stream_options?: { include_usage?: boolean };
  [k: string]: unknown;
}

/** What the script answers for one request. */
export type ScriptedReply =
  | {
      content: string;
      toolCalls?: { name: string; arguments: unknown }[];
      /** `cachedPromptTokens`: reported as `prompt_tokens_details.cached_tokens`, as OpenAI does. */
      usage?: { promptTokens?: number; completionTokens?: number; cachedPromptTokens?: number };
      latencyMs?: number;
      /**
       * Reasoning the model "returned": streamed as `reasoning_content` deltas before the content
       * (as DeepSeek and vLLM do), or on the message when not streamed.
       */
      reasoning?: string;
      /** How a streamed answer's content is cut into chunks (joined, they are `content`); else 4 parts. */
      pieces?: readonly string[];
      /**
       * Awaited before each content chunk of a streamed answer is sent: a test lets the stream go on
       * piece by piece, after it saw the one before arrive wherever it follows the run.
       */
      beforePiece?: (index: number) => Promise<void>;
    }
  /** An HTTP error answer (e.g. 429 with retry-after, 500). */
  | {
      status: number;
      error?: { message: string; type?: string };
      headers?: Record<string, string>;
      latencyMs?: number;
    }
  /** Never answers until the client disconnects. */
  | { hang: true };

/**
 * `index` is the 0-based position of this request among all requests the server received;
 * `headers` are the request's (e.g. `authorization`).
 */
export type Script = (
  request: ChatRequest,
  index: number,
  headers: IncomingHttpHeaders,
) => ScriptedReply | Promise<ScriptedReply>;

export interface ModelServerOptions {
  script: Script;
  defaultLatencyMs?: number;
  /** Completion tokens reported when a reply gives none; else ceil(output characters / 4). */
  completionTokens?: number;
}

export interface ModelServer {
  /** Base URL for the SDK, e.g. http://127.0.0.1:PORT/v1 */
  readonly url: string;
  /** Every request received, in order (parsed JSON bodies). */
  readonly requests: ChatRequest[];
  /**
   * Resolves with the first request, received already or later, that `match` accepts; fails after
   * `timeoutMs`.
   */
  received(match: (request: ChatRequest) => boolean, timeoutMs?: number): Promise<ChatRequest>;
  /** Replaces the script; request indexes keep counting from where they were. */
  setScript(script: Script): void;
  close(): Promise<void>;
}

/** The settings that send a stack's model and planner calls to `model`, unretried: what every scripted-model suite sets. */
export const scriptedModelEnv = (model: Pick<ModelServer, 'url'>): Record<string, string> => ({
  OPENAI_BASE_URL: model.url,
  TETRALOOP_MODEL: 'scripted-node',
  TETRALOOP_PLANNER_MODEL: 'scripted-planner',
  TETRALOOP_MODEL_MAX_RETRIES: '0',
});

/** Whether a request is a planner's: it asks for its answer in the `graph` JSON schema. */
export const isPlannerCall = (r: ChatRequest): boolean =>
  (r.response_format as { json_schema?: { name?: string } } | undefined)?.json_schema?.name === 'graph';

type ContentReply = Extract<ScriptedReply, { content: string }>;
type ErrorReply = Extract<ScriptedReply, { status: number }>;

/** Length of a message content: a string, or (as real clients may send) an array of text parts. */
function contentLength(content: unknown): number {
  if (typeof content === 'string') return content.length;
  if (!Array.isArray(content)) return 0;
  let n = 0;
  for (const part of content as unknown[]) {
    const text = (part as { text?: unknown } | null)?.text;
    if (typeof text === 'string') n += text.length;
  }
  return n;
}

/**
 * Prompt tokens the server reports when a reply gives none: ceil(characters / 4) over all message
 * contents, tool call arguments and the serialized `tools`. Crude but deterministic, so benchmarks
 * can predict it.
 */
export function estimateTokens(request: ChatRequest): number {
  let chars = 0;
  for (const message of request.messages) {
    chars += contentLength(message.content);
    for (const call of message.tool_calls ?? []) chars += call.function.arguments.length;
  }
  if (request.tools !== undefined) chars += JSON.stringify(request.tools).length;
  return Math.ceil(chars / 4);
}

/** A script that answers each request with the next reply of the list (the last one repeats). */
export function sequence(...replies: ScriptedReply[]): Script {
  if (replies.length === 0) throw new Error('sequence needs at least one reply');
  let next = 0;
  // Counts its own calls rather than using `index`, so it also works when set mid-test by setScript.
  return () => replies[Math.min(next++, replies.length - 1)]!;
}

/** Splits text into up to `pieces` parts of similar length, never inside a surrogate pair. */
function split(text: string, pieces: number): string[] {
  const chars = Array.from(text);
  const size = Math.max(1, Math.ceil(chars.length / pieces));
  const parts: string[] = [];
  for (let i = 0; i < chars.length; i += size) parts.push(chars.slice(i, i + size).join(''));
  return parts;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  res.writeHead(status, { ...headers, 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function sendError(res: ServerResponse, reply: ErrorReply): void {
  sendJson(
    res,
    reply.status,
    {
      error: {
        message: reply.error?.message ?? `scripted HTTP ${reply.status}`,
        type: reply.error?.type ?? (reply.status >= 500 ? 'server_error' : 'invalid_request_error'),
        code: null,
        param: null,
      },
    },
    reply.headers,
  );
}

function parseRequest(body: string): ChatRequest | undefined {
  try {
    const parsed: unknown = JSON.parse(body);
    if (typeof parsed !== 'object' || parsed === null || !Array.isArray((parsed as ChatRequest).messages)) {
      return undefined;
    }
    return parsed as ChatRequest;
  } catch {
    return undefined;
  }
}

export async function startModelServer(options: ModelServerOptions): Promise<ModelServer> {
  let script = options.script;
  const requests: ChatRequest[] = [];
  /** Called with each request as it arrives (see `received`). */
  const watchers = new Set<(request: ChatRequest) => void>();
  // Server-wide counters, so ids stay unique across the turns of a conversation.
  let completionCount = 0;
  let toolCallCount = 0;

  /** Resolves after `ms`, or early with false if the client went away meanwhile. */
  const wait = (res: ServerResponse, ms: number): Promise<boolean> =>
    new Promise((resolve) => {
      if (res.destroyed) return resolve(false);
      if (ms <= 0) return resolve(true);
      const onClose = (): void => {
        clearTimeout(timer);
        resolve(false);
      };
      const timer = setTimeout(() => {
        res.off('close', onClose);
        resolve(true);
      }, ms);
      res.once('close', onClose);
    });

  const complete = async (request: ChatRequest, reply: ContentReply, res: ServerResponse): Promise<void> => {
    const id = `chatcmpl-${++completionCount}`;
    const created = Math.floor(Date.now() / 1000);
    const toolCalls: ToolCall[] | undefined = reply.toolCalls?.map((call) => ({
      id: `call_${++toolCallCount}`,
      type: 'function',
      function: { name: call.name, arguments: JSON.stringify(call.arguments) },
    }));
    // Like OpenAI: a pure tool-call answer has content null, not ''.
    const content = toolCalls?.length && reply.content === '' ? null : reply.content;
    const finishReason = toolCalls?.length ? 'tool_calls' : 'stop';
    const outputChars =
      reply.content.length + (toolCalls ?? []).reduce((n, call) => n + call.function.arguments.length, 0);
    const promptTokens = reply.usage?.promptTokens ?? estimateTokens(request);
    const completionTokens =
      reply.usage?.completionTokens ?? options.completionTokens ?? Math.ceil(outputChars / 4);
    const usage = {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
      ...(reply.usage?.cachedPromptTokens !== undefined
        ? { prompt_tokens_details: { cached_tokens: reply.usage.cachedPromptTokens } }
        : {}),
    };

    if (!request.stream) {
      const message = {
        role: 'assistant',
        content,
        refusal: null,
        ...(reply.reasoning !== undefined ? { reasoning_content: reply.reasoning } : {}),
        ...(toolCalls?.length ? { tool_calls: toolCalls } : {}),
      };
      sendJson(res, 200, {
        id,
        object: 'chat.completion',
        created,
        model: request.model,
        choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }],
        usage,
      });
      return;
    }

    // Streamed: the same chunk sequence OpenAI sends, so the SDK's accumulation rebuilds the message.
    const includeUsage = request.stream_options?.include_usage === true;
    res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
    });
    const send = (data: unknown): void => {
      res.write(`data: ${JSON.stringify(data)}\n\n`);
    };
    const chunk = (delta: object, finish: string | null = null): object => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model: request.model,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      // With include_usage, OpenAI puts `usage: null` on every chunk but the last.
      ...(includeUsage ? { usage: null } : {}),
    });
    send(chunk({ role: 'assistant', content: content === null ? null : '' }));
    for (const piece of split(reply.reasoning ?? '', 3)) send(chunk({ reasoning_content: piece }));
    for (const [index, piece] of (reply.pieces ?? split(reply.content, 4)).entries()) {
      await reply.beforePiece?.(index);
      if (res.destroyed) return;
      send(chunk({ content: piece }));
    }
    (toolCalls ?? []).forEach((call, index) => {
      send(
        chunk({
          tool_calls: [
            { index, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } },
          ],
        }),
      );
      for (const piece of split(call.function.arguments, 3)) {
        send(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }));
      }
    });
    send(chunk({}, finishReason));
    if (includeUsage) {
      send({ id, object: 'chat.completion.chunk', created, model: request.model, choices: [], usage });
    }
    res.end('data: [DONE]\n\n');
  };

  const chatCompletions = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const request = parseRequest(await readBody(req));
    if (!request) {
      sendError(res, { status: 400, error: { message: 'body is not a JSON chat request with messages' } });
      return;
    }
    // Recorded and numbered on arrival, so concurrent requests keep their arrival order.
    const index = requests.push(request) - 1;
    for (const watch of watchers) watch(request);
    let reply: ScriptedReply;
    try {
      reply = await script(request, index, req.headers);
    } catch (error) {
      // Surface a broken script as a 500 the test can see, rather than a hung or reset request.
      sendError(res, { status: 500, error: { message: `script failed: ${String(error)}` } });
      return;
    }
    if ('hang' in reply) return; // The socket stays open until the client or close() ends it.
    if (!(await wait(res, reply.latencyMs ?? options.defaultLatencyMs ?? 0))) return;
    if ('status' in reply) sendError(res, reply);
    else await complete(request, reply, res);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const { pathname } = new URL(req.url ?? '/', 'http://localhost');
    if (req.method === 'POST' && pathname === '/v1/chat/completions') {
      await chatCompletions(req, res);
    } else if (req.method === 'GET' && pathname === '/v1/models') {
      sendJson(res, 200, {
        object: 'list',
        data: [{ id: 'scripted', object: 'model', created: 0, owned_by: 'tetraloop' }],
      });
    } else {
      sendError(res, { status: 404, error: { message: `no route ${req.method} ${pathname}` } });
    }
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendError(res, { status: 500, error: { message: String(error) } });
      else res.destroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    received(match, timeoutMs = 20_000) {
      const found = requests.find(match);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => {
        const watch = (request: ChatRequest): void => {
          if (!match(request)) return;
          watchers.delete(watch);
          clearTimeout(timer);
          resolve(request);
        };
        const timer = setTimeout(() => {
          watchers.delete(watch);
          reject(new Error(`no matching model request within ${timeoutMs} ms`));
        }, timeoutMs);
        watchers.add(watch);
      });
    },
    setScript(next) {
      script = next;
    },
    async close() {
      // Hanging and keep-alive connections would otherwise hold server.close() open forever.
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
