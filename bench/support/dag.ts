/**
 * Delay-weighted DAGs for the execution benchmarks, and three ways to execute one: as a
 * Tetraloop graph of `http` nodes, sequentially in-process with fetch, and as a LangGraph.js
 * StateGraph in-process. Every node calls the loopback tool server's `/work?node=x&ms=D`.
 */
import { Annotation, END, START, StateGraph } from '@langchain/langgraph';

export interface DagNode {
  readonly id: string;
  /** Delay the tool server waits before answering, in ms. */
  readonly ms: number;
}

export interface Dag {
  readonly name: string;
  readonly nodes: readonly DagNode[];
  readonly edges: readonly (readonly [string, string])[];
}

/** Small seeded PRNG (mulberry32): the same seed gives the same graphs on every machine. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function fanOut(width: number, ms: number): Dag {
  const leaves = Array.from({ length: width }, (_, i) => ({ id: `f${i}`, ms }));
  return {
    name: `fan-out ${width}×${ms} ms → join`,
    nodes: [...leaves, { id: 'join', ms }],
    edges: leaves.map((l) => [l.id, 'join'] as const),
  };
}

export function unevenBranches(slowMs: number, chainLength: number, chainMs: number): Dag {
  const chain = Array.from({ length: chainLength }, (_, i) => ({ id: `c${i}`, ms: chainMs }));
  return {
    name: `uneven: ${slowMs} ms ∥ ${chainLength}×${chainMs} ms → join`,
    nodes: [{ id: 'slow', ms: slowMs }, ...chain, { id: 'join', ms: chainMs }],
    edges: [
      ...chain.slice(1).map((c, i) => [chain[i]!.id, c.id] as const),
      ['slow', 'join'],
      [chain[chain.length - 1]!.id, 'join'],
    ],
  };
}

export function chain(length: number, ms: number, prefix = 'n'): Dag {
  const nodes = Array.from({ length }, (_, i) => ({ id: `${prefix}${i}`, ms }));
  return {
    name: `chain ${length}×${ms} ms`,
    nodes,
    edges: nodes.slice(1).map((n, i) => [nodes[i]!.id, n.id] as const),
  };
}

/**
 * A random DAG: nodes in index order, each node gets an edge from each earlier node with
 * probability `edgeProbability` (at least one for non-first nodes with probability 0.8, so the
 * graph is mostly connected), delays uniform in [minMs, maxMs].
 */
export function randomDag(
  seed: number,
  size: number,
  minMs: number,
  maxMs: number,
  edgeProbability = 0.08,
): Dag {
  const rand = mulberry32(seed);
  const nodes = Array.from({ length: size }, (_, i) => ({
    id: `r${i}`,
    ms: Math.round(minMs + rand() * (maxMs - minMs)),
  }));
  const edges: [string, string][] = [];
  for (let j = 1; j < size; j++) {
    const parents = new Set<number>();
    for (let i = 0; i < j; i++) if (rand() < edgeProbability) parents.add(i);
    if (parents.size === 0 && rand() < 0.8) parents.add(Math.floor(rand() * j));
    for (const i of parents) edges.push([nodes[i]!.id, nodes[j]!.id]);
  }
  return { name: `random DAG seed ${seed} (${size} nodes)`, nodes, edges };
}

/** Nodes in an order where every edge points forward (Kahn). */
export function topologicalOrder(dag: Dag): DagNode[] {
  const indegree = new Map(dag.nodes.map((n) => [n.id, 0]));
  for (const [, to] of dag.edges) indegree.set(to, indegree.get(to)! + 1);
  const byId = new Map(dag.nodes.map((n) => [n.id, n]));
  const queue = dag.nodes.filter((n) => indegree.get(n.id) === 0).map((n) => n.id);
  const order: DagNode[] = [];
  while (queue.length > 0) {
    const id = queue.shift()!;
    order.push(byId.get(id)!);
    for (const [from, to] of dag.edges) {
      if (from !== id) continue;
      indegree.set(to, indegree.get(to)! - 1);
      if (indegree.get(to) === 0) queue.push(to);
    }
  }
  if (order.length !== dag.nodes.length) throw new Error(`${dag.name} has a cycle`);
  return order;
}

