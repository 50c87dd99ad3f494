/**
 * A run's state in Redis: its record, readiness counters, live node states and immutable node
 * snapshots. Every multi-step change is one Lua script, so a crash never leaves half a change.
 */
import type { Redis } from 'ioredis';
import type { Graph } from '../graph/schema.js';
import {
  LiveNodeState,
  NodeSnapshot,
  RunError,
  RunStatus,
  type NodeView,
  type RunDocument,
} from '../runs/run-model.js';
import { channels, idempotencyKey, runKeyList, runKeys, type Channels } from './keys.js';
import { loadScripts, type ScriptRunner } from './scripts.js';

export interface NewRun {
  readonly runId: string;
  readonly graph: Graph;
  readonly input: unknown;
  readonly timeoutSeconds: number;
  readonly metadata: Record<string, unknown> | undefined;
  readonly createdAt: string;
  /** Dependencies per node; nodes with none may be left out. */
  readonly pending: ReadonlyMap<string, number>;
}

/** What a worker needs to execute a run's nodes; immutable for the run's life, so cacheable. */
export interface RunPlan {
  readonly graph: Graph;
  readonly input: unknown;
  readonly timeoutSeconds: number;
}

export interface BeginNodeResult {
  readonly status: RunStatus | null;
  readonly own: NodeSnapshot | null;
  readonly reads: ReadonlyMap<string, NodeSnapshot>;
}

export interface CompleteNodeResult {
  readonly written: boolean;
  readonly status: RunStatus | null;
  readonly ready: readonly string[];
}

export interface RunStoreOptions {
  readonly prefix: string;
  /** How long a settled run's record is kept. @defaultValue 7 days */
  readonly retentionSeconds: number;
}

const QUEUED = JSON.stringify({ status: 'queued' } satisfies LiveNodeState);

const parseJson = (text: string | null | undefined): unknown => (text ? (JSON.parse(text) as unknown) : null);

export class RunStore {
  readonly channels: Channels;
  private readonly script: ScriptRunner;

  constructor(
    private readonly redis: Redis,
    private readonly options: RunStoreOptions,
  ) {
    this.script = loadScripts(redis);
    this.channels = channels(options.prefix);
  }

  private keys(runId: string): [string, string, string, string] {
    return runKeyList(runKeys(this.options.prefix, runId));
  }

  /**
   * Claims an idempotency key for `runId`. Returns the run id that already holds the key, or null
   * when this call claimed it.
   */
  async claimIdempotencyKey(clientKey: string, runId: string): Promise<string | null> {
    const key = idempotencyKey(this.options.prefix, clientKey);
    const claimed = await this.redis.set(key, runId, 'EX', this.options.retentionSeconds, 'NX');
    return claimed === 'OK' ? null : this.redis.get(key);
  }

  async releaseIdempotencyKey(clientKey: string): Promise<void> {
    await this.redis.del(idempotencyKey(this.options.prefix, clientKey));
  }

  async create(run: NewRun): Promise<void> {
    const k = runKeys(this.options.prefix, run.runId);
    const tx = this.redis.multi();
    tx.hset(k.meta, {
      status: 'queued' satisfies RunStatus,
      createdAt: run.createdAt,
      graph: JSON.stringify(run.graph),
      input: JSON.stringify(run.input ?? null),
      timeoutSeconds: String(run.timeoutSeconds),
      metadata: JSON.stringify(run.metadata ?? null),
    });
    const counters = [...run.pending].filter(([, n]) => n > 0).flatMap(([id, n]) => [id, String(n)]);
    if (counters.length > 0) tx.hset(k.pending, ...counters);
    await tx.exec();
  }

  async status(runId: string): Promise<RunStatus | null> {
    const status = await this.redis.hget(runKeys(this.options.prefix, runId).meta, 'status');
    return status === null ? null : RunStatus.parse(status);
  }

  async plan(runId: string): Promise<RunPlan | null> {
    const [graph, input, timeoutSeconds] = await this.redis.hmget(
      runKeys(this.options.prefix, runId).meta,
      'graph',
      'input',
      'timeoutSeconds',
    );
    if (graph === null) return null;
    return {
      graph: parseJson(graph) as Graph,
      input: parseJson(input),
      timeoutSeconds: Number(timeoutSeconds),
    };
  }

