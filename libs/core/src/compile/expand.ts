/**
 * Expands nested graphs into one flat graph, deterministically: each node whose kind expands (a
 * `graph` node) is replaced by what its kind's entry says, recursively; the outer graph's edges
 * attach to the replacement's entry and exit. Pure: no I/O.
 */
import { findReferences } from '../graph/references.js';
import {
  expansionOf,
  mapReferenceFields,
  type ExecutableGraph,
  type ExecutableNode,
  type ExpandHelpers,
  type Graph,
  type GraphNode,
} from '../nodes/index.js';

/** Rewrites every reference in `value` by `rename(root, path)`. */
export function rewrite(value: unknown, rename: (root: string, path: readonly string[]) => string): unknown {
  if (typeof value === 'string') {
    return value.replace(/\{\{\s*([^{}\s]+)\s*\}\}/g, (_m, expr: string) => {
      const [root = '', ...path] = expr.split('.');
      return `{{${rename(root, path)}}}`;
    });
  }
  if (Array.isArray(value)) return value.map((v) => rewrite(v, rename));
  if (typeof value === 'object' && value !== null) {
    const refs = findReferences(value);
    const obj = value as Record<string, unknown>;
    if (refs.length === 1 && typeof obj.$ref === 'string' && Object.keys(obj).length === 1) {
      const ref = refs[0]!;
      return { $ref: rename(ref.root, ref.path) };
    }
    return Object.fromEntries(Object.entries(obj).map(([k, v]) => [k, rewrite(v, rename)]));
  }
  return value;
}

// Nested graphs were validated with their parent, so their nodes are nodes of known kinds.
const helpers: ExpandHelpers = {
  expand: (graph) => expandGraph(graph as Graph),
  renameReferences: (node, rename) =>
    mapReferenceFields(node as unknown as GraphNode, (v) => rewrite(v, rename)),
};

export function expandGraph(graph: Graph): ExecutableGraph {
  const nodes: ExecutableNode[] = [];
  const edges: [string, string][] = [];
  // Where edges into / out of each original node attach after expansion.
  const entry = new Map<string, string>();
  const exit = new Map<string, string>();
  for (const node of graph.nodes) {
    const expanding = expansionOf(node);
    if (!expanding) {
      nodes.push(node as ExecutableNode);
      continue;
    }
    const expansion = expanding.expand(node, helpers);
    nodes.push(...(expansion.nodes as unknown as ExecutableNode[]));
    edges.push(...expansion.edges);
    entry.set(node.id, expansion.entry);
    exit.set(node.id, expansion.exit);
  }
  for (const [from, to] of graph.edges) edges.push([exit.get(from) ?? from, entry.get(to) ?? to]);
  return { nodes, edges };
}
