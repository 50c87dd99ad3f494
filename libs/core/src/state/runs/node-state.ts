/**
 * A run's nodes: beginning one (its live state, its attempts and usage so far, the snapshots it
 * reads), what happens while it runs (failed attempts, throttling, loop iterations), completing it
 * (its immutable snapshot, its children's readiness, a handed-off child begun in the same step),
 * and reading the snapshots written.
 */
import {
  LiveNodeState,
  RunStatus,
  type AttemptRecord,
  type Budget,
  type NodeSnapshot,
  type UsageCharge,
} from '../../domain/run-model.js';
import { chargeJson, parseJson, snapshotJson, type RunContext } from './run-context.js';

export interface BeginNodeResult {
  /** `stale`: the job belongs to an older generation of the run. */
  readonly status: RunStatus | 'stale' | null;
  /** The node's snapshot when one exists already (a redelivered job): reported, not run again. */
  readonly existing: NodeSnapshot | null;
  readonly executions: number;
  readonly toolCalls: number;
  readonly toolTimeMs: number;
  readonly attempts: AttemptRecord[];
  /** Loop iterations recorded so far. */
  readonly progress: unknown[];
  readonly deadlineAt: number | null;
  readonly budget: Budget;
  /** Model tokens (prompt + completion) used so far. */
  readonly tokens: number;
  /** What the run's priced model calls cost so far, in nano-dollars. */
  readonly costNanoUsd: number;
  readonly reads: ReadonlyMap<string, NodeSnapshot>;
}

export interface CompleteNodeResult {
  readonly written: boolean;
  /** This call decided the run `succeeded`: its snapshot was the last of the plan's (`planned`). */
  readonly decided: boolean;
  /** The run's status after the call. */
  readonly status: RunStatus | null;
  readonly generation: number;
  /** The ready children, the handed-off ones among them. */
  readonly ready: readonly string[];
  /**
   * The children begun in the same step (node handoff), in the job's order of preference: each
   * with its begin answer and start time (the step's). Empty when none was.
   */
  readonly handedOff: readonly HandedOffNode[];
}

export interface HandedOffNode {
  readonly nodeId: string;
  readonly begin: BeginNodeResult;
  readonly startedAt: string;
}

/** The children a completing job may run next, in the order it prefers them (`executor/handoff.ts`). */
export interface HandoffRequest {
  /** The job's generation. */
  readonly generation: number;
  /** The running state of those begun; its `startedAt` is replaced by the step's instant. */
  readonly live: LiveNodeState;
  /** How many of the candidates the job may take (at least one). */
  readonly width: number;
  readonly candidates: readonly { id: string; chargeCall: boolean; reads: readonly string[] }[];
}

/** What beginning a carrier job's nodes found (`beginCarried`). */
export interface CarriedBegin {
  /** Those still queued, begun now, in the job's order. */
  readonly begun: readonly HandedOffNode[];
  /** The others, with their live state (null: none, e.g. a snapshot was written). */
  readonly others: readonly { readonly nodeId: string; readonly live: LiveNodeState | null }[];
}

export class NodeStates {
  constructor(private readonly ctx: RunContext) {}

  async beginNode(
    runId: string,
    nodeId: string,
    options: {
      generation: number;
      live: LiveNodeState;
      countExecution: boolean;
      chargeCall: boolean;
      reads: readonly string[];
      /** Announce nothing: a map's item, whose map reports progress instead. */
      quiet?: boolean;
    },
  ): Promise<BeginNodeResult> {
    const raw = (await this.ctx.script('begin-node-6', this.ctx.scriptKeys(runId), [
      nodeId,
      options.generation,
      JSON.stringify(options.live),
      options.countExecution ? (options.quiet ? '2' : '1') : '0',
      options.chargeCall ? '1' : '0',
      ...options.reads,
    ])) as unknown[];
    return beginResult(raw, options.reads);
  }

