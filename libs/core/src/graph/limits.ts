/** How large and how deep a graph may be: the one place for graph size limits. */

/** @defaultValue `{ maxNodes: 500, maxEdges: 5000 }` */
export interface GraphLimits {
  /** Nodes after nested graphs are expanded. */
  readonly maxNodes: number;
  readonly maxEdges: number;
}
export const DEFAULT_GRAPH_LIMITS: GraphLimits = { maxNodes: 500, maxEdges: 5000 };

/** How deep graphs may nest. */
export const MAX_NESTING = 4;
