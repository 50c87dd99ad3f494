/**
 * Which nodes of a run run again, pure: the nodes whose snapshot is not kept, and everything
 * downstream of them, with their new readiness counters. A resume keeps what succeeded; a rerun
 * from a node keeps what succeeded upstream of it and beside it, and runs the node and everything
 * downstream again.
 */
import { buildTopology } from '../graph/topology.js';
import type { ExecutableGraph } from '../nodes/index.js';

export interface RerunSet {
  /** The nodes to run (again), in plan order. */
  readonly rerun: string[];
  /** Per node to run: its dependencies that run too (the others' snapshots are kept). */
  readonly pending: Map<string, number>;
}

/**
 * Nodes to run again — those `keep` refuses, plus everything downstream of one — and their new
 * readiness counters. A kept node is never downstream of a node that runs again.
 */
export function rerunSet(plan: ExecutableGraph, keep: (id: string) => boolean): RerunSet {
  const topology = buildTopology(
    plan.nodes.map((n) => n.id),
    plan.edges,
  );
  const again = new Set(topology.ids.filter((id) => !keep(id)));
  // Topological closure: a node downstream of a rerun node reruns too.
  const stack = [...again];
  while (stack.length > 0) {
    for (const child of topology.children.get(stack.pop()!) ?? []) {
      if (!again.has(child)) {
        again.add(child);
        stack.push(child);
      }
    }
  }
  const rerun = topology.ids.filter((id) => again.has(id));
  const pending = new Map(
    rerun.map((id) => [id, (topology.parents.get(id) ?? []).filter((p) => again.has(p)).length]),
  );
  return { rerun, pending };
}

/**
 * The node a rerun from `from` starts at: `from` itself, or for a graph node (expanded into
 * `<from>/input`, its nested nodes and `<from>`) its input node, so its nested graph runs again too.
 * Undefined when the plan has no such node.
 */
export function rerunStart(plan: ExecutableGraph, from: string): string | undefined {
  const ids = new Set(plan.nodes.map((n) => n.id));
  if (ids.has(`${from}/input`)) return `${from}/input`;
  return ids.has(from) ? from : undefined;
}
