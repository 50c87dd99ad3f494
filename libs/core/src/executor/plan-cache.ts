/**
 * Compiled run plans, cached per worker process. A run's executable graph never changes, so each
 * worker parses it and builds its topology once, not once per node.
 */
import { findReferences } from '../graph/references.js';
import { isAgentBody, isGraphBody, type ExecutableNode } from '../graph/schema.js';
import { buildTopology, type Topology } from '../graph/topology.js';
import type { RunStore } from '../state/run-store.js';

export interface CompiledPlan {
  readonly runId: string;
  readonly input: unknown;
  readonly timeoutSeconds: number;
  readonly nodes: ReadonlyMap<string, ExecutableNode>;
  readonly topology: Topology;
  /** Per node: the node ids its args reference (whose snapshots it must read). */
  readonly reads: ReadonlyMap<string, readonly string[]>;
}

/** The args of a node that may reference other nodes. */
export function argsOf(node: ExecutableNode): Record<string, unknown> {
  switch (node.kind) {
    case 'tool':
      return node.args;
    case 'llm':
      return { prompt: node.prompt, system: node.system };
    case 'loop':
      if (isGraphBody(node.body)) return { input: node.body.input };
      if (isAgentBody(node.body)) return { prompt: node.body.agent.prompt, system: node.body.agent.system };
      return node.body.args;
    case 'wait':
      return {};
  }
}

export class PlanCache {
  private readonly plans = new Map<string, Promise<CompiledPlan | null>>();

  constructor(
    private readonly store: RunStore,
    private readonly capacity = 1000,
  ) {}

  /** The plan of `runId` as of `generation` (a replan installs a new one under the next generation). */
  get(runId: string, generation = 0): Promise<CompiledPlan | null> {
    const key = `${runId}@${generation}`;
    const hit = this.plans.get(key);
    if (hit) {
      // Re-insert to keep recently used plans at the end (LRU order).
      this.plans.delete(key);
      this.plans.set(key, hit);
      return hit;
    }
    const loading = this.load(runId);
    this.plans.set(key, loading);
    void loading.then(
      (plan) => plan ?? this.plans.delete(key),
      () => this.plans.delete(key),
    );
    if (this.plans.size > this.capacity) {
      const oldest = this.plans.keys().next().value;
      if (oldest !== undefined) this.plans.delete(oldest);
    }
    return loading;
  }

  private async load(runId: string): Promise<CompiledPlan | null> {
    const stored = await this.store.plan(runId);
    if (!stored) return null;
    const nodes = new Map(stored.plan.nodes.map((n) => [n.id, n]));
    const reads = new Map(
      stored.plan.nodes.map((n) => [
        n.id,
        [...new Set(findReferences(argsOf(n)).map((r) => r.root))].filter((root) => root !== 'input'),
      ]),
    );
    return {
      runId,
      input: stored.input,
      timeoutSeconds: stored.timeoutSeconds,
      nodes,
      topology: buildTopology([...nodes.keys()], stored.plan.edges),
      reads,
    };
  }
}