  /**
   * Begins the nodes a carrier job runs (`executor/handoff.ts`) that are still queued, each as
   * `beginNode` would and all at one instant; answers the others' live state, for a redelivered
   * carrier to recover.
   */
  async beginCarried(
    runId: string,
    request: {
      generation: number;
      /** Their running state; its `startedAt` is replaced by the step's instant. */
      live: LiveNodeState;
      nodes: readonly { id: string; chargeCall: boolean; reads: readonly string[] }[];
    },
  ): Promise<CarriedBegin> {
    const [startedAt, ...answers] = (await this.ctx.script('begin-carried-6', this.ctx.scriptKeys(runId), [
      request.generation,
      JSON.stringify(request.live),
      JSON.stringify(request.nodes.map((n) => ({ id: n.id, charge: n.chargeCall, reads: n.reads }))),
    ])) as [string | null, ...[number, unknown][]];
    const begun: HandedOffNode[] = [];
    const others: { nodeId: string; live: LiveNodeState | null }[] = [];
    request.nodes.forEach((node, i) => {
      const [wasBegun, answer] = answers[i]!;
      if (wasBegun === 1 && startedAt)
        begun.push({ nodeId: node.id, begin: beginResult(answer as unknown[], node.reads), startedAt });
      else
        others.push({
          nodeId: node.id,
          live: LiveNodeState.safeParse(parseJson(typeof answer === 'string' ? answer : null)).data ?? null,
        });
    });
    return { begun, others };
  }

  /** Records a failed attempt that BullMQ will retry. */
  async recordAttempt(
    runId: string,
    nodeId: string,
    attempt: AttemptRecord,
    live: LiveNodeState,
  ): Promise<void> {
    await this.ctx.script('record-attempt-6', this.ctx.scriptKeys(runId), [
      nodeId,
      JSON.stringify(attempt),
      JSON.stringify(live),
      Math.round(attempt.durationMs),
    ]);
  }

  /**
   * Flow control held a node's call back (`throttled`: its live state and the `node.throttled`
   * event) or let it go after `waitedMs` (added to the node's throttled time).
   */
  async recordThrottle(
    runId: string,
    nodeId: string,
    change: { live?: LiveNodeState; event?: { key: string; waitMs: number | null }; waitedMs?: number },
  ): Promise<void> {
    await this.ctx.script('throttle-node-6', this.ctx.scriptKeys(runId), [
      nodeId,
      change.live ? JSON.stringify(change.live) : '',
      change.event ? JSON.stringify(change.event) : '',
      Math.round(change.waitedMs ?? 0),
    ]);
  }

  /**
   * Records loop iteration `n` (1-based) once, charging its tool calls and time to the run.
   * Returns iterations recorded and usage so far.
   */
  async recordIteration(
    runId: string,
    nodeId: string,
    n: number,
    iteration: unknown,
    charge: UsageCharge,
    live: LiveNodeState,
  ): Promise<{
    iterations: number;
    toolCalls: number;
    toolTimeMs: number;
    tokens: number;
    costNanoUsd: number;
  }> {
    const [iterations, toolCalls, toolTimeMs, tokens, costNanoUsd] = (await this.ctx.script(
      'record-iteration-6',
      this.ctx.scriptKeys(runId),
      [nodeId, n, JSON.stringify(iteration), chargeJson(charge), JSON.stringify(live)],
    )) as [number, number, number, number, number];
    return { iterations, toolCalls, toolTimeMs, tokens, costNanoUsd: Number(costNanoUsd ?? 0) };
  }

