/**
 * MCP servers' tool lists in Redis: a worker that lists a server's tools writes them here and
 * publishes the server's name; the API, which holds no MCP connection, reads them to validate
 * graphs against the tools' schemas, and a worker that cannot reach a server at start takes the
 * last list from here. One hash for the deployment (`mcpCatalogKey`), one entry per server, no TTL:
 * a few entries, rewritten on every connect and list change.
 */
import type { RedisClient } from './redis-client.js';
import { ServerCatalog } from '../mcp/server-catalog.js';
import { mcpCatalogChannel, mcpCatalogKey } from './keys.js';
import { slotMulti } from './slot-multi.js';

function parse(raw: string | null): ServerCatalog | undefined {
  if (raw === null) return undefined;
  try {
    const parsed = ServerCatalog.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

export class McpCatalogStore {
  readonly key: string;
  /** Where the names of servers whose lists were written are published. */
  readonly channel: string;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
  ) {
    this.key = mcpCatalogKey(prefix);
    this.channel = mcpCatalogChannel(prefix);
  }

  /** Writes `server`'s list and publishes its name, in one transaction. */
  async publish(server: string, catalog: ServerCatalog): Promise<void> {
    await slotMulti(this.redis)
      .hset(this.key, server, JSON.stringify(catalog))
      .publish(this.channel, server)
      .exec();
  }

  /** `server`'s last list; undefined when none was written (or it is unreadable). */
  async read(server: string): Promise<ServerCatalog | undefined> {
    return parse(await this.redis.hget(this.key, server));
  }

  /** The last lists of `servers` that have one. */
  async readAll(servers: readonly string[]): Promise<Map<string, ServerCatalog>> {
    if (servers.length === 0) return new Map();
    const raw = await this.redis.hmget(this.key, ...servers);
    const out = new Map<string, ServerCatalog>();
    servers.forEach((server, i) => {
      const catalog = parse(raw[i] ?? null);
      if (catalog) out.set(server, catalog);
    });
    return out;
  }
}
