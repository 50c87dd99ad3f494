/**
 * The tools of a process: the built-in ones, those of each configured MCP server, and the team's
 * own (custom tools: those this process has the code of, and those the catalog in Redis lists), as
 * one registry that follows the servers' lists and the catalog. Validation, the planner, the agent
 * loop and the executor all hold this one object, so a change reaches each of them at once (and
 * the tool catalog's version, a hash of what it lists, changes with it).
 */
import type { Tool, ToolRegistry } from '../tools/tool.js';
import { argsSchemaCompiler } from './args-schema.js';
import { mcpTool, unlistedTool, type McpCaller } from './mcp-tool.js';
import type { ServerCatalog } from './server-catalog.js';
import { mcpToolName, parseMcpToolName } from './tool-names.js';

/** The longest tool name a graph may give (a `tool` node's `tool`). */
export const MAX_TOOL_NAME = 128;

/** What taking a server's list in came to. */
export interface CatalogChange {
  /** False when the registry held this version of the list already. */
  readonly changed: boolean;
  /** Tools left out (a name past 128 characters), and schemas left to the server, with why. */
  readonly problems: readonly string[];
}

export class McpToolRegistry implements ReadonlyMap<string, Tool> {
  private readonly versions = new Map<string, string>();
  private readonly lists = new Map<string, readonly Tool[]>();
  /** Custom tools known from the catalog (no code here), then those with their code here. */
  private custom: { remote: readonly Tool[]; local: readonly Tool[] } = { remote: [], local: [] };
  /** Output schemas of every custom tool version the catalog lists, by `<name>@<schema hash>`. */
  private outputSchemas: ReadonlyMap<string, Readonly<Record<string, unknown>>> = new Map();
  private all: Map<string, Tool>;
  private readonly listeners = new Set<(server: string, version: string) => void>();

  /** `servers`: each configured server's name and where its tools' calls go. */
  constructor(
    private readonly builtins: ToolRegistry,
    private readonly servers: ReadonlyMap<string, McpCaller>,
  ) {
    this.all = new Map(builtins);
  }

  /** The servers this registry takes tools from. */
  get serverNames(): readonly string[] {
    return [...this.servers.keys()];
  }

  /** The version of `server`'s list this registry holds; undefined while its tools are not known. */
  version(server: string): string | undefined {
    return this.versions.get(server);
  }

  /** Replaces `server`'s tools by the catalog's (a server not configured here is ignored). */
  setCatalog(server: string, catalog: ServerCatalog): CatalogChange {
    const caller = this.servers.get(server);
    if (!caller || this.versions.get(server) === catalog.version) return { changed: false, problems: [] };
    const compile = argsSchemaCompiler();
    const problems: string[] = [];
    const tools: Tool[] = [];
    for (const def of catalog.tools) {
      const name = mcpToolName(server, def.name);
      if (name.length > MAX_TOOL_NAME) {
        problems.push(`${name}: left out, its name is longer than ${MAX_TOOL_NAME} characters`);
        continue;
      }
      const args = compile(def.inputSchema);
      if (args.problem) problems.push(`${name}: args left to the server to check (${args.problem})`);
      tools.push(mcpTool(server, def, args, caller));
    }
    this.versions.set(server, catalog.version);
    this.lists.set(server, tools);
    this.rebuild();
    for (const listener of this.listeners) listener(server, catalog.version);
    return { changed: true, problems };
  }

  /**
   * Replaces the custom tools: `local`, those this process serves (with their code), and
   * `remote`, those the catalog lists; a local tool wins over the catalog's of the same name.
   */
  setCustomTools(custom: {
    readonly local: readonly Tool[];
    readonly remote: readonly Tool[];
    /** Output schemas of the versions the catalog lists, by `<name>@<schema hash>`. */
    readonly outputSchemas?: ReadonlyMap<string, Readonly<Record<string, unknown>>>;
  }): void {
    this.custom = { local: custom.local, remote: custom.remote };
    if (custom.outputSchemas) this.outputSchemas = custom.outputSchemas;
    this.rebuild();
  }

  /** The output schema of version `schemaHash` of custom tool `name`, when the catalog lists it. */
  outputSchemaOf(name: string, schemaHash: string): Readonly<Record<string, unknown>> | undefined {
    return this.outputSchemas.get(`${name}@${schemaHash}`);
  }

  /** The custom tools this process has the code of. */
  get localTools(): readonly Tool[] {
    return this.custom.local;
  }

  /** Calls `listener` after each change of a server's list; returns what stops it. */
  onChange(listener: (server: string, version: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private rebuild(): void {
    const all = new Map(this.builtins);
    for (const tools of this.lists.values()) for (const t of tools) all.set(t.name, t);
    for (const t of this.custom.remote) all.set(t.name, t);
    for (const t of this.custom.local) all.set(t.name, t);
    this.all = all;
  }

  /**
   * The tool of that name. A name of a configured server whose tools are not known yet gives a
   * tool that checks nothing before its call (see `unlistedTool`); it is in no listing.
   */
  get(name: string): Tool | undefined {
    const known = this.all.get(name);
    if (known) return known;
    const ref = parseMcpToolName(name);
    if (!ref || this.lists.has(ref.server) || name.length > MAX_TOOL_NAME) return undefined;
    const caller = this.servers.get(ref.server);
    return caller ? unlistedTool(ref.server, ref.tool, caller) : undefined;
  }

  has(name: string): boolean {
    return this.get(name) !== undefined;
  }

  get size(): number {
    return this.all.size;
  }

  keys(): MapIterator<string> {
    return this.all.keys();
  }

  values(): MapIterator<Tool> {
    return this.all.values();
  }

  entries(): MapIterator<[string, Tool]> {
    return this.all.entries();
  }

  [Symbol.iterator](): MapIterator<[string, Tool]> {
    return this.all.entries();
  }

  forEach(callback: (value: Tool, key: string, map: ReadonlyMap<string, Tool>) => void): void {
    for (const [key, value] of this.all) callback(value, key, this);
  }
}