  async completeNode(
    runId: string,
    nodeId: string,
    snapshot: NodeSnapshot,
    options: {
      release: boolean;
      children: readonly string[];
      charge: UsageCharge;
      tool?: string;
      /**
       * The jobs whose handed-off children count as this completion's own (the completing job, and
       * for a moved node the job it ran in before): a redelivery answers those again.
       */
      jobs?: readonly string[];
      /** Begin the first ready one of these children in the same step (node handoff). */
      handoff?: HandoffRequest;
      /**
       * The run's plan as the completing job knows it (its node count and generation): when this
       * snapshot is the last of its nodes and all succeeded, and the run is still of that
       * generation, the script decides the run `succeeded` (`decided`); the caller settles it.
       */
      planned?: { readonly nodes: number; readonly generation: number };
    },
  ): Promise<CompleteNodeResult> {
    const last = snapshot.attempts.at(-1);
    // Built by assignment, in its keys' order: spreading the optional ones costs several times as
    // much, once per node.
    const event: Record<string, unknown> = {};
    if (options.tool) event.tool = options.tool;
    event.status = snapshot.status;
    event.attempts = snapshot.attempts.length;
    event.durationMs = snapshot.durationMs;
    if (snapshot.error) event.error = snapshot.error;
    if (last) event.worker = last.worker;
    const raw = (await this.ctx.script('complete-node-6', this.ctx.scriptKeys(runId), [
      nodeId,
      snapshotJson(snapshot),
      `node.${snapshot.status}`,
      JSON.stringify(event),
      options.release ? '1' : '0',
      options.jobs?.length ? JSON.stringify(options.jobs) : '',
      chargeJson(options.charge),
      options.handoff
        ? JSON.stringify({
            generation: options.handoff.generation,
            live: JSON.stringify(options.handoff.live),
            width: options.handoff.width,
            candidates: options.handoff.candidates.map((c) => ({
              id: c.id,
              charge: c.chargeCall,
              reads: c.reads,
            })),
          })
        : '',
      options.planned?.nodes ?? '',
      options.planned?.generation ?? '',
      ...options.children,
    ])) as [
      number,
      string | null,
      number,
      string[] | null,
      unknown[][] | null,
      string | null,
      number,
      ...string[],
    ];
    const [written, status, generation, handedIds, begins, startedAt, decided, ...ready] = raw;
    const reads = new Map(options.handoff?.candidates.map((c) => [c.id, c.reads]));
    return {
      written: written === 1,
      decided: decided === 1,
      status: status ? RunStatus.parse(status) : null,
      generation,
      ready,
      handedOff:
        handedIds && begins && startedAt
          ? handedIds.map((nodeId, i) => ({
              nodeId,
              begin: beginResult(begins[i]!, reads.get(nodeId) ?? []),
              startedAt,
            }))
          : [],
    };
  }

  /** Nodes whose jobs sit in the delayed set: waiting for a signal or in retry backoff. */
  async parkedNodes(runId: string, statuses: readonly string[] = ['waiting', 'retrying']): Promise<string[]> {
    const live = await this.ctx.redis.hgetall(this.ctx.keysOf(runId).live);
    return Object.entries(live)
      .filter(([, state]) => statuses.includes((JSON.parse(state) as { status?: string }).status ?? ''))
      .map(([id]) => id);
  }

  /** The snapshots of these nodes that exist. */
  async snapshotsOf(runId: string, nodeIds: readonly string[]): Promise<Map<string, NodeSnapshot>> {
    if (nodeIds.length === 0) return new Map();
    const raw = await this.ctx.redis.hmget(this.ctx.keysOf(runId).nodes, ...nodeIds);
    return new Map(
      nodeIds.flatMap((id, i) => (raw[i] ? [[id, JSON.parse(raw[i]) as NodeSnapshot] as const] : [])),
    );
  }

  /** All snapshots written so far. */
  async snapshots(runId: string): Promise<Map<string, NodeSnapshot>> {
    const raw = await this.ctx.redis.hgetall(this.ctx.keysOf(runId).nodes);
    return new Map(Object.entries(raw).map(([id, s]) => [id, JSON.parse(s) as NodeSnapshot]));
  }
}

const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** begin-node.lua's answer (also complete-node.lua's for a node it hands off), as a result. */
function beginResult(raw: unknown[], readIds: readonly string[]): BeginNodeResult {
  const [
    status,
    existing,
    executions,
    toolCalls,
    toolTimeMs,
    attempts,
    progress,
    deadlineAt,
    budget,
    tokens,
    costNanoUsd,
    ...snapshots
  ] = raw;
  const reads = new Map<string, NodeSnapshot>();
  readIds.forEach((id, i) => {
    const s = str(snapshots[i]);
    if (s) reads.set(id, JSON.parse(s) as NodeSnapshot);
  });
  return {
    status: status === 'stale' ? 'stale' : str(status) ? RunStatus.parse(status) : null,
    existing: (parseJson(str(existing)) as NodeSnapshot | null) ?? null,
    executions: Number(executions ?? 0),
    toolCalls: Number(toolCalls ?? 0),
    toolTimeMs: Number(toolTimeMs ?? 0),
    attempts: (parseJson(str(attempts)) as AttemptRecord[] | null) ?? [],
    progress: (parseJson(str(progress)) as unknown[] | null) ?? [],
    deadlineAt: str(deadlineAt) ? Number(deadlineAt) : null,
    budget: (parseJson(str(budget)) as Budget | null) ?? {},
    tokens: Number(tokens ?? 0),
    costNanoUsd: Number(costNanoUsd ?? 0),
    reads,
  };
}
