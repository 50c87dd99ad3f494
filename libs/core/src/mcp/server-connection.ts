/**
 * One process's connection to one MCP server, kept up. It connects (the `initialize` handshake),
 * lists the server's tools (every page) and lists them again on each
 * `notifications/tools/list_changed`; when the connection fails or closes it reconnects after a
 * doubling, jittered delay. While it is down, calls fail at once with `network`. A stdio server is
 * a child process of this process (started by the SDK with only the variables its config gives
 * and a few safe ones); its stderr lines go to the debug log.
 */
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult, Tool as ListedTool } from '@modelcontextprotocol/sdk/types.js';
import { ToolError } from '../errors/node-error.js';
import type { Logger } from '../logging/logger.js';
import { metrics } from '../telemetry/metrics.js';
import { callError } from './call-result.js';
import type { McpCaller } from './mcp-tool.js';
import { loadMcpSdk } from './sdk.js';
import { serverCatalog, type ServerCatalog } from './server-catalog.js';
import { isStdioServer, type McpServerConfig } from './server-config.js';

export interface ConnectionSettings {
  /** The longest the handshake, and each page of the tool list, may take. @defaultValue 10000 */
  readonly connectTimeoutMs: number;
  /** The first reconnect delay; each failed attempt doubles it. @defaultValue 1000 */
  readonly reconnectMinMs: number;
  /** The longest reconnect delay. @defaultValue 60000 */
  readonly reconnectMaxMs: number;
}

export const DEFAULT_CONNECTION_SETTINGS: ConnectionSettings = {
  connectTimeoutMs: 10_000,
  reconnectMinMs: 1000,
  reconnectMaxMs: 60_000,
};

export type ConnectionStatus = 'connecting' | 'connected' | 'down' | 'closed';

/** The `_meta` key a call's idempotency key is sent under (stable across retries of one call). */
export const IDEMPOTENCY_META_KEY = 'tetraloop/idempotency-key';

/** The SDK's own request timeout is 60 s; the harness's node timeout is what limits a call. */
const NO_SDK_TIMEOUT_MS = 2_147_483_647;
/** Pages of a tool list read at most (a server that pages for ever is cut off). */
const MAX_LIST_PAGES = 100;
/** The longest stderr line of a stdio server that is logged. */
const STDERR_LINE_CHARS = 1000;

const CLIENT_INFO = { name: 'tetraloop', version: '0.1.0' };

/** The transport a server's config asks for. */
export async function transportFor(config: McpServerConfig, logger: Logger): Promise<Transport> {
  const { StdioClientTransport, StreamableHTTPClientTransport } = await loadMcpSdk();
  if (!isStdioServer(config)) {
    return new StreamableHTTPClientTransport(new URL(config.url), {
      requestInit: { headers: config.headers },
    });
  }
  const transport = new StdioClientTransport({
    command: config.command,
    args: config.args,
    env: config.env,
    stderr: 'pipe',
  });
  // Read, so a chatty server never blocks on a full pipe.
  const stderr = transport.stderr as Readable | null;
  if (stderr) {
    createInterface({ input: stderr }).on('line', (line) =>
      logger.debug({ server: config.name, line: line.slice(0, STDERR_LINE_CHARS) }, 'MCP server stderr'),
    );
  }
  return transport;
}

async function listAllTools(client: Client, timeoutMs: number): Promise<ListedTool[]> {
  const tools: ListedTool[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_LIST_PAGES; page++) {
    const result = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: timeoutMs });
    tools.push(...result.tools);
    cursor = result.nextCursor;
    if (cursor === undefined) break;
  }
  return tools;
}

const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

export class McpServerConnection implements McpCaller {
  private state: ConnectionStatus = 'down';
  private client: Client | undefined;
  private attempt: Promise<boolean> | undefined;
  private failures = 0;
  private timer: NodeJS.Timeout | undefined;
  private lastError = 'not connected yet';

  /**
   * @param onTools called with the server's tools after each connect and each list change.
   * @param transport makes the transport of each attempt (the config's, unless a test gives one).
   */
  constructor(
    readonly config: McpServerConfig,
    private readonly settings: ConnectionSettings,
    private readonly onTools: (catalog: ServerCatalog) => void,
    private readonly logger: Logger,
    private readonly transport: () => Transport | Promise<Transport> = () => transportFor(config, logger),
  ) {}

  get name(): string {
    return this.config.name;
  }

  get status(): ConnectionStatus {
    return this.state;
  }

  /** Connects; resolves with whether it did (never rejects: a failure schedules the next attempt). */
  connect(): Promise<boolean> {
    if (this.state === 'closed') return Promise.resolve(false);
    if (this.state === 'connected') return Promise.resolve(true);
    clearTimeout(this.timer);
    this.attempt ??= this.tryConnect().finally(() => {
      this.attempt = undefined;
    });
    return this.attempt;
  }

