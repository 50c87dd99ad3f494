/**
 * What an MCP tool call comes back as in Tetraloop: a result becomes the node's output, a result
 * flagged `isError` a node error, and what the SDK throws an error class the harness retries by.
 * Errors are recognised by their codes (JSON-RPC, HTTP status), never by message text. Pure.
 */
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { ToolError, type ErrorCode as NodeErrorCode } from '../errors/node-error.js';
import { statusError } from '../tools/http-tool.js';
import { loadedMcpSdk } from './sdk.js';

/** A call's output: what every MCP tool's node outputs. */
export const McpOutput = z.object({
  /** The text blocks of the result, joined by newlines ("" when there are none). */
  text: z.string(),
  /** `text` parsed, when it is JSON. */
  json: z.unknown().optional(),
  /** The result's `structuredContent`, when the server sent one (checked against the tool's output schema). */
  structured: z.record(z.string(), z.unknown()).optional(),
  /** The blocks that are not text (images, audio, resources, resource links), as the server sent them. */
  content: z.array(z.unknown()).optional(),
});
export type McpOutput = z.infer<typeof McpOutput>;

/** The longest message an `isError` result's text gives its node error. */
const ERROR_MESSAGE_CHARS = 2000;

function textOf(result: CallToolResult): string {
  return result.content
    .filter((b) => b.type === 'text')
    .map((b) => b.text)
    .join('\n');
}

function parseJson(text: string): { value: unknown } | undefined {
  if (text.trim() === '') return undefined;
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return undefined;
  }
}

/** The error classes a server may give its own failure (in `structuredContent`); others are `validation`. */
const CLAIMABLE = new Set<NodeErrorCode>([
  'network',
  'timeout',
  'rate_limited',
  'server',
  'auth',
  'validation',
]);

/**
 * An `isError` result as a node error: `validation` (the tool refused these args), unless its
 * `structuredContent` names another class as `code` or `error.code` — `{"code": "rate_limited",
 * "retryAfterMs": 2000}` — among `network`, `timeout`, `rate_limited`, `server`, `auth`.
 */
export function resultError(tool: string, result: CallToolResult): ToolError {
  const text = textOf(result).slice(0, ERROR_MESSAGE_CHARS);
  const message = text === '' ? `tool ${tool} failed` : text;
  const structured = result.structuredContent;
  const nested = structured?.error;
  const claimed =
    structured?.code ??
    (typeof nested === 'object' && nested !== null ? (nested as Record<string, unknown>).code : undefined);
  const code =
    typeof claimed === 'string' && CLAIMABLE.has(claimed as NodeErrorCode)
      ? (claimed as NodeErrorCode)
      : 'validation';
  const after = structured?.retryAfterMs;
  const retryAfterMs =
    typeof after === 'number' && Number.isInteger(after) && after >= 0 ? { retryAfterMs: after } : {};
  if (code === 'rate_limited' || code === 'server') return new ToolError(code, message, retryAfterMs);
  return new ToolError(code, message);
}

/** A result as the node's output; throws the node error of an `isError` result. */
export function callOutput(tool: string, result: CallToolResult): McpOutput {
  if (result.isError === true) throw resultError(tool, result);
  const text = textOf(result);
  const json = parseJson(text);
  const others = result.content.filter((b) => b.type !== 'text');
  return {
    text,
    ...(json ? { json: json.value } : {}),
    ...(result.structuredContent ? { structured: result.structuredContent } : {}),
    ...(others.length > 0 ? { content: others } : {}),
  };
}

/**
 * What the SDK threw, as an error class: a closed connection or anything the transport threw is
 * `network`, the SDK's own request timeout `timeout`, a refused request (bad params, unknown
 * method or tool, output that misses the tool's output schema) `validation`, the server's
 * internal error `server`; an HTTP 401/403, 429 or 5xx as the http tool maps them, any other
 * status (a session the server lost) `network`.
 */
export function callError(err: unknown): ToolError {
  if (err instanceof ToolError) return err as ToolError;
  const message = err instanceof Error ? err.message : String(err);
  // What the SDK throws exists only once the SDK is loaded.
  const sdk = loadedMcpSdk();
  if (!sdk) return new ToolError('network', message);
  const { ErrorCode } = sdk;
  if (err instanceof sdk.McpError) {
    switch (err.code as (typeof ErrorCode)[keyof typeof ErrorCode]) {
      case ErrorCode.ConnectionClosed:
        return new ToolError('network', message);
      case ErrorCode.RequestTimeout:
        return new ToolError('timeout', message);
      case ErrorCode.InvalidParams:
      case ErrorCode.InvalidRequest:
      case ErrorCode.MethodNotFound:
      case ErrorCode.UrlElicitationRequired:
        return new ToolError('validation', message);
      case ErrorCode.ParseError:
      case ErrorCode.InternalError:
        return new ToolError('server', message);
      default:
        // A server's own JSON-RPC error code: the request reached it and it failed there.
        return new ToolError('server', message);
    }
  }
  if (err instanceof sdk.UnauthorizedError) return new ToolError('auth', message);
  // 401/403, 429 and 5xx as the http tool reads them. Any other status refuses the HTTP exchange
  // itself, not the call's args (those come back as JSON-RPC errors): most often a session the
  // server no longer knows because it restarted (404, or 400 from servers that answer so), so the
  // connection is gone.
  if (
    err instanceof sdk.StreamableHTTPError &&
    (err.code === 401 || err.code === 403 || err.code === 429 || (err.code ?? 0) >= 500)
  ) {
    const mapped = statusError(err.code!, {});
    return new ToolError(mapped.code, message, mapped.extra);
  }
  return new ToolError('network', message);
}
