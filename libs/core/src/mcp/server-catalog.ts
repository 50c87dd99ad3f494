/**
 * What a server's tool list is to Tetraloop: each tool's name, description and JSON Schemas, and a
 * version (a hash of them) that changes whenever the list does. Workers publish it to Redis, where
 * the API (and a worker that cannot reach the server) reads it. Pure.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';

const JsonSchemaObject = z.record(z.string(), z.unknown());

/** One tool as its server lists it (the fields Tetraloop uses). */
export const McpToolDef = z.object({
  name: z.string().min(1).max(128),
  description: z.string().max(10_000).optional(),
  inputSchema: JsonSchemaObject,
  outputSchema: JsonSchemaObject.optional(),
});
export type McpToolDef = z.infer<typeof McpToolDef>;

export const ServerCatalog = z.object({
  version: z.string(),
  tools: z.array(McpToolDef),
  /** When a worker last listed them (ISO). */
  listedAt: z.string(),
});
export type ServerCatalog = z.infer<typeof ServerCatalog>;

/** Tools listed by a server, as Tetraloop keeps them: sorted by name, unknown fields dropped. */
export function serverCatalog(listed: readonly unknown[], listedAt: Date = new Date()): ServerCatalog {
  const tools = listed
    .map((t) => McpToolDef.safeParse(t))
    .filter((r) => r.success)
    .map((r) => {
      const { name, description, inputSchema, outputSchema } = r.data;
      return {
        name,
        ...(description !== undefined ? { description } : {}),
        inputSchema,
        ...(outputSchema !== undefined ? { outputSchema } : {}),
      };
    })
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const version = createHash('sha256').update(JSON.stringify(tools)).digest('hex').slice(0, 12);
  return { version, tools, listedAt: listedAt.toISOString() };
}
