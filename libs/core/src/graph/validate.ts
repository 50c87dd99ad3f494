/**
 * Static validation of a graph before anything runs. Reports every problem it can find, each
 * with a path into the graph (`nodes.2.args.url`), so a client fixes them all in one round.
 * Pure: no I/O.
 */
import { z } from 'zod';
import type { ToolRegistry } from '../tools/tool.js';
import { findReferences } from './references.js';
import { Edge, GraphNode, NodeId, type Graph } from './schema.js';
import { ancestorsOf, buildTopology, findCycle, type Topology } from './topology.js';

export interface ValidationIssue {
  /** Dot-separated path inside the graph, e.g. `nodes.1.id`; empty for the graph itself. */
  readonly path: string;
  readonly message: string;
}

/** @defaultValue `{ maxNodes: 500, maxEdges: 5000 }` */
export interface GraphLimits {
  readonly maxNodes: number;
  readonly maxEdges: number;
}
export const DEFAULT_GRAPH_LIMITS: GraphLimits = { maxNodes: 500, maxEdges: 5000 };

/** The fields of a node snapshot a reference may read. */
const SNAPSHOT_FIELDS = new Set(['output', 'error', 'status', 'attempts', 'durationMs']);

export type ValidationResult =
  | { readonly ok: true; readonly graph: Graph; readonly topology: Topology }
  | { readonly ok: false; readonly issues: readonly ValidationIssue[] };

const join = (...parts: readonly (string | number | symbol)[]): string => parts.map(String).join('.');

function zodIssues(error: z.ZodError, prefix: readonly (string | number)[]): ValidationIssue[] {
  return error.issues.map((i) => ({ path: join(...prefix, ...i.path), message: i.message }));
}

const GraphShape = z
  .object({ nodes: z.array(z.unknown()), edges: z.array(z.unknown()).default([]) })
  .strict();

export function validateGraph(
  raw: unknown,
  options: { readonly tools: ToolRegistry; readonly limits?: GraphLimits },
): ValidationResult {
  const limits = options.limits ?? DEFAULT_GRAPH_LIMITS;
  const shape = GraphShape.safeParse(raw);
  if (!shape.success) return { ok: false, issues: zodIssues(shape.error, []) };
  const { nodes: rawNodes, edges: rawEdges } = shape.data;

  const issues: ValidationIssue[] = [];
  if (rawNodes.length === 0) issues.push({ path: 'nodes', message: 'a graph needs at least one node' });
  if (rawNodes.length > limits.maxNodes) {
    issues.push({
      path: 'nodes',
      message: `${rawNodes.length} nodes exceed the limit of ${limits.maxNodes}`,
    });
  }
  if (rawEdges.length > limits.maxEdges) {
    issues.push({
      path: 'edges',
      message: `${rawEdges.length} edges exceed the limit of ${limits.maxEdges}`,
    });
  }
  // Past the limits the graph is not inspected further: its size alone rejects it.
  if (issues.length > 0) return { ok: false, issues };

  // Nodes one by one, so one bad node does not hide the others' problems.
  const nodes: (GraphNode | undefined)[] = rawNodes.map((n, i) => {
    const parsed = GraphNode.safeParse(n);
    if (parsed.success) return parsed.data;
    issues.push(...zodIssues(parsed.error, ['nodes', i]));
    return undefined;
  });

  // Ids, including those of nodes that failed elsewhere, so edges to them are not "unknown".
  const firstIndex = new Map<string, number>();
  rawNodes.forEach((n, i) => {
    const id = NodeId.safeParse((n as { id?: unknown } | null)?.id);
    if (!id.success) return;
    const first = firstIndex.get(id.data);
    if (first === undefined) firstIndex.set(id.data, i);
    else
      issues.push({
        path: join('nodes', i, 'id'),
        message: `duplicate id "${id.data}" (first at nodes.${first})`,
      });
  });

  const edges: Edge[] = [];
  rawEdges.forEach((e, i) => {
    const parsed = Edge.safeParse(e);
    if (!parsed.success) {
      issues.push(...zodIssues(parsed.error, ['edges', i]));
      return;
    }
    const [from, to] = parsed.data;
    let ok = true;
    for (const [side, id] of [
      [0, from],
      [1, to],
    ] as const) {
      if (!firstIndex.has(id)) {
        issues.push({ path: join('edges', i, side), message: `unknown node "${id}"` });
        ok = false;
      }
    }
    if (from === to) {
      issues.push({ path: join('edges', i), message: `self-edge on "${from}"` });
      ok = false;
    }
    if (ok) edges.push(parsed.data);
  });

  const topology = buildTopology([...firstIndex.keys()], edges);
  const cycle = findCycle(topology);
  if (cycle) issues.push({ path: 'edges', message: `cycle: ${cycle.join(' → ')}` });
  const ancestors = cycle ? undefined : ancestorsOf(topology);

  nodes.forEach((node, i) => {
    if (!node) return;
    const tool = options.tools.get(node.tool);
    if (!tool) {
      const known = [...options.tools.keys()].sort().join(', ');
      issues.push({
        path: join('nodes', i, 'tool'),
        message: `unknown tool "${node.tool}"; known tools: ${known}`,
      });
    }
    const refs = findReferences(node.args, ['args']);
    for (const ref of refs) {
      const path = join('nodes', i, ...ref.at);
      const field = ref.path[0];
      if (ref.root === 'input') continue;
      if (!firstIndex.has(ref.root)) {
        issues.push({ path, message: `reference to unknown node "${ref.root}"` });
      } else if (ref.root === node.id) {
        issues.push({ path, message: `node "${node.id}" references itself` });
      } else if (ancestors && !ancestors.get(node.id)?.has(ref.root)) {
        issues.push({
          path,
          message: `node "${node.id}" references "${ref.root}" but does not depend on it`,
        });
      } else if (field === undefined || !SNAPSHOT_FIELDS.has(field)) {
        issues.push({
          path,
          message: `reference "${[ref.root, ...ref.path].join('.')}" must read one of ${[...SNAPSHOT_FIELDS].join(', ')}`,
        });
      }
    }
    // Args with references are checked at run time, once the references are resolved.
    if (tool && refs.length === 0) {
      const parsed = tool.input.safeParse(node.args);
      if (!parsed.success) issues.push(...zodIssues(parsed.error, ['nodes', i, 'args']));
    }
  });

  if (issues.length > 0) return { ok: false, issues };
  return { ok: true, graph: { nodes: nodes as GraphNode[], edges }, topology };
}
