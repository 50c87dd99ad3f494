/**
 * The node-kind table: one entry per kind, each declared whole in its own module. Adding a kind
 * is one module, plus here its import, its node type in the unions and its entry in the table
 * (the compiler points at each), and a sample in `test/node-kinds.test.ts`. Everything that
 * depends on a node's kind reads it from here: no file outside `nodes/` branches on a kind.
 */
import { z } from 'zod';
import { getPath } from '../graph/references.js';
import { Edge, type GraphOf } from '../graph/schema.js';
import { graphKind, type SubgraphNode } from './graph.js';
import type { ExecutableKindSpec, ExpandingKindSpec } from './kind.js';
import { llmKind, type LlmNode } from './llm.js';
import { loopKind, type LoopNode } from './loop.js';
import { mapKind, type MapNode } from './map.js';
import { toolKind, type ToolNode } from './tool.js';
import { waitKind, type WaitNode } from './wait.js';

export type GraphNode = ToolNode | LlmNode | WaitNode | LoopNode | MapNode | SubgraphNode;
export type NodeKind = GraphNode['kind'];
/** What remains after nested graphs are expanded: the nodes a worker executes. */
export type ExecutableNode = ToolNode | LlmNode | WaitNode | LoopNode | MapNode;
export type ExecutableKind = ExecutableNode['kind'];

/** A graph of nodes of every kind: what a client submits and the planner writes. */
export type Graph = GraphOf<GraphNode>;

/** A graph whose nested graphs are expanded: what a run executes. */
export interface ExecutableGraph {
  nodes: ExecutableNode[];
  edges: [string, string][];
  /**
   * The schema hash of each custom tool the graph calls, as it was checked against: a worker
   * serving another version checks its output against this one (a rolling deploy fails loudly).
   */
  toolSchemas?: Record<string, string>;
}

type NodeOf<K extends NodeKind> = Extract<GraphNode, { kind: K }>;
type SpecOf<K extends NodeKind> =
  NodeOf<K> extends ExecutableNode ? ExecutableKindSpec<NodeOf<K>> : ExpandingKindSpec<NodeOf<K>>;

export const NODE_KINDS: { readonly [K in NodeKind]: SpecOf<K> } = {
  tool: toolKind,
  llm: llmKind,
  wait: waitKind,
  loop: loopKind,
  map: mapKind,
  graph: graphKind,
};

/**
 * A graph as a client submits it, as one schema: nodes of the table's kinds (each kind's own
 * `schema`) and `[from, to]` edges. It describes the graph in the API's OpenAPI document;
 * validation (`compile/validate.ts`) checks with the same kind schemas one node at a time, so each
 * problem gets its path, and checks nested graphs (`{}` here) by the same rules.
 */
export const SubmittedGraph = z.strictObject({
  nodes: z
    .array(z.union(Object.values(NODE_KINDS).map((kind) => kind.schema) as [z.ZodType, ...z.ZodType[]]))
    .min(1),
  edges: z.array(Edge).default([]),
});

export const isNodeKind = (kind: unknown): kind is NodeKind =>
  typeof kind === 'string' && Object.hasOwn(NODE_KINDS, kind);

export const isExecutable = (node: GraphNode): node is ExecutableNode => 'run' in NODE_KINDS[node.kind];

/** The table entry of an executable node, typed for that node. */
export const executionOf = <N extends ExecutableNode>(node: N): ExecutableKindSpec<N> =>
  NODE_KINDS[node.kind] as unknown as ExecutableKindSpec<N>;

/** The tool a node calls once per execution (a `tool` node), or undefined for other kinds. */
export function toolOf(node: GraphNode): string | undefined {
  if (!isExecutable(node)) return undefined;
  const kind = executionOf(node);
  return kind.chargesToolCall ? kind.label(node) : undefined;
}

/** The yes-or-no traits every kind declares, read of a node's kind by validation and window planning. */
export type KindTrait = 'variesOnRetry' | 'mayBeFallback' | 'replansInWindow';

/** Whether `kind` (a node's `kind`, perhaps not validated yet) names a kind with `trait`. */
export const kindHas = (kind: unknown, trait: KindTrait): boolean =>
  isNodeKind(kind) && NODE_KINDS[kind][trait];

/** The kinds with `trait`, in the table's order: what a message names. */
export const kindsWith = (trait: KindTrait): NodeKind[] =>
  Object.values(NODE_KINDS)
    .filter((spec) => spec[trait])
    .map((spec) => spec.kind);

/** The table entry of an expanding node (a nested graph), or undefined for nodes that execute. */
export const expansionOf = (node: GraphNode): ExpandingKindSpec<GraphNode> | undefined => {
  const spec: object = NODE_KINDS[node.kind];
  return 'expand' in spec ? (spec as ExpandingKindSpec<GraphNode>) : undefined;
};

/** The fields of a node that may hold references, with their path inside the node; absent ones skipped. */
export function referenceFields(node: GraphNode): { value: unknown; path: readonly string[] }[] {
  return NODE_KINDS[node.kind].referenceFields
    .map((path) => ({ value: getPath(node, path), path }))
    .filter((f) => f.value !== undefined);
}

/** The node with `map` applied to each field that may hold references. */
export function mapReferenceFields<N extends GraphNode>(node: N, map: (value: unknown) => unknown): N {
  let out: Record<string, unknown> = node;
  for (const { value, path } of referenceFields(node)) out = setPath(out, path, map(value));
  return out as unknown as N;
}

/** A copy of `obj` with `value` at `path`; the objects along the path are copied, never mutated. */
function setPath(
  obj: Record<string, unknown>,
  path: readonly string[],
  value: unknown,
): Record<string, unknown> {
  const [head, ...rest] = path;
  if (head === undefined) return obj;
  const child = obj[head];
  return {
    ...obj,
    [head]: rest.length === 0 ? value : setPath((child ?? {}) as Record<string, unknown>, rest, value),
  };
}

export * from './kind.js';
export { ToolNode } from './tool.js';
export { LlmNode } from './llm.js';
export { WaitNode } from './wait.js';
export {
  LoopNode,
  ToolBody,
  GraphBody,
  isAgentBody,
  isGraphBody,
  loopModeGraph,
  type LoopBody,
} from './loop.js';
export { AgentBody } from './loop-agent.js';
export { SubgraphNode } from './graph.js';
export { MapNode, itemNodeOf, itemSnapshotOf, MAP_CONCURRENCY, MAP_MAX_ITEMS } from './map.js';
export type { AgentTurn, Iteration } from './loop-iteration.js';
