/**
 * A node's input as it ran: its definition from the plan with every reference filled in from the
 * run document — `{"$ref": "a.output.x"}` by the value, `"…{{a.output.x}}…"` inside a string,
 * `input.*` from the run's input. The run keeps no copy of a node's resolved input, and the
 * outputs it reads are all in the document, so the console resolves it the way the harness did.
 * A reference to a blob shows the stub (load it from there); one that does not resolve stays as
 * written.
 */
import type { RunDocument } from '@tetraloop/client';

type Json = unknown;
/** A value a reference resolved to; `undefined` when it did not resolve (a value may be `null`). */
type Found = { readonly value: Json } | undefined;

interface PlanGraph {
  readonly nodes: readonly { readonly id: string; readonly graph?: PlanGraph }[];
}

/** The plan's definition of a node, nested ones (`parent/child`) included. */
export function definitionOf(doc: RunDocument, nodeId: string): Record<string, Json> | undefined {
  let graph = doc.graph as PlanGraph | null;
  const parts = nodeId.split('/');
  for (const [i, part] of parts.entries()) {
    const node = graph?.nodes.find((n) => n.id === part);
    if (!node) return undefined;
    if (i === parts.length - 1) return node;
    graph = node.graph ?? null;
  }
  return undefined;
}

function walk(value: Json, path: readonly string[]): Found {
  let at = value;
  for (const key of path) {
    if (at === null || typeof at !== 'object' || !(key in at)) return undefined;
    at = (at as Record<string, Json>)[key];
  }
  return { value: at };
}

function lookup(doc: RunDocument, ref: string, prefix: string): Found {
  const [head, ...rest] = ref.split('.');
  if (head === undefined) return undefined;
  if (head === 'input') return walk(doc.input, rest);
  // A nested node reads its siblings by their own ids.
  const node = doc.nodes[`${prefix}${head}`] ?? doc.nodes[head];
  if (!node || rest[0] !== 'output' || !('output' in node)) return undefined;
  return walk(node.output, rest.slice(1));
}

function resolve(doc: RunDocument, value: Json, prefix: string): Json {
  if (typeof value === 'string') {
    return value.replace(/\{\{\s*([^}]+?)\s*\}\}/g, (whole, ref: string) => {
      const found = lookup(doc, ref, prefix);
      if (!found) return whole;
      return typeof found.value === 'string' ? found.value : JSON.stringify(found.value);
    });
  }
  if (Array.isArray(value)) return value.map((v) => resolve(doc, v, prefix));
  if (value !== null && typeof value === 'object') {
    const ref = (value as { $ref?: unknown }).$ref;
    if (typeof ref === 'string' && Object.keys(value).length === 1) {
      const found = lookup(doc, ref, prefix);
      return found ? found.value : value;
    }
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolve(doc, v, prefix)]));
  }
  return value;
}

/** The node's definition without its id, kind and nested graph, references filled in. */
export function resolvedInput(doc: RunDocument, nodeId: string): Json {
  const definition = definitionOf(doc, nodeId);
  if (!definition) return undefined;
  const { id: _id, kind: _kind, graph: _graph, ...rest } = definition;
  const prefix = nodeId.includes('/') ? nodeId.slice(0, nodeId.lastIndexOf('/') + 1) : '';
  return resolve(doc, rest, prefix);
}