  /** Moves a queued run to running and marks its sources queued. Returns its status after. */
  async start(runId: string, sources: readonly string[], now: string): Promise<RunStatus | null> {
    const status = await this.script('start-run-4', this.keys(runId), [now, QUEUED, ...sources]);
    return typeof status === 'string' ? RunStatus.parse(status) : null;
  }

  async beginNode(
    runId: string,
    nodeId: string,
    reads: readonly string[],
    live: LiveNodeState,
  ): Promise<BeginNodeResult> {
    const raw = (await this.script('begin-node-4', this.keys(runId), [
      nodeId,
      JSON.stringify(live),
      ...reads,
    ])) as (string | null)[];
    const [status, own, ...snapshots] = raw;
    const readMap = new Map<string, NodeSnapshot>();
    reads.forEach((id, i) => {
      const s = snapshots[i];
      if (s) readMap.set(id, JSON.parse(s) as NodeSnapshot);
    });
    return {
      status: status ? RunStatus.parse(status) : null,
      own: own ? (JSON.parse(own) as NodeSnapshot) : null,
      reads: readMap,
    };
  }

  async completeNode(
    runId: string,
    nodeId: string,
    snapshot: NodeSnapshot,
    children: readonly string[],
  ): Promise<CompleteNodeResult> {
    const raw = (await this.script('complete-node-4', this.keys(runId), [
      nodeId,
      JSON.stringify(snapshot),
      QUEUED,
      ...children,
    ])) as [number, string | null, ...string[]];
    const [written, status, ...ready] = raw;
    return { written: written === 1, status: status ? RunStatus.parse(status) : null, ready };
  }

  /** Sets the run's outcome if none is set yet; true when this call decided it. */
  async decide(runId: string, status: RunStatus, error: RunError | null, now: string): Promise<boolean> {
    const decided = await this.script('decide-run-4', this.keys(runId), [
      status,
      error ? JSON.stringify(error) : '',
      this.channels.abort,
      runId,
      now,
    ]);
    return decided === 1;
  }

  /** All snapshots written so far. */
  async snapshots(runId: string): Promise<Map<string, NodeSnapshot>> {
    const raw = await this.redis.hgetall(runKeys(this.options.prefix, runId).nodes);
    return new Map(Object.entries(raw).map(([id, s]) => [id, JSON.parse(s) as NodeSnapshot]));
  }

  /** Closes a run: fills in snapshots for nodes that never ran, stores the output, sets TTLs. */
  async settle(
    runId: string,
    fill: ReadonlyMap<string, NodeSnapshot>,
    output: Record<string, unknown> | null,
    now: string,
  ): Promise<boolean> {
    const pairs = [...fill].flatMap(([id, s]) => [id, JSON.stringify(s)]);
    const settled = await this.script('settle-run-4', this.keys(runId), [
      now,
      output ? JSON.stringify(output) : '',
      this.options.retentionSeconds,
      this.channels.settled,
      runId,
      ...pairs,
    ]);
    return settled === 1;
  }

  async document(runId: string): Promise<RunDocument | null> {
    const k = runKeys(this.options.prefix, runId);
    const [meta, snapshots, live] = (await this.redis
      .multi()
      .hgetall(k.meta)
      .hgetall(k.nodes)
      .hgetall(k.live)
      .exec()
      .then((r) => r?.map(([err, v]) => (err ? Promise.reject(err) : v)))) as [
      Record<string, string>,
      Record<string, string>,
      Record<string, string>,
    ];
    if (!meta.status) return null;
    const graph = parseJson(meta.graph) as Graph;
    const nodes: Record<string, NodeView> = {};
    for (const node of graph.nodes) {
      const snapshot = snapshots[node.id];
      const state = live[node.id];
      nodes[node.id] = snapshot
        ? { id: node.id, ...NodeSnapshot.parse(JSON.parse(snapshot)) }
        : state
          ? { id: node.id, ...LiveNodeState.parse(JSON.parse(state)) }
          : { id: node.id, status: 'pending' };
    }
    return {
      runId,
      status: RunStatus.parse(meta.status),
      createdAt: meta.createdAt ?? '',
      startedAt: meta.startedAt ?? null,
      finishedAt: meta.finishedAt ?? null,
      graph,
      input: parseJson(meta.input),
      timeoutSeconds: Number(meta.timeoutSeconds),
      metadata: parseJson(meta.metadata) as Record<string, unknown> | null,
      nodes,
      output: parseJson(meta.output) as Record<string, unknown> | null,
      error: meta.error ? RunError.parse(JSON.parse(meta.error)) : null,
    };
  }
}
