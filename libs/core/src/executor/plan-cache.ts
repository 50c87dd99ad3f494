/**
 * Compiled run plans, cached per worker process. A run's executable graph never changes, so each
 * worker parses it and builds its topology once, not once per node. A worker process has one cache
 * (1,000 plans by default), which all its pools and their BullMQ Workers share.
 */
import type { OnBudget } from '../domain/run-model.js';
import { scopedName } from '../domain/tenant.js';
import { findReferences } from '../graph/references.js';
import { buildTopology, type Topology } from '../graph/topology.js';
import { ITEM_ROOTS } from '../map/item-id.js';
import { NODE_KINDS, referenceFields, type ExecutableNode } from '../nodes/index.js';
import type { RunPlans } from '../state/runs/run-plan.js';

export interface CompiledPlan {
  readonly runId: string;
  readonly agentId: string;
  /** The schema hash each custom tool was checked against when the plan was accepted, by tool. */
  readonly toolSchemas: Readonly<Record<string, string>>;
  /** Whose secrets its calls may use, whose blobs it reads and writes. */
  readonly tenant: string;
  /** Whose lessons apply to its calls: the agent, within its tenant. */
  readonly memoryAgent: string;
  /** A session run's session, as stored (tenant-scoped): whose daily cost its calls add to. */
  readonly sessionKey: string | null;
  readonly input: unknown;
  readonly timeoutSeconds: number;
  /** 1 (lowest) to 10: which of a flow counter's waiting calls goes first. */
  readonly priority: number;
  /** How many of the run's node jobs may run at once (`executor/node-slots.ts`); null: no cap. */
  readonly maxParallelNodes: number | null;
  /** What flow limits keyed by `run.metadata.<field>` read. */
  readonly metadata: Readonly<Record<string, unknown>> | null;
  /** What a model call does when the money budget is spent. */
  readonly onBudget: OnBudget;
  readonly nodes: ReadonlyMap<string, ExecutableNode>;
  readonly topology: Topology;
  /** Per node: the node ids its fields reference (whose snapshots it must read). */
  readonly reads: ReadonlyMap<string, readonly string[]>;
  /** A rerun: it starts with its origin's snapshots of the nodes it does not run. */
  readonly reusesSnapshots: boolean;
  /** Some node carries a `priority`: its node jobs are queued by priority. */
  readonly prioritized: boolean;
  /** The run's generation when this plan was read: a job of an older one is stale. */
  readonly generation: number;
}

/**
 * The nodes whose snapshots `node` reads through its references; in what runs per item (a map's
 * `node` and `input`) `item` and `index` name the item, not a node.
 */
export function readsOf(node: ExecutableNode): string[] {
  const itemFields = NODE_KINDS[node.kind].itemFields ?? [];
  const roots = referenceFields(node).flatMap(({ value, path }) =>
    findReferences(value)
      .filter((r) => !(itemFields.includes(String(path[0])) && ITEM_ROOTS.has(r.root)))
      .map((r) => r.root),
  );
  return [...new Set(roots)].filter((root) => root !== 'input');
}

export class PlanCache {
  private readonly plans = new Map<string, Promise<CompiledPlan | null>>();
  /** The key last moved to (or added at) the end of `plans`. */
  private newest: string | undefined;

  constructor(
    private readonly store: Pick<RunPlans, 'plan'>,
    private readonly capacity = 1000,
  ) {}

  /** The plan of `runId` as of `generation` (a replan installs a new one under the next generation). */
  get(runId: string, generation = 0): Promise<CompiledPlan | null> {
    const key = `${runId}@${generation}`;
    const hit = this.plans.get(key);
    if (hit) {
      // Re-insert to keep recently used plans at the end (LRU order); the plan asked for last is
      // there already (a node's steps, and the nodes a job hands off, ask for the same plan).
      if (key !== this.newest) {
        this.plans.delete(key);
        this.plans.set(key, hit);
        this.newest = key;
      }
      return hit;
    }
    const loading = this.load(runId);
    this.plans.set(key, loading);
    this.newest = key;
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
    const reads = new Map(stored.plan.nodes.map((n) => [n.id, readsOf(n)]));
    return {
      runId,
      agentId: stored.agentId,
      tenant: stored.tenant,
      memoryAgent: scopedName(stored.tenant, stored.agentId),
      sessionKey: stored.sessionKey,
      input: stored.input,
      timeoutSeconds: stored.timeoutSeconds,
      priority: stored.priority,
      maxParallelNodes: stored.maxParallelNodes,
      metadata: stored.metadata,
      onBudget: stored.onBudget,
      nodes,
      topology: buildTopology([...nodes.keys()], stored.plan.edges),
      reads,
      reusesSnapshots: stored.reusesSnapshots,
      toolSchemas: stored.plan.toolSchemas ?? {},
      prioritized: stored.plan.nodes.some((n) => typeof (n as { priority?: unknown }).priority === 'number'),
      generation: stored.generation,
    };
  }
}
