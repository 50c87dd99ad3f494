import { beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolError } from '../errors/node-error.js';
import { callError, callOutput } from './call-result.js';
import { loadMcpSdk } from './sdk.js';

// The SDK loads at a process's first connection; here there is none.
beforeAll(() => loadMcpSdk());

const failure = (f: () => unknown): unknown => {
  try {
    f();
  } catch (err) {
    return err instanceof ToolError ? err.toData() : err;
  }
  throw new Error('did not throw');
};

describe('an MCP call result', () => {
  it('gives its text, the text as JSON, its structured content and its other blocks', () => {
    expect(callOutput('t', { content: [{ type: 'text', text: 'Echo: hi' }] })).toEqual({ text: 'Echo: hi' });
    expect(
      callOutput('t', {
        content: [
          { type: 'text', text: '{"temperature": 36}' },
          { type: 'image', data: 'AAAA', mimeType: 'image/png' },
        ],
        structuredContent: { temperature: 36 },
      }),
    ).toEqual({
      text: '{"temperature": 36}',
      json: { temperature: 36 },
      structured: { temperature: 36 },
      content: [{ type: 'image', data: 'AAAA', mimeType: 'image/png' }],
    });
    expect(callOutput('t', { content: [] })).toEqual({ text: '' });
  });

  it('makes isError a validation error, unless its structured content names a class', () => {
    expect(
      failure(() => callOutput('t', { isError: true, content: [{ type: 'text', text: 'no such city' }] })),
    ).toEqual({ code: 'validation', message: 'no such city' });
    expect(
      failure(() =>
        callOutput('t', {
          isError: true,
          content: [{ type: 'text', text: 'slow down' }],
          structuredContent: { error: { code: 'rate_limited' }, retryAfterMs: 1500 },
        }),
      ),
    ).toEqual({ code: 'rate_limited', message: 'slow down', retryAfterMs: 1500 });
    expect(
      failure(() =>
        callOutput('t', { isError: true, content: [], structuredContent: { code: 'budget_exhausted' } }),
      ),
    ).toEqual({ code: 'validation', message: 'tool t failed' });
  });
});

describe('what an MCP call throws', () => {
  it('is classed by its code', () => {
    const code = (err: unknown): string => callError(err).code;
    expect(code(new McpError(ErrorCode.ConnectionClosed, 'closed'))).toBe('network');
    expect(code(new McpError(ErrorCode.RequestTimeout, 'slow'))).toBe('timeout');
    expect(code(new McpError(ErrorCode.InvalidParams, 'bad'))).toBe('validation');
    expect(code(new McpError(ErrorCode.MethodNotFound, 'none'))).toBe('validation');
    expect(code(new McpError(ErrorCode.InternalError, 'oops'))).toBe('server');
    expect(code(new McpError(-31999, "the server's own"))).toBe('server');
    expect(code(new StreamableHTTPError(401, 'who'))).toBe('auth');
    expect(code(new StreamableHTTPError(429, 'slow down'))).toBe('rate_limited');
    expect(code(new StreamableHTTPError(503, 'down'))).toBe('server');
    expect(code(new StreamableHTTPError(404, 'session gone'))).toBe('network');
    expect(code(new StreamableHTTPError(400, 'no valid session id'))).toBe('network');
    expect(code(new TypeError('fetch failed'))).toBe('network');
    expect(code(new ToolError('timeout', 'kept'))).toBe('timeout');
  });
});
