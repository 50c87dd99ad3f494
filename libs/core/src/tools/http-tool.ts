import { z } from 'zod';
import { Agent, errors as undiciErrors, request, type Dispatcher } from 'undici';
import { ToolError } from '../errors/node-error.js';
import {
  checkLiteralAddress,
  EgressDeniedError,
  guardedLookup,
  isAllowlisted,
  type EgressPolicy,
} from './egress-policy.js';
import { defineTool, type Tool } from './tool.js';

export const HttpInput = z
  .strictObject({
    method: z.enum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']).default('GET'),
    url: z.url({ protocol: /^https?$/ }),
    headers: z.record(z.string(), z.string()).default({}),
    query: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).default({}),
    body: z.string().optional(),
    json: z.unknown().optional(),
    timeoutMs: z.number().int().positive().max(600_000).optional(),
  })
  .refine((v) => v.body === undefined || v.json === undefined, {
    message: 'give either body or json, not both',
    path: ['json'],
  });
export type HttpInput = z.infer<typeof HttpInput>;

export const HttpOutput = z.object({
  status: z.number().int(),
  headers: z.record(z.string(), z.string()),
  body: z.unknown(),
});
export type HttpOutput = z.infer<typeof HttpOutput>;

/** Maps a non-2xx status to an error class. */
export function statusError(status: number, retryAfter: string | undefined): ToolError {
  const message = `HTTP ${status}`;
  if (status === 429) return new ToolError('rate_limited', message, { status, ...retryAfterMs(retryAfter) });
  if (status === 401 || status === 403) return new ToolError('auth', message, { status });
  if (status >= 500) return new ToolError('server', message, { status, ...retryAfterMs(retryAfter) });
  return new ToolError('validation', message, { status });
}

function retryAfterMs(header: string | undefined): { retryAfterMs?: number } {
  if (header === undefined) return {};
  const seconds = Number(header);
  if (Number.isFinite(seconds) && seconds >= 0) return { retryAfterMs: Math.round(seconds * 1000) };
  const date = Date.parse(header);
  return Number.isNaN(date) ? {} : { retryAfterMs: Math.max(0, date - Date.now()) };
}

function flattenHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers))
    if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}

function classifyTransportError(err: unknown, signal: AbortSignal): ToolError {
  if (signal.aborted) return new ToolError('aborted', 'request aborted');
  if (err instanceof EgressDeniedError) return new ToolError('validation', err.message);
  if (err instanceof undiciErrors.HeadersTimeoutError || err instanceof undiciErrors.BodyTimeoutError) {
    return new ToolError('timeout', err.message);
  }
  const message = err instanceof Error ? err.message : String(err);
  return new ToolError('network', message);
}

/**
 * The `http` tool. Non-2xx answers are errors carrying the status; JSON bodies are parsed.
 * Every request carries `Idempotency-Key: <runId>:<nodeId>` so a retried node is recognisable.
 */
export function httpTool(policy: EgressPolicy): Tool {
  const guarded = new Agent({ connect: { lookup: guardedLookup } });
  const open = new Agent();
  return defineTool({
    name: 'http',
    description: 'Make an HTTP request; JSON responses are parsed. Non-2xx statuses are errors.',
    input: HttpInput,
    output: HttpOutput,
    target: (args) => new URL(args.url).host,
    async run(args, ctx) {
      const url = new URL(args.url);
      for (const [k, v] of Object.entries(args.query)) url.searchParams.append(k, String(v));
      const port = url.port || (url.protocol === 'https:' ? '443' : '80');
      let dispatcher: Dispatcher = open;
      if (!isAllowlisted(policy, url.hostname, port)) {
        try {
          checkLiteralAddress(url.hostname);
        } catch (err) {
          throw classifyTransportError(err, ctx.signal);
        }
        dispatcher = guarded;
      }
      const headers: Record<string, string> = { 'idempotency-key': ctx.idempotencyKey, ...args.headers };
      let body: string | undefined = args.body;
      if (args.json !== undefined) {
        body = JSON.stringify(args.json);
        headers['content-type'] ??= 'application/json';
      }
      let res: Dispatcher.ResponseData;
      try {
        res = await request(url, {
          method: args.method,
          headers,
          body,
          dispatcher,
          signal: ctx.signal,
          ...(args.timeoutMs !== undefined
            ? { headersTimeout: args.timeoutMs, bodyTimeout: args.timeoutMs }
            : {}),
        });
      } catch (err) {
        throw classifyTransportError(err, ctx.signal);
      }
      let text: string;
      try {
        text = await res.body.text();
      } catch (err) {
        throw classifyTransportError(err, ctx.signal);
      }
      const responseHeaders = flattenHeaders(res.headers);
      if (res.statusCode < 200 || res.statusCode >= 300) {
        throw statusError(res.statusCode, responseHeaders['retry-after']);
      }
      return {
        status: res.statusCode,
        headers: responseHeaders,
        body: parseBody(text, responseHeaders['content-type']),
      };
    },
  });
}

function parseBody(text: string, contentType: string | undefined): unknown {
  if (contentType === undefined || !/[/+]json\b/i.test(contentType)) return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