  private async tryConnect(): Promise<boolean> {
    this.state = 'connecting';
    const { Client } = await loadMcpSdk();
    const client: Client = new Client(CLIENT_INFO, {
      capabilities: {},
      listChanged: {
        // Listed here, every page, rather than by the SDK (which reads the first page only).
        tools: { autoRefresh: false, debounceMs: 100, onChanged: () => void this.relist(client) },
      },
    });
    client.onerror = (err) =>
      this.logger.debug({ server: this.name, err: err.message }, 'MCP transport error');
    try {
      await client.connect(await this.transport(), { timeout: this.settings.connectTimeoutMs });
      // Held from here, so a list change the server announces during the first listing is not lost.
      this.client = client;
      const tools = await listAllTools(client, this.settings.connectTimeoutMs);
      // close() may have come while this attempt was under way.
      if (this.status === 'closed') {
        await client.close().catch(() => undefined);
        return false;
      }
      this.state = 'connected';
      this.failures = 0;
      metrics.mcpServerConnected.set({ server: this.name }, 1);
      client.onclose = () => this.lost(client, 'the connection closed');
      this.logger.info({ server: this.name, tools: tools.length }, 'MCP server connected');
      this.onTools(serverCatalog(tools));
      return true;
    } catch (err) {
      if (this.client === client) this.client = undefined;
      await client.close().catch(() => undefined);
      this.down(`could not connect: ${messageOf(err)}`);
      return false;
    }
  }

  /** Lists the tools again (a list-changed notification); a failure here is the connection's. */
  private async relist(client: Client): Promise<void> {
    if (this.client !== client) return;
    try {
      const tools = await listAllTools(client, this.settings.connectTimeoutMs);
      if (this.client === client) this.onTools(serverCatalog(tools));
    } catch (err) {
      this.lost(client, `listing its tools failed: ${messageOf(err)}`);
    }
  }

  /** The connection `client` is gone: drop it and reconnect. */
  private lost(client: Client, why: string): void {
    if (this.client !== client || this.state === 'closed') return;
    this.client = undefined;
    void client.close().catch(() => undefined);
    this.down(why);
  }

  private down(why: string): void {
    if (this.state === 'closed') return;
    this.state = 'down';
    metrics.mcpServerConnected.set({ server: this.name }, 0);
    this.lastError = why;
    this.failures++;
    const exponential = this.settings.reconnectMinMs * 2 ** Math.min(this.failures - 1, 30);
    const delay = Math.round(
      Math.min(this.settings.reconnectMaxMs, exponential) * (0.8 + 0.4 * Math.random()),
    );
    this.logger.warn({ server: this.name, err: why, retryInMs: delay }, 'MCP server unreachable');
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.connect(), delay);
    this.timer.unref();
  }

  async callTool(
    tool: string,
    args: Record<string, unknown>,
    options: { readonly signal: AbortSignal; readonly idempotencyKey: string },
  ): Promise<CallToolResult> {
    // A call that comes while the connection is being made waits for it (within its own limit).
    if (this.attempt) await abortable(this.attempt, options.signal);
    const client = this.client;
    if (!client || this.state !== 'connected') {
      throw new ToolError('network', `MCP server "${this.name}" is not connected (${this.lastError})`);
    }
    try {
      const result = await client.callTool(
        { name: tool, arguments: args, _meta: { [IDEMPOTENCY_META_KEY]: options.idempotencyKey } },
        undefined,
        { signal: options.signal, timeout: NO_SDK_TIMEOUT_MS },
      );
      if (!Array.isArray(result.content)) {
        // A server of the protocol's first version answers `toolResult`.
        return { content: [{ type: 'text', text: JSON.stringify(result.toolResult ?? null) }] };
      }
      return result as CallToolResult;
    } catch (err) {
      const error = callError(err);
      // A transport failure (an HTTP server that restarted and lost the session) ends the connection.
      if (error.code === 'network' && !options.signal.aborted) this.lost(client, error.message);
      throw error;
    }
  }

  /** Closes the connection (a stdio server's process ends) and stops reconnecting. */
  async close(): Promise<void> {
    this.state = 'closed';
    metrics.mcpServerConnected.remove({ server: this.name });
    clearTimeout(this.timer);
    const client = this.client;
    this.client = undefined;
    await this.attempt?.catch(() => undefined);
    await client?.close().catch(() => undefined);
  }
}

function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  if (signal.aborted) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const onAbort = (): void => resolve(undefined);
    signal.addEventListener('abort', onAbort, { once: true });
    void promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve(undefined);
      },
    );
  });
}
