/**
 * A connection to an MCP server written with the SDK's own McpServer, in process over the SDK's
 * in-memory transport: the tool list followed through `notifications/tools/list_changed`, and a
 * server that goes away (calls fail `network`) and comes back (the connection is made again).
 */
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ToolError } from '../errors/node-error.js';
import { createLogger } from '../logging/logger.js';
import { toolCatalog } from '../tools/tool-catalog.js';
import { toolRegistry } from '../tools/tool.js';
import type { ServerCatalog } from './server-catalog.js';
import { McpServerConnection } from './server-connection.js';
import { McpToolRegistry } from './tool-registry.js';

const logger = createLogger({ level: 'silent', layer: 'tool', redact: [] });
const settings = { connectTimeoutMs: 5000, reconnectMinMs: 20, reconnectMaxMs: 100 };
const signal = new AbortController().signal;

/** A server with one tool, `greet`. */
function greeter(): McpServer {
  const server = new McpServer(
    { name: 'greeter', version: '1.0.0' },
    { capabilities: { tools: { listChanged: true } } },
  );
  server.registerTool('greet', { description: 'Greets', inputSchema: { name: z.string() } }, ({ name }) => ({
    content: [{ type: 'text', text: `hello ${name}` }],
  }));
  return server;
}

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.close()));
});

/** A connection whose every attempt starts a fresh `makeServer()`; `lists` yields each list taken. */
function connect(makeServer: () => McpServer) {
  const servers: McpServer[] = [];
  const taken: ServerCatalog[] = [];
  const waiting: ((c: ServerCatalog) => void)[] = [];
  const connections = new Map<string, McpServerConnection>();
  const tools = new McpToolRegistry(toolRegistry([]), connections);
  const connection = new McpServerConnection(
    { name: 'mem', command: 'unused', args: [], env: {} },
    settings,
    (catalog) => {
      tools.setCatalog('mem', catalog);
      taken.push(catalog);
      waiting.shift()?.(catalog);
    },
    logger,
    () => {
      const [client, server] = InMemoryTransport.createLinkedPair();
      const made = makeServer();
      servers.push(made);
      void made.connect(server);
      return client;
    },
  );
  connections.set('mem', connection);
  open.push(connection, { close: () => Promise.all(servers.map((s) => s.close())).then(() => undefined) });
  const nextList = (): Promise<ServerCatalog> => new Promise((resolve) => waiting.push(resolve));
  return { connection, tools, servers, taken, nextList };
}

describe('an MCP server connection', () => {
  it('lists the tools, and lists them again when the server says they changed', async () => {
    const { connection, tools, servers, nextList } = connect(greeter);
    expect(await connection.connect()).toBe(true);
    expect([...tools.keys()]).toEqual(['mcp.mem.greet']);
    const before = toolCatalog(tools).version;

    const changed = nextList();
    const farewell = servers[0]!.registerTool(
      'farewell',
      { inputSchema: { name: z.string() } },
      ({ name }) => ({
        content: [{ type: 'text', text: `bye ${name}` }],
      }),
    );
    await changed;
    expect([...tools.keys()].sort()).toEqual(['mcp.mem.farewell', 'mcp.mem.greet']);
    const after = toolCatalog(tools).version;
    expect(after).not.toBe(before);
    expect(toolCatalog(tools).tools.find((t) => t.name === 'mcp.mem.farewell')?.parameters).toMatchObject({
      type: 'object',
      properties: { name: { type: 'string' } },
      required: ['name'],
    });

    const removed = nextList();
    farewell.remove();
    await removed;
    expect([...tools.keys()]).toEqual(['mcp.mem.greet']);
    expect(toolCatalog(tools).version).toBe(before);
  });

  it('calls a tool through the registry', async () => {
    const { connection, tools } = connect(greeter);
    await connection.connect();
    const greet = tools.get('mcp.mem.greet')!;
    expect(
      await greet.run({ name: 'ada' }, { signal, runId: 'r', nodeId: 'n', idempotencyKey: 'k' }),
    ).toEqual({
      text: 'hello ada',
    });
    expect(greet.input.safeParse({ name: 3 }).success).toBe(false);
  });

  it('fails calls with network while the server is gone, and connects again', async () => {
    const { connection, servers, nextList } = connect(greeter);
    await connection.connect();
    const back = nextList();
    await servers[0]!.close();
    await expect(
      connection.callTool('greet', { name: 'x' }, { signal, idempotencyKey: 'k' }),
    ).rejects.toSatisfy((err) => err instanceof ToolError && err.code === 'network');
    await back;
    expect(connection.status).toBe('connected');
    expect(servers).toHaveLength(2);
    await expect(
      connection.callTool('greet', { name: 'x' }, { signal, idempotencyKey: 'k' }),
    ).resolves.toMatchObject({
      content: [{ type: 'text', text: 'hello x' }],
    });
  });

  it('gives the tools of a server whose list is unknown, failing network until it is reached', async () => {
    const connections = new Map<string, McpServerConnection>();
    const connection = new McpServerConnection(
      { name: 'gone', command: process.execPath, args: ['-e', 'process.exit(3)'], env: {} },
      { ...settings, reconnectMinMs: 60_000, reconnectMaxMs: 60_000 },
      () => undefined,
      logger,
    );
    connections.set('gone', connection);
    open.push(connection);
    const tools = new McpToolRegistry(toolRegistry([]), connections);
    expect(await connection.connect()).toBe(false);
    expect(connection.status).toBe('down');
    const tool = tools.get('mcp.gone.anything');
    expect(tool && [...tools.keys()]).toEqual([]);
    expect(tools.has('mcp.other.anything')).toBe(false);
    await expect(tool!.run({}, { signal, runId: 'r', nodeId: 'n', idempotencyKey: 'k' })).rejects.toSatisfy(
      (err) => err instanceof ToolError && err.code === 'network',
    );
  });
});