/** The longest delay-weighted path: no executor can finish sooner. */
export function criticalPathMs(dag: Dag): number {
  const finish = new Map<string, number>();
  for (const node of topologicalOrder(dag)) {
    const parents = dag.edges.filter(([, to]) => to === node.id).map(([from]) => finish.get(from)!);
    finish.set(node.id, node.ms + Math.max(0, ...parents));
  }
  return Math.max(...finish.values());
}

/** Sum of all delays: what a sequential executor needs at least. */
export const totalDelayMs = (dag: Dag): number => dag.nodes.reduce((sum, n) => sum + n.ms, 0);

export const workUrl = (tools: string, node: DagNode): string =>
  `${tools}/work?node=${node.id}&ms=${node.ms}`;

/** The DAG as a Tetraloop graph of `http` tool nodes. */
export function tetraloopGraph(
  dag: Dag,
  tools: string,
): { nodes: Record<string, unknown>[]; edges: [string, string][] } {
  return {
    nodes: dag.nodes.map((n) => ({ id: n.id, kind: 'tool', tool: 'http', args: { url: workUrl(tools, n) } })),
    edges: dag.edges.map(([a, b]) => [a, b]),
  };
}

async function callWork(url: string): Promise<unknown> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  return res.json();
}

/** Every node's call, one after another, in topological order. */
export async function runSequential(dag: Dag, tools: string): Promise<number> {
  const started = performance.now();
  for (const node of topologicalOrder(dag)) await callWork(workUrl(tools, node));
  return performance.now() - started;
}

/** The loose surface of StateGraph used here: node names are only known at run time. */
interface LooseGraph {
  addNode(id: string, fn: () => Promise<{ done: string[] }>): LooseGraph;
  addEdge(from: string | string[], to: string): LooseGraph;
  compile(): { invoke(input: unknown, config: { recursionLimit: number }): Promise<{ done: string[] }> };
}

const State = Annotation.Root({
  done: Annotation<string[]>({ reducer: (a, b) => a.concat(b), default: () => [] }),
});

/**
 * The DAG as a LangGraph.js StateGraph: one node per DAG node, making the same HTTP call (or
 * calling `body` instead); a node with several parents waits for all of them (a multi-source
 * edge). Returns the compiled graph's invoke.
 */
export function langGraphOf(
  dag: Dag,
  body: (node: DagNode) => Promise<unknown>,
): () => Promise<{ done: string[] }> {
  const graph = new StateGraph(State) as unknown as LooseGraph;
  for (const node of dag.nodes) {
    graph.addNode(node.id, async () => {
      await body(node);
      return { done: [node.id] };
    });
  }
  for (const node of dag.nodes) {
    const parents = dag.edges.filter(([, to]) => to === node.id).map(([from]) => from);
    if (parents.length === 0) graph.addEdge(START, node.id);
    else if (parents.length === 1) graph.addEdge(parents[0]!, node.id);
    else graph.addEdge(parents, node.id);
    if (!dag.edges.some(([from]) => from === node.id)) graph.addEdge(node.id, END);
  }
  const compiled = graph.compile();
  return async () => {
    const out = await compiled.invoke({}, { recursionLimit: dag.nodes.length + 10 });
    if (out.done.length !== dag.nodes.length)
      throw new Error(`LangGraph ran ${out.done.length} of ${dag.nodes.length} nodes of ${dag.name}`);
    return out;
  };
}

export const langGraphHttp = (dag: Dag, tools: string): (() => Promise<{ done: string[] }>) =>
  langGraphOf(dag, (node) => callWork(workUrl(tools, node)));
