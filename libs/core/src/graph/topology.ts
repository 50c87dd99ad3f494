/**
 * The shape of a graph: who feeds whom. Built once per run and reused by the validator,
 * the run starter and every node execution. Pure: no I/O.
 */
import type { Edge } from './schema.js';

export interface Topology {
  readonly ids: readonly string[];
  /** Direct successors, without duplicates. */
  readonly children: ReadonlyMap<string, readonly string[]>;
  /** Direct predecessors, without duplicates. */
  readonly parents: ReadonlyMap<string, readonly string[]>;
  /** Nodes with no predecessor: the run starts here. */
  readonly sources: readonly string[];
  /** Nodes with no successor: their outputs are the run's output. */
  readonly sinks: readonly string[];
}

/** Assumes ids are unique and every edge names known ids (the validator checks both first). */
export function buildTopology(ids: readonly string[], edges: readonly Edge[]): Topology {
  const children = new Map<string, string[]>(ids.map((id) => [id, []]));
  const parents = new Map<string, string[]>(ids.map((id) => [id, []]));
  const seen = new Set<string>();
  for (const [from, to] of edges) {
    const key = `${from}\u0000${to}`;
    if (seen.has(key)) continue;
    seen.add(key);
    children.get(from)?.push(to);
    parents.get(to)?.push(from);
  }
  return {
    ids,
    children,
    parents,
    sources: ids.filter((id) => parents.get(id)?.length === 0),
    sinks: ids.filter((id) => children.get(id)?.length === 0),
  };
}

/** One cycle as a closed walk (`[a, b, c, a]`), or `undefined` when the graph is acyclic. */
export function findCycle(topology: Topology): string[] | undefined {
  const WHITE = 0;
  const GREY = 1;
  const BLACK = 2;
  const color = new Map<string, number>(topology.ids.map((id) => [id, WHITE]));
  // Iterative DFS so a 5,000-edge chain cannot overflow the stack.
  for (const start of topology.ids) {
    if (color.get(start) !== WHITE) continue;
    const stack: { id: string; next: number }[] = [{ id: start, next: 0 }];
    color.set(start, GREY);
    while (stack.length > 0) {
      const frame = stack[stack.length - 1]!;
      const succ = topology.children.get(frame.id) ?? [];
      if (frame.next >= succ.length) {
        color.set(frame.id, BLACK);
        stack.pop();
        continue;
      }
      const child = succ[frame.next++]!;
      const c = color.get(child);
      if (c === GREY) {
        const from = stack.findIndex((f) => f.id === child);
        return [...stack.slice(from).map((f) => f.id), child];
      }
      if (c === WHITE) {
        color.set(child, GREY);
        stack.push({ id: child, next: 0 });
      }
    }
  }
  return undefined;
}

/** Every transitive predecessor of each node. Only meaningful on an acyclic graph. */
export function ancestorsOf(topology: Topology): Map<string, Set<string>> {
  const result = new Map<string, Set<string>>();
  const visit = (id: string): Set<string> => {
    const known = result.get(id);
    if (known) return known;
    const set = new Set<string>();
    result.set(id, set);
    for (const p of topology.parents.get(id) ?? []) {
      set.add(p);
      for (const a of visit(p)) set.add(a);
    }
    return set;
  };
  // Visit in topological order so recursion depth stays at one level per call.
  for (const id of topologicalOrder(topology)) visit(id);
  return result;
}

/** Kahn's algorithm; nodes in a cycle are left out. */
export function topologicalOrder(topology: Topology): string[] {
  const indegree = new Map(topology.ids.map((id) => [id, topology.parents.get(id)?.length ?? 0]));
  const queue = topology.ids.filter((id) => indegree.get(id) === 0);
  const order: string[] = [];
  for (let i = 0; i < queue.length; i++) {
    const id = queue[i]!;
    order.push(id);
    for (const c of topology.children.get(id) ?? []) {
      const d = (indegree.get(c) ?? 0) - 1;
      indegree.set(c, d);
      if (d === 0) queue.push(c);
    }
  }
  return order;
}
