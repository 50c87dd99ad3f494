/**
 * MCP tools in a process. A worker connects to every configured server (`connectMcpServers`):
 * each server's tools join the process's tool registry as its connection lists them, and the list
 * goes to Redis. The API (`followMcpCatalog`) holds no MCP connection and starts no server: it
 * reads the lists workers wrote and follows their changes on a channel, so it validates graphs
 * against the same schemas the workers call with.
 */
import type { RedisClient } from './redis.js';
import type { Logger } from '../logging/logger.js';
import { NO_CALLS } from '../mcp/mcp-tool.js';
import type { ServerCatalog } from '../mcp/server-catalog.js';
import type { McpServerConfig } from '../mcp/server-config.js';
import { McpServerConnection, type ConnectionSettings } from '../mcp/server-connection.js';
import { McpToolRegistry } from '../mcp/tool-registry.js';
import type { McpCatalogStore } from '../state/mcp-catalog-store.js';
import type { ToolRegistry } from '../tools/tool.js';

export interface McpTools {
  /** The built-in tools and every server's, following the servers' lists. */
  readonly tools: McpToolRegistry;
  /** Each server's connection (a worker's); none in the API. */
  readonly connections: ReadonlyMap<string, McpServerConnection>;
  /** Closes the connections (stdio servers' processes end) or stops following the lists. */
  close(): Promise<void>;
}

export interface McpToolsOptions {
  readonly servers: readonly McpServerConfig[];
  readonly builtins: ToolRegistry;
  readonly store: McpCatalogStore;
  readonly logger: Logger;
}

/** Takes `catalog` as `server`'s list, logging what changed and what was left out. */
function take(tools: McpToolRegistry, server: string, catalog: ServerCatalog, logger: Logger): boolean {
  const change = tools.setCatalog(server, catalog);
  for (const problem of change.problems) logger.warn({ server, problem }, 'MCP tool not fully usable');
  if (change.changed)
    logger.info({ server, version: catalog.version, tools: catalog.tools.length }, 'MCP tool list taken');
  return change.changed;
}

/**
 * Connects to every server, each attempt bounded by the connect timeout, and resolves once each
 * has connected or failed: a server that failed is retried with backoff in the background (its
 * tools, known from the last list in Redis when there is one, fail `network` meanwhile); it never
 * stops the process.
 */
export async function connectMcpServers(
  options: McpToolsOptions & { readonly settings: ConnectionSettings },
): Promise<McpTools> {
  const { servers, store, logger } = options;
  const connections = new Map<string, McpServerConnection>();
  const tools = new McpToolRegistry(options.builtins, connections);
  for (const server of servers) {
    const connection = new McpServerConnection(
      server,
      options.settings,
      (catalog) => {
        if (!take(tools, server.name, catalog, logger)) return;
        store
          .publish(server.name, catalog)
          .catch((err: Error) =>
            logger.warn({ server: server.name, err: err.message }, 'MCP tool list not published'),
          );
      },
      logger,
    );
    connections.set(server.name, connection);
  }
  const connected = await Promise.all([...connections.values()].map((c) => c.connect()));
  const unreached = servers.filter((_, i) => !connected[i]).map((s) => s.name);
  const last = await store.readAll(unreached).catch((err: Error) => {
    logger.warn({ err: err.message }, 'last MCP tool lists not read');
    return new Map<string, ServerCatalog>();
  });
  for (const [server, catalog] of last)
    if (tools.version(server) === undefined) take(tools, server, catalog, logger);
  return {
    tools,
    connections,
    async close() {
      await Promise.all([...connections.values()].map((c) => c.close()));
    },
  };
}

/**
 * The registry of a process that validates graphs but calls no tool (the API): the lists workers
 * published, read at start and again whenever a worker publishes one (or the subscriber
 * reconnects, when a publication may have been missed). `subscriber` is a connection in
 * subscriber mode; it stays the caller's to close.
 */
export async function followMcpCatalog(
  options: McpToolsOptions & { readonly subscriber: RedisClient },
): Promise<McpTools> {
  const { servers, store, logger, subscriber } = options;
  const tools = new McpToolRegistry(options.builtins, new Map(servers.map((s) => [s.name, NO_CALLS])));
  const none = { tools, connections: new Map(), close: () => Promise.resolve() };
  if (servers.length === 0) return none;
  const names = servers.map((s) => s.name);
  const load = async (which: readonly string[]): Promise<void> => {
    for (const [server, catalog] of await store.readAll(which)) take(tools, server, catalog, logger);
  };
  const loadLogged = (which: readonly string[]): void => {
    load(which).catch((err: Error) => logger.warn({ err: err.message }, 'MCP tool lists not read'));
  };
  const onMessage = (channel: string, server: string): void => {
    if (channel === store.channel && names.includes(server)) loadLogged([server]);
  };
  const onReady = (): void => loadLogged(names);
  subscriber.on('message', onMessage);
  await subscriber.subscribe(store.channel);
  subscriber.on('ready', onReady);
  await load(names);
  return {
    ...none,
    close() {
      subscriber.off('message', onMessage);
      subscriber.off('ready', onReady);
      return Promise.resolve();
    },
  };
}
