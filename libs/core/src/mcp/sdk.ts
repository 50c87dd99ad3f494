/**
 * The MCP SDK's runtime parts, loaded at the first connection to a server: a process that serves
 * no MCP server never loads them (the SDK's client and its message schemas are ~200 ms of a cold
 * start). Only types are imported from it elsewhere.
 */
import type * as ClientModule from '@modelcontextprotocol/sdk/client/index.js';
import type * as StdioModule from '@modelcontextprotocol/sdk/client/stdio.js';
import type * as HttpModule from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type * as AuthModule from '@modelcontextprotocol/sdk/client/auth.js';
import type * as TypesModule from '@modelcontextprotocol/sdk/types.js';

export interface McpSdk {
  Client: typeof ClientModule.Client;
  StdioClientTransport: typeof StdioModule.StdioClientTransport;
  StreamableHTTPClientTransport: typeof HttpModule.StreamableHTTPClientTransport;
  StreamableHTTPError: typeof HttpModule.StreamableHTTPError;
  UnauthorizedError: typeof AuthModule.UnauthorizedError;
  McpError: typeof TypesModule.McpError;
  ErrorCode: typeof TypesModule.ErrorCode;
}

let loading: Promise<McpSdk> | undefined;
let loaded: McpSdk | undefined;

/** The SDK, loaded once per process. */
export function loadMcpSdk(): Promise<McpSdk> {
  loading ??= Promise.all([
    import('@modelcontextprotocol/sdk/client/index.js'),
    import('@modelcontextprotocol/sdk/client/stdio.js'),
    import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
    import('@modelcontextprotocol/sdk/client/auth.js'),
    import('@modelcontextprotocol/sdk/types.js'),
  ]).then(([client, stdio, http, auth, types]) => {
    loaded = {
      Client: client.Client,
      StdioClientTransport: stdio.StdioClientTransport,
      StreamableHTTPClientTransport: http.StreamableHTTPClientTransport,
      StreamableHTTPError: http.StreamableHTTPError,
      UnauthorizedError: auth.UnauthorizedError,
      McpError: types.McpError,
      ErrorCode: types.ErrorCode,
    };
    return loaded;
  });
  return loading;
}

/**
 * The SDK if it is loaded, else undefined: code that classifies what the SDK threw needs nothing
 * more, since nothing the SDK throws exists before it is loaded.
 */
export const loadedMcpSdk = (): McpSdk | undefined => loaded;
