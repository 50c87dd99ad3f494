import { z } from 'zod';
import { ToolError } from '../errors/node-error.js';
import { parseRetryAfter, providerHoldOffMs } from '../errors/retry-after.js';
import { findReferences } from '../graph/references.js';
import { egressClient, ResponseTooLargeError, undiciErrors, type EgressResponse } from './egress-client.js';
import { EgressDeniedError, type EgressPolicy } from './egress-policy.js';
import { defineTool, type ArgIssue, type Tool } from './tool.js';

export const HttpInput = z
  .strictObject({
    method: z.enum(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']).default('GET'),
    url: z.url({ protocol: /^https?$/ }),
    headers: z.record(z.string(), z.string()).default({}),
    query: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).default({}),
    body: z.string().optional(),
    json: z.unknown().optional(),
    /** Sent as `Authorization: Basic base64(username:password)`; give the password as a `{"$secret"}`. */
    basicAuth: z.strictObject({ username: z.string().max(256), password: z.string() }).optional(),
    timeoutMs: z.number().int().positive().max(600_000).optional(),
  })
  .refine((v) => v.body === undefined || v.json === undefined, {
    message: 'give either body or json, not both',
    path: ['json'],
  })
  .refine(
    (v) =>
      v.basicAuth === undefined || !Object.keys(v.headers).some((h) => h.toLowerCase() === 'authorization'),
    { message: 'give either basicAuth or an Authorization header, not both', path: ['basicAuth'] },
  );
export type HttpInput = z.infer<typeof HttpInput>;

export const HttpOutput = z.object({
  status: z.number().int(),
  headers: z.record(z.string(), z.string()),
  body: z.unknown(),
});
export type HttpOutput = z.infer<typeof HttpOutput>;

/**
 * Maps a non-2xx status to an error class. A `429` reads the delay the server asks for from
 * `retry-after-ms`, `Retry-After` or an exhausted `x-ratelimit-*` limit.
 */
export function statusError(status: number, headers: Record<string, string>): ToolError {
  const message = `HTTP ${status}`;
  const retryAfter = headers['retry-after'];
  if (status === 429) {
    const hold = providerHoldOffMs(headers);
    return new ToolError('rate_limited', message, {
      status,
      ...(hold !== undefined ? { retryAfterMs: hold } : {}),
    });
  }
  if (status === 401 || status === 403) return new ToolError('auth', message, { status });
  if (status >= 500) return new ToolError('server', message, { status, ...parseRetryAfter(retryAfter) });
  return new ToolError('validation', message, { status });
}

/** Response headers never kept in an output: what a server hands out as a credential. */
const DROPPED_RESPONSE_HEADERS = new Set(['set-cookie', 'set-cookie2']);

function flattenHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers))
    if (v !== undefined && !DROPPED_RESPONSE_HEADERS.has(k.toLowerCase()))
      out[k] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}

/**
 * Request headers that carry credentials (case-insensitive): `Authorization`, `Cookie`,
 * `Proxy-Authorization` and any `…-Key` or `…-Token` (`X-Api-Key`) but `Idempotency-Key`.
 */
export function isCredentialHeader(name: string): boolean {
  const lower = name.toLowerCase();
  if (lower === 'idempotency-key') return false;
  return (
    lower === 'authorization' ||
    lower === 'cookie' ||
    lower === 'proxy-authorization' ||
    lower.endsWith('-key') ||
    lower.endsWith('-token')
  );
}

/**
 * A credential header whose value the graph writes in clear would be stored in the run document:
 * it must be a `{"$secret": "NAME"}` (or come from a reference).
 */
