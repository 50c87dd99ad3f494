/**
 * The tool catalog a model sees: each allowed tool's name, description and input as JSON schema
 * (generated from its zod schema, or the one it was given: an MCP tool's). Its version is a hash of
 * its content, recorded with every plan: it changes when an MCP server's tool list does.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { FunctionTool } from '../model/model-client.js';
import type { ToolRegistry } from '../tools/tool.js';

export interface ToolCatalog {
  readonly tools: readonly FunctionTool[];
  readonly version: string;
}

export function toolCatalog(registry: ToolRegistry, allowed?: ReadonlySet<string>): ToolCatalog {
  const tools = [...registry.values()]
    .filter((t) => !allowed || allowed.has(t.name))
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((t) => ({
      name: t.name,
      description: t.description,
      parameters: t.inputJsonSchema
        ? { ...t.inputJsonSchema }
        : z.toJSONSchema(t.input, { io: 'input', unrepresentable: 'any' }),
    }));
  const version = createHash('sha256').update(JSON.stringify(tools)).digest('hex').slice(0, 12);
  return { tools, version };
}
