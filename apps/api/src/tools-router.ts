/**
 * `GET /v1/tools`: every tool a graph may name — the built-in ones, each MCP server's and the
 * team's own (custom tools, from the catalog workers publish) — with its kind, description and
 * input schema; a custom tool also with its queue, the versions served or recently seen, and how
 * many live worker processes serve each.
 */
import type { RequestHandler } from 'express';
import { z } from 'zod';
import type { ToolCatalogSnapshot } from '@tetraloop/core/state';
import { isCustomTool, type ToolRegistry } from '@tetraloop/core/tools';
import type { ToolList } from './answers.js';
import type { RouteName } from './route-table.js';

export interface ToolsRouterDeps {
  readonly tools: ToolRegistry;
  /** The custom tool catalog as last read. */
  readonly toolCatalog: () => ToolCatalogSnapshot;
}

const BUILTIN = new Set(['http', 'json', 'wait']);

export function toolHandlers(deps: ToolsRouterDeps): Partial<Record<RouteName, RequestHandler>> {
  const list: RequestHandler = (_req, res) => {
    const catalog = deps.toolCatalog();
    const tools = [...deps.tools.values()]
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((tool): z.input<typeof ToolList>['tools'][number] => {
        const inputSchema =
          tool.inputJsonSchema ?? z.toJSONSchema(tool.input, { io: 'input', unrepresentable: 'any' });
        if (!isCustomTool(tool))
          return {
            name: tool.name,
            kind: BUILTIN.has(tool.name) ? 'builtin' : 'mcp',
            description: tool.description,
            inputSchema: { ...inputSchema },
          };
        const entry = catalog.tools.get(tool.name);
        const serving = (version: string, hash: string): number =>
          catalog.workers.filter((w) =>
            w.tools.some((t) => t.name === tool.name && t.version === version && t.schemaHash === hash),
          ).length;
        const versions = (entry?.versions ?? [tool.custom]).map((v) => ({
          version: v.version,
          schemaHash: v.schemaHash,
          workers: serving(v.version, v.schemaHash),
          ...('seenAt' in v ? { seenAt: new Date(v.seenAt).toISOString() } : {}),
        }));
        return {
          name: tool.name,
          kind: 'custom',
          description: tool.description,
          inputSchema: { ...tool.custom.inputSchema },
          outputSchema: tool.custom.outputSchema,
          queue: tool.custom.queue,
          versions,
          workers: catalog.workers.filter((w) => w.tools.some((t) => t.name === tool.name)).length,
        };
      });
    res.json({ tools } satisfies z.input<typeof ToolList>);
  };
  return { 'tools.list': list };
}