function credentialHeaderIssues(args: Readonly<Record<string, unknown>>): ArgIssue[] {
  const inClear = (value: unknown): boolean =>
    typeof value === 'string' && findReferences(value).length === 0;
  const headers = args.headers;
  const issues: ArgIssue[] =
    typeof headers !== 'object' || headers === null || Array.isArray(headers)
      ? []
      : Object.entries(headers as Record<string, unknown>)
          .filter(([name, value]) => isCredentialHeader(name) && inClear(value))
          .map(([name]) => ({
            at: ['headers', name],
            message: `header "${name}" carries a credential: give it as {"$secret": "NAME"} (stored with PUT /v1/secrets/NAME), not in clear`,
          }));
  const basic = args.basicAuth;
  if (typeof basic === 'object' && basic !== null && inClear((basic as Record<string, unknown>).password)) {
    issues.push({
      at: ['basicAuth', 'password'],
      message:
        'basicAuth.password is a credential: give it as {"$secret": "NAME"} (stored with PUT /v1/secrets/NAME), not in clear',
    });
  }
  return issues;
}

function classifyTransportError(err: unknown, signal: AbortSignal): ToolError {
  if (signal.aborted) return new ToolError('aborted', 'request aborted');
  if (err instanceof EgressDeniedError)
    return new ToolError('validation', err.message, { reason: 'egress_refused' });
  if (err instanceof ResponseTooLargeError)
    return new ToolError('validation', err.message, { reason: 'response_too_large' });
  const undici = undiciErrors();
  if (undici && (err instanceof undici.HeadersTimeoutError || err instanceof undici.BodyTimeoutError)) {
    return new ToolError('timeout', err.message);
  }
  const message = err instanceof Error ? err.message : String(err);
  return new ToolError('network', message);
}

/**
 * The `http` tool. Non-2xx answers are errors carrying the status; JSON bodies are parsed;
 * `Set-Cookie` is dropped from the output. Every request carries an `Idempotency-Key`, the same on
 * every retry of one call, so a server recognises a retried call.
 */
export function httpTool(policy: EgressPolicy): Tool {
  const client = egressClient(policy);
  return defineTool({
    name: 'http',
    description: 'Make an HTTP request; JSON responses are parsed. Non-2xx statuses are errors.',
    input: HttpInput,
    output: HttpOutput,
    target: (args) => new URL(args.url).host,
    destination: (args) => new URL(args.url),
    derivedSecrets: (args) => (args.basicAuth ? [basicCredentials(args.basicAuth)] : []),
    checkArgs: credentialHeaderIssues,
    async run(args, ctx) {
      const url = new URL(args.url);
      for (const [k, v] of Object.entries(args.query)) url.searchParams.append(k, String(v));
      const headers: Record<string, string> = { 'idempotency-key': ctx.idempotencyKey, ...args.headers };
      if (args.basicAuth) {
        headers.authorization = `Basic ${Buffer.from(basicCredentials(args.basicAuth)).toString('base64')}`;
      }
      let body: string | undefined = args.body;
      if (args.json !== undefined) {
        body = JSON.stringify(args.json);
        headers['content-type'] ??= 'application/json';
      }
      let res: EgressResponse;
      try {
        res = await client.fetch(url, {
          method: args.method,
          headers,
          ...(body !== undefined ? { body } : {}),
          signal: ctx.signal,
          ...(args.timeoutMs !== undefined ? { timeoutMs: args.timeoutMs } : {}),
        });
      } catch (err) {
        throw classifyTransportError(err, ctx.signal);
      }
      const responseHeaders = flattenHeaders(res.headers);
      if (res.status < 200 || res.status >= 300) {
        throw statusError(res.status, responseHeaders);
      }
      return {
        status: res.status,
        headers: responseHeaders,
        body: parseBody(res.text, responseHeaders['content-type']),
      };
    },
  });
}

/** What Basic auth encodes: `username:password`. */
function basicCredentials(auth: { username: string; password: string }): string {
  return `${auth.username}:${auth.password}`;
}

function parseBody(text: string, contentType: string | undefined): unknown {
  if (contentType === undefined || !/[/+]json\b/i.test(contentType)) return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
