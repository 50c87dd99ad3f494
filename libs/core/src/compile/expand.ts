/**
 * Expands nested graphs into one flat graph, deterministically: the same graph always gives the
 * same node ids. A graph node `p` becomes
 *   p/input   a `json` node holding the nested graph's input (its `input.*`), after p's dependencies;
 *   p/<id>    each nested node, references rewritten to the namespaced ids;
 *   p         a `json` node collecting the nested sinks' outputs, before p's dependents.
 * So the outer graph keeps referring to `p.output.<sinkId>`. Pure: no I/O.
 */
import { findReferences } from '../graph/references.js';
import {
  expansionOf,
  mapReferenceFields,
  type ExecutableGraph,
  type ExecutableNode,
  type Graph,
} from '../nodes/index.js';

/** Rewrites every reference in `value` by `rename(root, path)`. */
function rewrite(value: unknown, rename: (root: string, path: readonly string[]) => string): unknown {
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
      entry.set(node.id, node.id);
      exit.set(node.id, node.id);
      continue;
    }
    const nested = expanding.expansion(node);
    // Validation checked the nested graph like any graph before it is expanded.
    const inner = expandGraph(nested.graph as Graph);
    const ns = (id: string): string => `${node.id}/${id}`;
    const inputId = ns('input');
    nodes.push({ id: inputId, kind: 'tool', tool: 'json', args: { value: nested.input } });
    const innerIds = new Set(inner.nodes.map((n) => n.id));
    const rename = (root: string, path: readonly string[]): string =>
      root === 'input'
        ? [inputId, 'output', ...path].join('.')
        : innerIds.has(root)
          ? [ns(root), ...path].join('.')
          : [root, ...path].join('.');
    for (const n of inner.nodes)
      nodes.push({ ...mapReferenceFields(n, (a) => rewrite(a, rename)), id: ns(n.id) });
    const hasParent = new Set(inner.edges.map(([, to]) => to));
    const hasChild = new Set(inner.edges.map(([from]) => from));
    for (const [from, to] of inner.edges) edges.push([ns(from), ns(to)]);
    for (const n of inner.nodes) if (!hasParent.has(n.id)) edges.push([inputId, ns(n.id)]);
    const sinks = inner.nodes.filter((n) => !hasChild.has(n.id)).map((n) => n.id);
    nodes.push({
      id: node.id,
      kind: 'tool',
      tool: 'json',
      args: { value: Object.fromEntries(sinks.map((s) => [s, { $ref: `${ns(s)}.output` }])) },
    });
    for (const s of sinks) edges.push([ns(s), node.id]);
    entry.set(node.id, inputId);
    exit.set(node.id, node.id);
  }
  for (const [from, to] of graph.edges) edges.push([exit.get(from) ?? from, entry.get(to) ?? to]);
  return { nodes, edges };
}
