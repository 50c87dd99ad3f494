/**
 * Custom tools in a process. A worker that serves them (`serveCustomTools`) publishes them to the
 * catalog in Redis and beats while it runs; every process that knows tools (`followToolCatalog`:
 * the API, the planners, workers of other queues) reads the catalog at start, again whenever it
 * changes and on every refresh, and holds each listed tool in its registry as a tool without code
 * (`catalogTool`): its input checked against the JSON Schema its workers published, its node jobs
 * routed to its queue. `loadToolModules` imports the modules a worker is told to serve.
 */
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { ToolError } from '../errors/node-error.js';
import type { Logger } from '../logging/logger.js';
import { argsSchemaCompiler } from '../mcp/args-schema.js';
import type { McpToolRegistry } from '../mcp/tool-registry.js';
import { metrics } from '../telemetry/metrics.js';
import type { ToolCatalogSnapshot, ToolCatalogStore } from '../state/tool-catalog-store.js';
import {
  DEFAULT_TOOL_QUEUE,
  ToolDefinitionError,
  isCustomTool,
  type CustomTool,
  type CustomToolInfo,
} from '../tools/custom-tool.js';
import type { RedisClient } from './redis.js';

/** A tool the catalog lists, in a process without its code: checks args, routes, never runs here. */
export function catalogTool(info: CustomToolInfo, compile = argsSchemaCompiler()): CustomTool {
  const args = compile(info.inputSchema);
  return {
    name: info.name,
    description: info.description,
    input: args.input,
    inputJsonSchema: info.inputSchema,
    output: z.unknown(),
    custom: info,
    codeHere: false,
    target: () => info.name,
    // The node executor puts a job of a tool it has no code for back in its queue before it runs.
    run: () => Promise.reject(new ToolError('internal', `tool ${info.name} has no code in this process`)),
  };
}

/** The catalog's tools as tools of a registry, without those this process has the code of. */
function remoteTools(snapshot: ToolCatalogSnapshot, local: readonly CustomTool[]): CustomTool[] {
  const here = new Set(local.map((t) => t.name));
  const compile = argsSchemaCompiler();
  return [...snapshot.tools.values()]
    .filter((e) => !here.has(e.tool.name))
    .map((e) => catalogTool(e.tool, compile));
}

/** Sets `tetraloop_tool_workers` from a catalog read: each known tool on its queue, live workers. */
function gaugeWorkers(snapshot: ToolCatalogSnapshot): void {
  metrics.toolWorkers.reset();
  for (const { tool } of snapshot.tools.values()) {
    const serving = snapshot.workers.filter((w) => w.tools.some((t) => t.name === tool.name)).length;
    metrics.toolWorkers.set({ tool: tool.name, queue: tool.queue }, serving);
  }
}

export interface ToolCatalogFollower {
  /** The catalog as last read. */
  snapshot(): ToolCatalogSnapshot;
  /**
   * Calls `listener` with the custom tool queues the catalog names (not `default`) now and after
   * each read that finds a new one (metrics and Bull Board show each queue).
   */
  onQueues(listener: (queues: readonly string[]) => void): void;
  /** Reads the catalog now (tests, and a worker right after it published). */
  refresh(): Promise<void>;
  close(): void;
}

/**
 * Keeps `registry`'s custom tools as the catalog lists them: read now, on every change published
 * on the catalog's channel (through `subscriber`, which stays the caller's to close), and every
 * `refreshMs` (a tool whose TTL ran out goes, live worker counts stay true).
 */
export async function followToolCatalog(options: {
  readonly registry: McpToolRegistry;
  readonly store: ToolCatalogStore;
  readonly subscriber: RedisClient;
  readonly refreshMs: number;
  readonly logger: Pick<Logger, 'warn'>;
}): Promise<ToolCatalogFollower> {
  const { registry, store, subscriber, logger } = options;
  let last: ToolCatalogSnapshot = { tools: new Map(), workers: [] };
  const queues = new Set<string>();
  const queueListeners: ((queues: readonly string[]) => void)[] = [];
  const load = async (): Promise<void> => {
    last = await store.read();
    registry.setCustomTools({
      local: registry.localTools,
      remote: remoteTools(last, registry.localTools.filter(isCustomTool)),
      outputSchemas: new Map(
        [...last.tools.values()].flatMap((e) =>
          e.versions.map((v) => [`${e.tool.name}@${v.schemaHash}`, v.outputSchema] as const),
        ),
      ),
    });
    gaugeWorkers(last);
    const before = queues.size;
    for (const { tool } of last.tools.values()) if (tool.queue !== DEFAULT_TOOL_QUEUE) queues.add(tool.queue);
    if (queues.size > before) for (const listener of queueListeners) listener([...queues]);
  };
  const loadLogged = (): void => {
    load().catch((err: Error) => logger.warn({ err: err.message }, 'tool catalog not read'));
  };
  const onMessage = (channel: string): void => {
    if (channel === store.keys.channel) loadLogged();
  };
  subscriber.on('message', onMessage);
  subscriber.on('ready', loadLogged);
  await subscriber.subscribe(store.keys.channel);
  await load();
  const timer = setInterval(loadLogged, options.refreshMs);
  timer.unref();
  return {
    snapshot: () => last,
    onQueues(listener) {
      queueListeners.push(listener);
      listener([...queues]);
    },
    refresh: load,
    close() {
      clearInterval(timer);
      subscriber.off('message', onMessage);
      subscriber.off('ready', loadLogged);
    },
  };
}

