/**
 * A `graph` node: a nested graph, expanded into namespaced nodes (`parent/child`) before the run
 * starts; its output is its sinks' outputs. The nested graph is checked like any graph, recursively.
 */
import { z } from 'zod';
import { NodeId, type GraphOf } from '../graph/schema.js';
import type { ExpandingKindSpec, Expansion, ExpandHelpers } from './kind.js';
import type { ToolNode } from './tool.js';

export const SubgraphNode = z.strictObject({
  id: NodeId,
  kind: z.literal('graph'),
  graph: z.unknown(),
  /** What the nested graph reads as `input.*`; may reference the parent graph's nodes. */
  input: z.unknown().optional(),
});
export type SubgraphNode = {
  id: string;
  kind: 'graph';
  /** Checked by validation like any graph; `Graph` once validated. */
  graph: GraphOf;
  input?: unknown;
};

export const graphKind: ExpandingKindSpec<SubgraphNode> = {
  kind: 'graph',
  schema: SubgraphNode,
  referenceFields: [['input']],
  check: (node, check) => {
    const inner = check.nested(node.graph, ['graph']);
    return inner ? { ...node, graph: inner } : undefined;
  },
  // It never runs itself: its nested nodes do, each by its own kind.
  variesOnRetry: false,
  mayBeFallback: false,
  replansInWindow: false,
  expand: expandSubgraph,
};

/** A `json` tool node holding `value`: what carries a nested graph's input in, and its output out. */
const valueNode = (id: string, value: unknown): ToolNode => ({
  id,
  kind: 'tool',
  tool: 'json',
  args: { value },
});

/**
 * A graph node `p` becomes
 *   p/input   a value node holding the nested graph's input (its `input.*`), after p's dependencies;
 *   p/<id>    each nested node, references rewritten to the namespaced ids;
 *   p         a value node collecting the nested sinks' outputs, before p's dependents.
 * So the outer graph keeps referring to `p.output.<sinkId>`. Deterministic: the same graph always
 * gives the same node ids.
 */
function expandSubgraph(node: SubgraphNode, helpers: ExpandHelpers): Expansion {
  const inner = helpers.expand(node.graph);
  const ns = (id: string): string => `${node.id}/${id}`;
  const inputId = ns('input');
  const innerIds = new Set(inner.nodes.map((n) => n.id));
  const rename = (root: string, path: readonly string[]): string =>
    root === 'input'
      ? [inputId, 'output', ...path].join('.')
      : innerIds.has(root)
        ? [ns(root), ...path].join('.')
        : [root, ...path].join('.');
  const hasParent = new Set(inner.edges.map(([, to]) => to));
  const hasChild = new Set(inner.edges.map(([from]) => from));
  const sinks = inner.nodes.filter((n) => !hasChild.has(n.id)).map((n) => n.id);
  return {
    nodes: [
      valueNode(inputId, node.input ?? null),
      ...inner.nodes.map((n) => ({ ...helpers.renameReferences(n, rename), id: ns(n.id) })),
      valueNode(node.id, Object.fromEntries(sinks.map((s) => [s, { $ref: `${ns(s)}.output` }]))),
    ],
    edges: [
      ...inner.edges.map(([from, to]): [string, string] => [ns(from), ns(to)]),
      ...inner.nodes.filter((n) => !hasParent.has(n.id)).map((n): [string, string] => [inputId, ns(n.id)]),
      ...sinks.map((s): [string, string] => [ns(s), node.id]),
    ],
    entry: inputId,
    exit: node.id,
  };
}
