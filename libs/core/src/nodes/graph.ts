/**
 * A `graph` node: a nested graph, expanded into namespaced nodes (`parent/child`) before the run
 * starts; its output is its sinks' outputs. The nested graph is checked like any graph, recursively.
 */
import { z } from 'zod';
import { NodeId, type GraphOf } from '../graph/schema.js';
import type { ExpandingKindSpec } from './kind.js';

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
  expansion: (node) => ({ graph: node.graph, input: node.input ?? null }),
};
