/**
 * Compiled run plans, cached per worker process. A run's graph never changes, so each worker
 * parses it and builds its topology once, not once per node.
 */
import { findReferences } from '../graph/references.js';
import type { GraphNode } from '../graph/schema.js';
import { buildTopology, type Topology } from '../graph/topology.js';
import type { RunStore } from '../state/run-store.js';

export interface CompiledPlan {
  readonly runId: string;
  readonly input: unknown;
  readonly timeoutSeconds: number;
  readonly nodes: ReadonlyMap<string, GraphNode>;
  readonly topology: Topology;
  /** Per node: the node ids its args reference (whose snapshots it must read). */
  readonly reads: ReadonlyMap<string, readonly string[]>;
}

export class PlanCache {
  private readonly plans = new Map<string, Promise<CompiledPlan | null>>();

  constructor(
    private readonly store: RunStore,
    private readonly capacity = 1000,
  ) {}

  get(runId: string): Promise<CompiledPlan | null> {
    const hit = this.plans.get(runId);
    if (hit) {
      // Re-insert to keep recently used plans at the end (LRU order).
      this.plans.delete(runId);
      this.plans.set(runId, hit);
      return hit;
    }
    const loading = this.load(runId);
    this.plans.set(runId, loading);
    void loading.then(
      (plan) => plan ?? this.plans.delete(runId),
      () => this.plans.delete(runId),
    );
    if (this.plans.size > this.capacity) {
      const oldest = this.plans.keys().next().value;
      if (oldest !== undefined) this.plans.delete(oldest);
    }
    return loading;
  }

  private async load(runId: string): Promise<CompiledPlan | null> {
    const plan = await this.store.plan(runId);
    if (!plan) return null;
    const nodes = new Map(plan.graph.nodes.map((n) => [n.id, n]));
    const reads = new Map(
      plan.graph.nodes.map((n) => [
        n.id,
        [...new Set(findReferences(n.args).map((r) => r.root))].filter((root) => root !== 'input'),
      ]),
    );
    return {
      runId,
      input: plan.input,
      timeoutSeconds: plan.timeoutSeconds,
      nodes,
      topology: buildTopology([...nodes.keys()], plan.graph.edges),
      reads,
    };
  }
}