/** What a worker process serving custom tools is: a stable id for its heartbeats. */
export const toolWorkerId = (): string => `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;

export interface ToolServing {
  readonly workerId: string;
  /** Stops beating and takes this worker out of the catalog. */
  close(): Promise<void>;
}

/**
 * Publishes the tools this worker serves, and beats every `heartbeatMs` (each beat writes them
 * again: a catalog entry lost or pruned comes back with the next beat). `queues`: the queues it
 * serves (`default` for the shared node queue).
 */
export async function serveCustomTools(options: {
  readonly store: ToolCatalogStore;
  readonly tools: readonly CustomTool[];
  readonly queues: readonly string[];
  readonly heartbeatMs: number;
  readonly logger: Pick<Logger, 'warn'>;
}): Promise<ToolServing> {
  const { store, logger } = options;
  const workerId = toolWorkerId();
  const infos = options.tools.map((t) => t.custom);
  await store.beat(workerId, options.queues, infos);
  const timer = setInterval(() => {
    store
      .beat(workerId, options.queues, infos)
      .catch((err: Error) => logger.warn({ err: err.message }, 'tool catalog heartbeat failed'));
  }, options.heartbeatMs);
  timer.unref();
  return {
    workerId,
    async close() {
      clearInterval(timer);
      await store.leave(workerId).catch(() => undefined);
    },
  };
}

/** A tool module that cannot be served: names the module and what is wrong. */
export class ToolModuleError extends Error {
  constructor(
    readonly module: string,
    reason: string,
  ) {
    super(`tool module ${module}: ${reason}`);
    this.name = 'ToolModuleError';
  }
}

/** The custom tools among a module's exports (`defineTool` values, directly or in an exported list). */
function toolsOf(exports: Record<string, unknown>): CustomTool[] {
  const found: CustomTool[] = [];
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) value.forEach(visit);
    else if (typeof value === 'object' && value !== null && isCustomTool(value as CustomTool)) {
      if (!found.includes(value as CustomTool)) found.push(value as CustomTool);
    }
  };
  for (const value of Object.values(exports)) visit(value);
  return found;
}

/**
 * Imports each module (a path, relative to `cwd`, or a package name) and collects the tools it
 * exports. A module that fails to load, exports no tool, or a name two tools share, throws a
 * ToolModuleError naming the module (and the field, for a definition `defineTool` refused).
 */
export async function loadToolModules(
  modules: readonly string[],
  cwd = process.cwd(),
): Promise<CustomTool[]> {
  const byName = new Map<string, { tool: CustomTool; module: string }>();
  for (const module of modules) {
    const specifier =
      module.startsWith('.') || isAbsolute(module) ? pathToFileURL(resolve(cwd, module)).href : module;
    let exports: Record<string, unknown>;
    try {
      exports = (await import(specifier)) as Record<string, unknown>;
    } catch (err) {
      const reason =
        err instanceof ToolDefinitionError
          ? err.message
          : `does not load (${(err as Error).message ?? String(err)})`;
      throw new ToolModuleError(module, reason);
    }
    const tools = toolsOf(exports);
    if (tools.length === 0)
      throw new ToolModuleError(module, 'exports no tool (define them with defineTool)');
    for (const tool of tools) {
      const other = byName.get(tool.name);
      if (other && other.tool !== tool)
        throw new ToolModuleError(module, `tool "${tool.name}" is also defined by ${other.module}`);
      byName.set(tool.name, { tool, module });
    }
  }
  return [...byName.values()].map((e) => e.tool);
}

/** The queues a worker's custom tools need served that it was not told to serve, by tool. */
export function unservedQueues(tools: readonly CustomTool[], queues: readonly string[]): string[] {
  return tools
    .filter((t) => !queues.includes(t.custom.queue))
    .map((t) => `${t.name} (queue ${t.custom.queue === DEFAULT_TOOL_QUEUE ? 'default' : t.custom.queue})`);
}
