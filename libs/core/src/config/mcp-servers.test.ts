import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ConfigError, jsonEnv, parseEnv } from './env-schema.js';
import { McpServers } from '../mcp/server-config.js';
import { parseMcpToolName } from '../mcp/tool-names.js';

const Env = z.object({ TETRALOOP_MCP_SERVERS: jsonEnv(McpServers, '[]') });
const parse = (value: unknown) => parseEnv(Env, { TETRALOOP_MCP_SERVERS: JSON.stringify(value) });
const refusal = (value: unknown): string => {
  try {
    parse(value);
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
  }
  throw new Error('accepted');
};

describe('TETRALOOP_MCP_SERVERS', () => {
  it('reads stdio and streamable HTTP servers, with defaults', () => {
    expect(
      parse([
        { name: 'everything', command: 'npx', args: ['-y', 'x'] },
        { name: 'remote', url: 'https://mcp.example.com/mcp', headers: { authorization: 'Bearer t' } },
      ]).TETRALOOP_MCP_SERVERS,
    ).toEqual([
      { name: 'everything', command: 'npx', args: ['-y', 'x'], env: {} },
      { name: 'remote', url: 'https://mcp.example.com/mcp', headers: { authorization: 'Bearer t' } },
    ]);
  });

  it('names the field of each problem', () => {
    expect(refusal([{ name: 'a' }])).toContain('TETRALOOP_MCP_SERVERS.0.command');
    expect(
      refusal([
        { name: 'a', command: 'x' },
        { name: 'b', url: 'ftp://x' },
      ]),
    ).toContain('TETRALOOP_MCP_SERVERS.1.url');
    expect(refusal([{ name: 'a.b', command: 'x' }])).toContain('TETRALOOP_MCP_SERVERS.0.name');
    expect(refusal([{ name: 'a', command: 'x', cwd: '/' }])).toContain('TETRALOOP_MCP_SERVERS.0');
    expect(
      refusal([
        { name: 'a', command: 'x' },
        { name: 'a', url: 'http://x' },
      ]),
    ).toMatch(/TETRALOOP_MCP_SERVERS\.1\.name: server "a" is named twice/);
    expect(refusal({ name: 'a' })).toContain('TETRALOOP_MCP_SERVERS');
  });
});

describe('MCP tool names', () => {
  it('split at the first dot after the server', () => {
    expect(parseMcpToolName('mcp.everything.get-sum')).toEqual({ server: 'everything', tool: 'get-sum' });
    expect(parseMcpToolName('mcp.fs.read.file')).toEqual({ server: 'fs', tool: 'read.file' });
    expect(parseMcpToolName('mcp.everything')).toBeUndefined();
    expect(parseMcpToolName('http')).toBeUndefined();
  });
});
