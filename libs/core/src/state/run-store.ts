/**
 * A run's state in Redis: its record, readiness counters, live node states, immutable node
 * snapshots, event stream and execution bookkeeping. Every multi-step change is one Lua script,
 * so a crash never leaves half a change, and each appends its events in the same step.
 */
import { isCluster, type RedisClient } from './redis-client.js';
import {
  MAX_RUN_SECONDS,
  AttemptRecord,
  Budget,
  LiveNodeState,
  NodeSnapshot,
  type OnBudget,
  RunError,
  RunStatus,
  SignalDecision,
  type RerunOf,
  WaitRecord,
  familyOf,
  isTerminal,
  type NodeView,
  type PlanningRecord,
  type RunDocument,
  type RunEvent,
  type TaskMode,
  type TaskSpec,
  type UsageCharge,
} from '../domain/run-model.js';
import type { ExecutableGraph, Graph } from '../nodes/index.js';
import { RUN_ERROR_STATUS, cancelledError } from '../errors/run-error.js';
import { usageFromCounters } from '../insight/run-search.js';
import { Thinking } from '../domain/thinking.js';
import { BlobStore } from './blob-store.js';
import { RunIndex } from './run-index.js';
import { DEFAULT_TENANT } from '../domain/tenant.js';
import { RunWebhook } from '../domain/webhook.js';
import { DEFAULT_PRIORITY } from '../flow/limits.js';
import {
  channels,
  queuedRunsKey,
  runKeyList,
  runKeys,
  runSearchKeys,
  tenantRunsKey,
  type Channels,
} from './keys.js';
import { loadScripts, type ScriptRunner } from './scripts.js';
import { slotMulti } from './slot-multi.js';

/** What `signal-6.lua` answers. */
export type SignalDelivery =
  'delivered' | 'duplicate' | 'unknown_run' | 'run_finished' | 'not_awaited' | 'too_many' | 'not_raised';

/** One wait of a node, as `waitState` takes it. */
export interface WaitSpec {
  readonly nodeId: string;
  /** Names the wait's deadline and nonce; @defaultValue the node id (a wait node's one wait) */
  readonly key?: string;
  /** The signal's name, or with `nonce` its prefix. */
  readonly signal: string;
  /** An approval's nonce candidate: kept on the first call, then always the same. */
  readonly nonce?: string;
  readonly approval?: { readonly tool: string; readonly reason: string };
  /** A model call paused over the run's money budget: the budget and what was spent (USD). */
  readonly budget?: { readonly costUsd: number; readonly spentUsd: number };
}

export interface WaitState {
  readonly payload: unknown;
  readonly delivered: boolean;
  readonly deadlineAt: number;
  /** The signal's full name (an approval's with its nonce). */
  readonly signal: string;
  readonly decidedBy: SignalDecision | null;
}

export interface NewRun {
  readonly runId: string;
  /** Absent for a task run until the plan loop plans it. */
  readonly graph?: Graph;
  readonly plan?: ExecutableGraph;
  readonly task?: TaskSpec;
  readonly agentId?: string;
  /** The tenant the run belongs to. @defaultValue DEFAULT_TENANT */
  readonly tenant?: string;
  /** The run a child run (a loop iteration over a nested graph) serves. */
  readonly parentRunId?: string;
  /**
   * The queue shard of the run's jobs, recorded for a child run (its parent's shard) when the run
   * queues are sharded; a run without it is routed by its id (see `queues/queue-shards.ts`).
   */
  readonly queueShard?: number;
  /** The session whose lane the run belongs to. */
  readonly sessionKey?: string;
  readonly input: unknown;
  readonly timeoutSeconds: number;
  readonly budget: Budget;
  /** What a spent money budget does. @defaultValue "fail" */
  readonly onBudget?: OnBudget;
  readonly metadata: Record<string, unknown> | undefined;
  /** @defaultValue DEFAULT_PRIORITY */
  readonly priority?: number;
  /** Labels to find the run by (its search indexes). */
  readonly tags?: readonly string[];
  /** Where the run's own events are posted (see `domain/webhook.ts`); never a secret. */
  readonly webhook?: RunWebhook;
  readonly createdAt: string;
  /** Dependencies per node; nodes with none may be left out. */
  readonly pending: ReadonlyMap<string, number>;
  /**
   * A rerun: the run it forks and the node it runs again from, with the origin's snapshots of the
   * nodes it does not run (stored with the run, in the same step, marked `reusedFrom`).
   */
  readonly rerun?: { readonly of: RerunOf; readonly reused: ReadonlyMap<string, NodeSnapshot> };
}

/** What a run's webhook events are made from (see `webhookSubject`). */
export interface WebhookSubject {
  readonly runId: string;
  readonly status: RunStatus;
  readonly tenant: string;
  readonly agentId: string;
  /** As stored: tenant-scoped. */
  readonly sessionKey: string | null;
  readonly webhook: RunWebhook | null;
  readonly createdAt: string;
  readonly finishedAt: string | null;
  readonly error: RunError | null;
  readonly output: unknown;
  readonly usage: RunDocument['usage'];
}

/** What a worker needs to execute a run's nodes; immutable for the run's life, so cacheable. */
export interface RunPlan {
  readonly agentId: string;
  readonly tenant: string;
  /** 1 (lowest) to 10: which of a counter's waiting calls goes first (flow control). */
  readonly priority: number;
  readonly metadata: Record<string, unknown> | null;
  /** A session run's session, as stored (tenant-scoped). */
  readonly sessionKey: string | null;
  readonly plan: ExecutableGraph;
  readonly input: unknown;
  readonly timeoutSeconds: number;
  readonly onBudget: OnBudget;
  /** A rerun starts with snapshots it did not write (its origin's): its first start reads them. */
  readonly reusesSnapshots: boolean;
  /** The run's generation when the plan was read (a replan or resume moves it on). */
  readonly generation: number;
}

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

/** The arguments set-plan and replan share: graph, plan, counters, planning record, charge, event. */
function planArgs(
  plan: { graph: Graph; plan: ExecutableGraph; pending: ReadonlyMap<string, number> },
  planning: PlanningRecord,
  charge: UsageCharge,
): string[] {
  return [
    JSON.stringify(plan.graph),
    JSON.stringify(plan.plan),
    JSON.stringify(Object.fromEntries([...plan.pending].filter(([, n]) => n > 0))),
    JSON.stringify(planning),
    chargeJson(charge),
    JSON.stringify({ ...planning, nodes: plan.plan.nodes.length }),
  ];
}

const chargeJson = (charge: UsageCharge): string =>
  JSON.stringify(
    Object.fromEntries(
      (Object.entries(charge) as [string, number | undefined][]).map(([k, v]) => [k, Math.round(v ?? 0)]),
    ),
  );

export type TaskState = TaskSpec & { planned: boolean; replanRequest: unknown };

export interface RunHeader {
  readonly status: RunStatus | null;
  readonly tenant: string;
  /** Set for a child run: the run it serves. */
  readonly parentRunId: string | null;
  readonly sessionKey: string | null;
  /** Null for a fixed-graph run. */
  readonly task: TaskState | null;
  /** The agent the run is of. */
  readonly agentId: string;
}

export interface OutcomeState {
  readonly snapshots: Map<string, NodeSnapshot>;
  readonly status: RunStatus | null;
  readonly error: RunError | null;
  readonly createdAt: string | null;
  readonly sessionKey: string | null;
  readonly replanRequested: boolean;
  /** A task run's mode (null for a fixed graph): a window-mode run's drained window asks for the next. */
  readonly mode: TaskMode | null;
}

/** The usage counters `replan-6.lua` restarts with a new plan. */
const REPLAN_COUNTERS = [
  'toolCalls',
  'toolTimeMs',
  'promptTokens',
  'completionTokens',
  'modelCalls',
] as const;

export interface WindowState {
  readonly graph: Graph;
  readonly planning: PlanningRecord | null;
  readonly usage: Record<(typeof REPLAN_COUNTERS)[number], number>;
}

export interface CompleteNodeResult {
  readonly written: boolean;
  readonly status: RunStatus | null;
  readonly generation: number;
  /** The ready children, the handed-off one among them. */
  readonly ready: readonly string[];
  /** The child begun in the same step (node handoff), its begin answer and start time (the step's). */
  readonly handedOff?: {
    readonly nodeId: string;
    readonly begin: BeginNodeResult;
    readonly startedAt: string;
  };
}

/** The children a completing job may run next, in the order it prefers them (`executor/handoff.ts`). */
export interface HandoffRequest {
  /** The job's generation. */
  readonly generation: number;
  /** The running state of the one begun; its `startedAt` is replaced by the step's instant. */
  readonly live: LiveNodeState;
  readonly candidates: readonly { id: string; chargeCall: boolean; reads: readonly string[] }[];
}

export interface CreateResult {
  /** False when a run with this id existed: nothing was written. */
  readonly created: boolean;
  /** The run's status now (`queued` when just created). */
  readonly status: RunStatus;
  /** When the run was accepted (its first request's time). */
  readonly createdAt: string;
}

export interface ReconcileView {
  readonly status: RunStatus;
  readonly generation: number;
  readonly parentRunId: string | null;
  readonly sessionKey: string | null;
}

export interface RunStoreOptions {
  readonly prefix: string;
  /** How long a settled run's record is kept. @defaultValue 7 days */
  readonly retentionSeconds: number;
  /**
   * Events kept in a run's stream (`XADD MAXLEN ~`, recorded in the run's hash at creation); older
   * ones are trimmed. @defaultValue 10000
   */
  readonly eventsMax?: number;
  /** The configuration's version tag, recorded on every run this store creates (`configVersion`). */
  readonly configVersion?: string;
}

const taskMode = (mode: string | null | undefined): TaskMode =>
  mode === 'loop' || mode === 'window' ? mode : 'dag';

const parseJson = (text: string | null | undefined): unknown => (text ? (JSON.parse(text) as unknown) : null);

/** The strings of a stored JSON array (anything else: none). */
const stringList = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];

/**
 * A snapshot as stored: its status first, so a script reads it off the front of the text (the node
 * counts, `run.lib.lua`) without decoding outputs of any depth.
 */
export function snapshotJson(snapshot: NodeSnapshot): string {
  const { status, ...rest } = snapshot;
  return JSON.stringify({ status, ...rest });
}

/** The replies of a MULTI, in order; the first failed command's error is thrown. */
function multiReplies(replies: [Error | null, unknown][] | null): unknown[] {
  return (replies ?? []).map(([err, value]) => {
    if (err) throw err;
    return value;
  });
}
const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);

export class RunStore {
  readonly channels: Channels;
  /** Large node outputs, stored once by content (see `blob-store.ts`). */
  readonly blobs: BlobStore;
  /** Each tenant's runs by status, agent, session and tag (see `run-index.ts`). */
  readonly index: RunIndex;
  private readonly script: ScriptRunner;

  constructor(
    private readonly redis: RedisClient,
    private readonly options: RunStoreOptions,
  ) {
    this.script = loadScripts(redis);
    this.channels = channels(options.prefix);
    this.blobs = new BlobStore(redis, options);
    this.index = new RunIndex(redis, options.prefix);
  }

  private keys(runId: string): string[] {
    return runKeyList(runKeys(this.options.prefix, runId));
  }

  /** Until a run settles its keys carry this TTL, so an abandoned run cannot stay forever. */
  private safetyTtl(timeoutSeconds: number): number {
    return this.options.retentionSeconds + timeoutSeconds;
  }

  /** The ids of a tenant's runs that may still exist (their keys may have expired since). */
  async tenantRuns(tenant: string): Promise<string[]> {
    return this.redis.zrange(tenantRunsKey(this.options.prefix, tenant), '0', '-1');
  }

  /**
   * Stores a new run, queued, unless a run with its id exists: then nothing changes and the
   * existing run's status and acceptance time are answered (`created: false`). Safe to repeat.
   * The run is put on the index of queued runs in the same step (one Redis) or first (a cluster),
   * so no crash leaves a stored run the reconciler cannot find; an entry whose run was never stored
   * is dropped by the reconciler.
   */
  async create(run: NewRun): Promise<CreateResult> {
    const meta = {
      status: 'queued' satisfies RunStatus,
      createdAt: run.createdAt,
      ...(run.graph && run.plan ? { graph: JSON.stringify(run.graph), plan: JSON.stringify(run.plan) } : {}),
      ...(run.task
        ? {
            task: run.task.task,
            mode: run.task.mode ?? 'dag',
            maxReplans: String(run.task.maxReplans),
            // Window mode's size; its window bound is `maxReplans + 1`.
            ...(run.task.window ? { window: String(run.task.window.size) } : {}),
            ...(run.task.overrides ? { overrides: run.task.overrides } : {}),
            ...(run.task.model !== undefined ? { taskModel: run.task.model } : {}),
            ...(run.task.thinking !== undefined ? { thinking: JSON.stringify(run.task.thinking) } : {}),
            ...(run.task.secrets?.length ? { secrets: JSON.stringify(run.task.secrets) } : {}),
          }
        : {}),
      agentId: run.task?.agentId ?? run.agentId ?? 'main',
      tenant: run.tenant ?? DEFAULT_TENANT,
      ...(run.parentRunId ? { parentRunId: run.parentRunId } : {}),
      ...(run.queueShard !== undefined ? { shard: String(run.queueShard) } : {}),
      ...(run.sessionKey ? { sessionKey: run.sessionKey } : {}),
      input: JSON.stringify(run.input ?? null),
      timeoutSeconds: String(run.timeoutSeconds),
      budget: JSON.stringify(run.budget),
      ...(run.onBudget === 'pause' ? { onBudget: run.onBudget } : {}),
      metadata: JSON.stringify(run.metadata ?? null),
      priority: String(run.priority ?? DEFAULT_PRIORITY),
      ...(run.tags && run.tags.length > 0 ? { tags: JSON.stringify(run.tags) } : {}),
      ...(run.plan ? { nodeCount: String(run.plan.nodes.length) } : {}),
      ...(run.rerun ? { rerunOf: JSON.stringify(run.rerun.of) } : {}),
      ...(run.webhook ? { webhook: JSON.stringify(run.webhook) } : {}),
      generation: '0',
      eventsMax: String(this.options.eventsMax ?? 10_000),
      ...(this.options.configVersion ? { configVersion: this.options.configVersion } : {}),
    };
    const pending = Object.fromEntries([...run.pending].filter(([, n]) => n > 0));
    const created = Date.parse(run.createdAt);
    // Listed runs (not child runs: they are found through their parent) name their tenant's search
    // indexes, which the run scripts keep (run.lib.lua).
    const keepMs = (MAX_RUN_SECONDS + this.options.retentionSeconds) * 1000;
    const index = run.parentRunId
      ? {}
      : {
          index: JSON.stringify({
            base: runSearchKeys(this.options.prefix, meta.tenant).base,
            id: run.runId,
            score: created,
            keepMs,
          }),
        };
    // The index of queued runs feeds the reconciler; the tenant's index of runs is trimmed of runs
    // past any retention (a run lives at most its deadline plus the retention), so it stays as large
    // as the runs that can still exist. On one Redis the create script writes both in the same step
    // as the run (`_lists`): no MULTI, no round trip of their own, and never a run without them. On a
    // cluster they are in other slots: written first, in one round trip (NX keeps a repeat's first
    // time), and the create waits for them; the reconciler drops an entry whose run was never made.
    const runs = tenantRunsKey(this.options.prefix, meta.tenant);
    const cluster = isCluster(this.redis);
    if (cluster) {
      await slotMulti(this.redis)
        .zadd(queuedRunsKey(this.options.prefix), 'NX', created, run.runId)
        .zadd(runs, 'NX', created, run.runId)
        .zremrangebyscore(runs, '-inf', created - keepMs)
        .expire(runs, MAX_RUN_SECONDS + this.options.retentionSeconds)
        .exec();
    }
    const lists = cluster
      ? {}
      : {
          _lists: {
            queued: queuedRunsKey(this.options.prefix),
            runs,
            id: run.runId,
            score: created,
            keepMs,
            ttl: MAX_RUN_SECONDS + this.options.retentionSeconds,
          },
        };
    const reused = [...(run.rerun?.reused ?? [])].flatMap(([id, snapshot]) => [
      id,
      snapshotJson({ ...snapshot, reusedFrom: run.rerun!.of.runId }),
    ]);
    const reply = await this.script('create-run-6', this.keys(run.runId), [
      JSON.stringify({ ...meta, ...index, ...lists }),
      JSON.stringify(pending),
      this.safetyTtl(run.timeoutSeconds),
      run.rerun?.of.runId ?? '',
      ...reused,
    ]);
    const [made, status, createdAt] = reply as [number, string | null | undefined, string | null | undefined];
    const acceptedAt = made === 1 ? run.createdAt : (createdAt ?? run.createdAt);
    if (made === 1) return { created: true, status: 'queued', createdAt: run.createdAt };
    return { created: false, status: RunStatus.parse(status ?? 'queued'), createdAt: acceptedAt };
  }

  /**
   * Queued runs accepted before `before` (epoch ms), oldest first, at most `limit`: what the
   * reconciler looks at.
   */
  async queuedRuns(before: number, limit: number): Promise<string[]> {
    return this.redis.zrangebyscore(queuedRunsKey(this.options.prefix), '-inf', before, 'LIMIT', 0, limit);
  }

  /** Takes a run off the index of queued runs (it started, ended or is gone). */
  async unqueue(runId: string): Promise<void> {
    await this.redis.zrem(queuedRunsKey(this.options.prefix), runId);
  }

  /**
   * Moves a run that waits legitimately (in its lane, for its parent, for a running slot) to the
   * back of the index of queued runs, so the reconciler's next passes look at the others first.
   */
  async requeueLater(runId: string, at: number): Promise<void> {
    await this.redis.zadd(queuedRunsKey(this.options.prefix), 'XX', at, runId);
  }

  /** What the reconciler reads of a run: null for an unknown run. */
  async reconcileView(runId: string): Promise<ReconcileView | null> {
    const [status, generation, parentRunId, sessionKey] = await this.redis.hmget(
      runKeys(this.options.prefix, runId).meta,
      'status',
      'generation',
      'parentRunId',
      'sessionKey',
    );
    if (status === null) return null;
    return {
      status: RunStatus.parse(status),
      generation: Number(generation ?? 0),
      parentRunId: parentRunId ?? null,
      sessionKey: sessionKey ?? null,
    };
  }

  async status(runId: string): Promise<RunStatus | null> {
    const status = await this.redis.hget(runKeys(this.options.prefix, runId).meta, 'status');
    return status === null ? null : RunStatus.parse(status);
  }

  /** Deletes a run that never started (a prepared session run its lane did not need). */
  async delete(runId: string): Promise<void> {
    await this.redis.del(...this.keys(runId));
    await this.unqueue(runId);
  }

  /**
   * Ends a run that has not (as cancelled: its running nodes abort, nothing else starts) and
   * deletes its keys; its jobs then find no run and do nothing. Answers the keys deleted.
   */
  async purge(runId: string): Promise<number> {
    const status = await this.status(runId);
    if (status !== null && !isTerminal(status)) {
      await this.decideError(runId, cancelledError('its tenant was deleted'), new Date().toISOString());
    }
    const deleted = await this.redis.del(...this.keys(runId));
    await this.unqueue(runId);
    return deleted;
  }

  /**
   * Records the session environment version the run's next plan is made from: the version the
   * environment check compares against (`envVersion`, moved by a change) and the plan's own
   * (`planEnvVersion`), which a queued node of an outdated plan is checked against at its start.
   */
  async setEnvironmentVersion(runId: string, version: number): Promise<void> {
    const v = String(version);
    await this.redis.hset(runKeys(this.options.prefix, runId).meta, 'envVersion', v, 'planEnvVersion', v);
  }

  async environmentVersion(runId: string): Promise<number> {
    return Number((await this.redis.hget(runKeys(this.options.prefix, runId).meta, 'envVersion')) ?? 0);
  }

  /**
   * Tells a running run that its session's environment moved to `version`: records it, appends
   * `environment.changed` with the entries it has not seen, and hands a planned run back to the
   * planner or gives an agent run the entries as steering — one step. `recent` is the environment's
   * recent entries as lines, newest last. False when the run is not running or saw this version.
   */
  async environmentChanged(runId: string, version: number, recent: readonly string[]): Promise<boolean> {
    const told = await this.script('environment-changed-6', this.keys(runId), [
      version,
      JSON.stringify(recent),
    ]);
    return told === 1;
  }

  /** Steering messages for a running agent, oldest first (appended by the environment check). */
  async steering(runId: string): Promise<string[]> {
    const raw = await this.redis.hget(runKeys(this.options.prefix, runId).aux, 'steer');
    return raw ? (JSON.parse(raw) as string[]) : [];
  }

  /** The tenant a run belongs to, or null for an unknown run. */
  async tenantOf(runId: string): Promise<string | null> {
    const [status, tenant] = await this.redis.hmget(
      runKeys(this.options.prefix, runId).meta,
      'status',
      'tenant',
    );
    return status === null ? null : (tenant ?? DEFAULT_TENANT);
  }

  /** The session of a session run. */
  async sessionOf(runId: string): Promise<string | null> {
    return this.redis.hget(runKeys(this.options.prefix, runId).meta, 'sessionKey');
  }

  /** Whether the session reply of a run was written (see `markSessionReplied`). */
  async sessionReplied(runId: string): Promise<boolean> {
    return (await this.redis.hexists(runKeys(this.options.prefix, runId).meta, 'sessionReplied')) === 1;
  }

  /**
   * Marks a run's session reply written, after it was: a writer that dies in between leaves it
   * to the next pass, whose write the session's once-check makes a no-op if it had happened.
   */
  async markSessionReplied(runId: string): Promise<void> {
    await this.redis.hset(runKeys(this.options.prefix, runId).meta, 'sessionReplied', '1');
  }

  /** Whether the run has settled (its current generation is final). */
  async isSettled(runId: string): Promise<boolean> {
    return (await this.settledState(runId)) === true;
  }

  /** Whether the run has settled, or null for an unknown run; cheaper than reading the document. */
  async settledState(runId: string): Promise<boolean | null> {
    const [status, finishedAt] = await this.redis.hmget(
      runKeys(this.options.prefix, runId).meta,
      'status',
      'finishedAt',
    );
    return status === null ? null : finishedAt !== null;
  }

  /**
   * What a webhook event of the run is made from: who it belongs to, its own `webhook`, and, once
   * it has settled, its outcome, usage and output. Null for an unknown run.
   */
  async webhookSubject(runId: string): Promise<WebhookSubject | null> {
    const k = runKeys(this.options.prefix, runId);
    const fields = [
      'status',
      'tenant',
      'agentId',
      'sessionKey',
      'webhook',
      'createdAt',
      'finishedAt',
      'error',
      'output',
    ] as const;
    const usageFields = USAGE_COUNTERS.map((c) => `usage:${c}`);
    const replies = await slotMulti(this.redis)
      .hmget(k.meta, ...fields)
      .hmget(k.aux, ...usageFields)
      .exec();
    const [meta, usage] = multiReplies(replies) as [(string | null)[], (string | null)[]];
    const [status, tenant, agentId, sessionKey, webhook, createdAt, finishedAt, error, output] = meta;
    if (!status) return null;
    const aux: Record<string, string> = {};
    usageFields.forEach((f, i) => {
      const v = usage[i];
      if (v !== null && v !== undefined) aux[f] = v;
    });
    return {
      runId,
      status: RunStatus.parse(status),
      tenant: tenant ?? DEFAULT_TENANT,
      agentId: agentId ?? 'main',
      sessionKey: sessionKey ?? null,
      webhook: webhook ? RunWebhook.parse(JSON.parse(webhook)) : null,
      createdAt: createdAt ?? '',
      finishedAt: finishedAt ?? null,
      error: error ? RunError.parse(JSON.parse(error)) : null,
      output: parseJson(output),
      usage: usageOf(aux),
    };
  }

  async error(runId: string): Promise<RunError | null> {
    const raw = await this.redis.hget(runKeys(this.options.prefix, runId).meta, 'error');
    return raw ? RunError.parse(JSON.parse(raw)) : null;
  }

  async generation(runId: string): Promise<number> {
    return Number((await this.redis.hget(runKeys(this.options.prefix, runId).meta, 'generation')) ?? 0);
  }

  /** The run's current executable plan, or null when it has none yet (an unplanned task run). */
  async plan(runId: string): Promise<RunPlan | null> {
    const [
      plan,
      input,
      timeoutSeconds,
      agentId,
      tenant,
      priority,
      metadata,
      sessionKey,
      onBudget,
      rerunOf,
      generation,
    ] = await this.redis.hmget(
      runKeys(this.options.prefix, runId).meta,
      'plan',
      'input',
      'timeoutSeconds',
      'agentId',
      'tenant',
      'priority',
      'metadata',
      'sessionKey',
      'onBudget',
      'rerunOf',
      'generation',
    );
    if (plan === null) return null;
    return {
      agentId: agentId ?? 'main',
      tenant: tenant ?? DEFAULT_TENANT,
      priority: priority === null ? DEFAULT_PRIORITY : Number(priority),
      metadata: parseJson(metadata) as Record<string, unknown> | null,
      sessionKey: sessionKey ?? null,
      plan: parseJson(plan) as ExecutableGraph,
      input: parseJson(input),
      timeoutSeconds: Number(timeoutSeconds),
      onBudget: onBudget === 'pause' ? 'pause' : 'fail',
      reusesSnapshots: rerunOf !== null,
      generation: Number(generation ?? 0),
    };
  }

  /** The run's budget now (a budget decision may have raised it since a node began). */
  async budget(runId: string): Promise<Budget> {
    const raw = await this.redis.hget(runKeys(this.options.prefix, runId).meta, 'budget');
    return Budget.parse(parseJson(raw) ?? {});
  }

  /**
   * Moves a queued run to running and marks `ready` queued. Returns its status after (or `stale`)
   * and its deadline, which a replanned run keeps from before.
   */
  async start(
    runId: string,
    generation: number,
    ready: readonly string[],
    deadlineAt: number,
    now: string,
  ): Promise<{ status: RunStatus | 'stale' | null; deadlineAt: number }> {
    const [status, deadline] = (await this.script('start-run-6', this.keys(runId), [
      now,
      deadlineAt,
      generation,
      JSON.stringify({ status: 'queued' } satisfies LiveNodeState),
      ...ready,
    ])) as [string | null, string | undefined];
    const at = deadline ? Number(deadline) : deadlineAt;
    if (status !== 'queued' && status !== 'stale') await this.unqueue(runId);
    if (status === 'stale') return { status: 'stale', deadlineAt: at };
    return { status: status ? RunStatus.parse(status) : null, deadlineAt: at };
  }

  /** The task of a task run (null for a fixed graph), and whether it has been planned. */
  async taskOf(runId: string): Promise<TaskState | null> {
    return (await this.header(runId)).task;
  }

  /**
   * What the plan loop reads before starting a run, in one round trip: its status, its session and
   * its task (the plan itself is only checked for, not read).
   */
  async header(runId: string): Promise<RunHeader> {
    const meta = runKeys(this.options.prefix, runId).meta;
    const replies = await slotMulti(this.redis)
      .hmget(
        meta,
        'status',
        'sessionKey',
        'task',
        'agentId',
        'overrides',
        'maxReplans',
        'replan',
        'mode',
        'tenant',
        'parentRunId',
        'taskModel',
        'thinking',
        'window',
        'secrets',
      )
      .hexists(meta, 'plan')
      .exec();
    const [fields, hasPlan] = multiReplies(replies) as [(string | null)[], number];
    const [
      status,
      sessionKey,
      task,
      agentId,
      overrides,
      maxReplans,
      replan,
      mode,
      tenant,
      parentRunId,
      taskModel,
      thinking,
      size,
      secrets,
    ] = fields;
    return {
      status: status ? RunStatus.parse(status) : null,
      tenant: tenant ?? DEFAULT_TENANT,
      parentRunId: parentRunId ?? null,
      sessionKey: sessionKey ?? null,
      agentId: agentId ?? 'main',
      task:
        task === null || task === undefined
          ? null
          : {
              task,
              mode: taskMode(mode),
              agentId: agentId ?? 'main',
              tenant: tenant ?? DEFAULT_TENANT,
              ...(overrides ? { overrides } : {}),
              ...(taskModel ? { model: taskModel } : {}),
              ...(thinking ? { thinking: parseJson(thinking) } : {}),
              ...(secrets ? { secrets: stringList(parseJson(secrets)) } : {}),
              maxReplans: Number(maxReplans ?? 0),
              ...(size ? { window: { size: Number(size), maxWindows: Number(maxReplans ?? 0) + 1 } } : {}),
              planned: hasPlan === 1,
              replanRequest: parseJson(replan),
            },
    };
  }

  /**
   * What settling a run needs, in one round trip: its snapshots, status, error, creation time,
   * session and whether a replan was requested.
   */
  async outcomeState(runId: string): Promise<OutcomeState> {
    const k = runKeys(this.options.prefix, runId);
    const replies = await slotMulti(this.redis)
      .hgetall(k.nodes)
      .hmget(k.meta, 'status', 'error', 'createdAt', 'sessionKey', 'replan', 'mode')
      .exec();
    const [nodes, fields] = multiReplies(replies) as [Record<string, string>, (string | null)[]];
    const [status, error, createdAt, sessionKey, replan, mode] = fields;
    return {
      snapshots: new Map(Object.entries(nodes).map(([id, raw]) => [id, JSON.parse(raw) as NodeSnapshot])),
      status: status ? RunStatus.parse(status) : null,
      error: error ? RunError.parse(JSON.parse(error)) : null,
      createdAt: createdAt ?? null,
      sessionKey: sessionKey ?? null,
      replanRequested: replan !== null && replan !== undefined,
      // Only a task run has a mode.
      mode: mode === null || mode === undefined ? null : taskMode(mode),
    };
  }

  /**
   * Stores a task run's first plan; false when it already has one. `cache`: the plan cache entry
   * the plan came from or was stored in (its key and the run it names), kept with the run.
   */
  async setPlan(
    runId: string,
    plan: { graph: Graph; plan: ExecutableGraph; pending: ReadonlyMap<string, number> },
    planning: PlanningRecord,
    charge: UsageCharge,
    cache?: { key: string; runId: string },
  ): Promise<boolean> {
    const stored = await this.script('set-plan-6', this.keys(runId), [
      ...planArgs(plan, planning, charge),
      cache?.key ?? '',
      cache?.runId ?? '',
    ]);
    return stored === 1;
  }

  /**
   * What planning a window-mode run's next window reads, in one round trip: the graph so far, the
   * current planning record (its windows) and the usage counters a replan restarts, which the next
   * window carries over so the run's budget holds across windows.
   */
  async windowState(runId: string): Promise<WindowState> {
    const k = runKeys(this.options.prefix, runId);
    const replies = await slotMulti(this.redis)
      .hmget(k.meta, 'graph', 'planning')
      .hmget(k.aux, ...REPLAN_COUNTERS.map((c) => `usage:${c}`))
      .exec();
    const [[graph, planning], counters] = multiReplies(replies) as [(string | null)[], (string | null)[]];
    return {
      graph: (parseJson(graph) as Graph | null) ?? { nodes: [], edges: [] },
      planning: parseJson(planning) as PlanningRecord | null,
      usage: Object.fromEntries(
        REPLAN_COUNTERS.map((c, i) => [c, Number(counters[i] ?? 0)]),
      ) as WindowState['usage'],
    };
  }

  /** The plan cache entry a run's first plan came from or was stored in, if any. */
  async planCacheRef(runId: string): Promise<{ key: string; runId: string } | null> {
    const [key, from] = await this.redis.hmget(
      runKeys(this.options.prefix, runId).meta,
      'planCacheKey',
      'planCacheFrom',
    );
    return key && from ? { key, runId: from } : null;
  }

  /** Charges usage that belongs to no node, with an optional event. */
  async charge(runId: string, charge: UsageCharge, event?: { type: string; data: unknown }): Promise<void> {
    await this.script('charge-6', this.keys(runId), [
      chargeJson(charge),
      event?.type ?? '',
      event ? JSON.stringify(event.data) : '',
    ]);
  }

  /**
   * Hands a running task run back to the plan loop; false when it cannot be replanned. A window
   * run whose window drained asks for its next window the same way (`window_drained`).
   */
  async requestReplan(
    runId: string,
    failure: RunError | { code: 'window_drained'; message: string },
    generation: number,
  ): Promise<boolean> {
    const requested = await this.script('request-replan-6', this.keys(runId), [
      JSON.stringify(failure),
      generation,
    ]);
    return requested === 1;
  }

  /** Installs a new plan after a requested replan. Returns the new generation, or 0. */
  async replan(
    runId: string,
    generation: number,
    plan: { graph: Graph; plan: ExecutableGraph; pending: ReadonlyMap<string, number> },
    planning: PlanningRecord,
    charge: UsageCharge,
    drop: readonly string[],
  ): Promise<number> {
    return (await this.script('replan-6', this.keys(runId), [
      ...planArgs(plan, planning, charge),
      generation,
      ...drop,
    ])) as number;
  }

  async beginNode(
    runId: string,
    nodeId: string,
    options: {
      generation: number;
      live: LiveNodeState;
      countExecution: boolean;
      chargeCall: boolean;
      reads: readonly string[];
    },
  ): Promise<BeginNodeResult> {
    const raw = (await this.script('begin-node-6', this.keys(runId), [
      nodeId,
      options.generation,
      JSON.stringify(options.live),
      options.countExecution ? '1' : '0',
      options.chargeCall ? '1' : '0',
      ...options.reads,
    ])) as unknown[];
    return beginResult(raw, options.reads);
  }

  /** Records a failed attempt that BullMQ will retry. */
  async recordAttempt(
    runId: string,
    nodeId: string,
    attempt: AttemptRecord,
    live: LiveNodeState,
  ): Promise<void> {
    await this.script('record-attempt-6', this.keys(runId), [
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
    await this.script('throttle-node-6', this.keys(runId), [
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
    const [iterations, toolCalls, toolTimeMs, tokens, costNanoUsd] = (await this.script(
      'record-iteration-6',
      this.keys(runId),
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
    },
  ): Promise<CompleteNodeResult> {
    const last = snapshot.attempts.at(-1);
    const event = {
      ...(options.tool ? { tool: options.tool } : {}),
      status: snapshot.status,
      attempts: snapshot.attempts.length,
      durationMs: snapshot.durationMs,
      ...(snapshot.error ? { error: snapshot.error } : {}),
      ...(last ? { worker: last.worker } : {}),
    };
    const raw = (await this.script('complete-node-6', this.keys(runId), [
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
            candidates: options.handoff.candidates.map((c) => ({
              id: c.id,
              charge: c.chargeCall,
              reads: c.reads,
            })),
          })
        : '',
      ...options.children,
    ])) as [number, string | null, number, string | null, unknown[] | null, string | null, ...string[]];
    const [written, status, generation, handedOff, begin, startedAt, ...ready] = raw;
    const candidate = handedOff ? options.handoff?.candidates.find((c) => c.id === handedOff) : undefined;
    return {
      written: written === 1,
      status: status ? RunStatus.parse(status) : null,
      generation,
      ready,
      ...(handedOff && begin && candidate && startedAt
        ? { handedOff: { nodeId: handedOff, begin: beginResult(begin, candidate.reads), startedAt } }
        : {}),
    };
  }

  /**
   * Sets the run's outcome if none is set yet; true when this call decided it. An outcome other
   * than succeeded also cancels the run's child runs (loop iterations over nested graphs), and
   * theirs, since they only exist to serve it.
   */
  async decide(
    runId: string,
    status: RunStatus,
    error: RunError | null,
    now: string,
    generation?: number,
  ): Promise<boolean> {
    return (await this.decideOutcome(runId, status, error, now, generation)).decided;
  }

  /**
   * Ends the run with `error` unless an outcome is set, with the status its code ends a run with
   * (`RUN_ERROR_STATUS`); true when this call decided it.
   */
  async decideError(runId: string, error: RunError, now: string, generation?: number): Promise<boolean> {
    return this.decide(runId, RUN_ERROR_STATUS[error.code], error, now, generation);
  }

  /** {@link decide}, also answering the run's status after it (null for an unknown run). */
  async decideOutcome(
    runId: string,
    status: RunStatus,
    error: RunError | null,
    now: string,
    generation?: number,
  ): Promise<{ decided: boolean; status: RunStatus | null }> {
    const [decided, children, current] = (await this.script('decide-run-6', this.keys(runId), [
      status,
      error ? JSON.stringify(error) : '',
      this.channels.abort,
      runId,
      now,
      generation ?? '',
    ])) as [number, string | null, string | null];
    const after = current ? RunStatus.parse(current) : null;
    if (children && after !== null && after !== 'succeeded' && after !== 'running' && after !== 'queued') {
      const parentEnded: RunError = {
        code: 'parent_ended',
        message: `the parent run ${runId} ended as ${after}`,
      };
      for (const child of JSON.parse(children) as string[]) await this.decideError(child, parentEnded, now);
    }
    return { decided: decided === 1, status: after };
  }

  /**
   * Ends a run none of whose nodes ran, in one step: unless an outcome is set, decides it with
   * `error` (the status its code ends a run with); then gives every node of its plan a snapshot
   * and settles it. With `error` null it only settles a run already decided. A running run is left
   * alone: its nodes may have run. Answers whether this call settled it and the run's status after
   * it (null for an unknown run).
   */
  async endUnstarted(
    runId: string,
    error: RunError | null,
    now: string,
  ): Promise<{ settled: boolean; status: RunStatus | null }> {
    const [settled, after] = (await this.script('end-unstarted-6', this.keys(runId), [
      error ? RUN_ERROR_STATUS[error.code] : '',
      error ? JSON.stringify(error) : '',
      now,
      this.channels.abort,
      this.channels.settled,
      runId,
      this.options.retentionSeconds,
    ])) as [number, string | null];
    if (after === null || isTerminal(RunStatus.parse(after))) await this.unqueue(runId);
    return { settled: settled === 1, status: after ? RunStatus.parse(after) : null };
  }

  /** The queue shard recorded for a run (a child run of sharded queues), or null. */
  async queueShard(runId: string): Promise<number | null> {
    const shard = await this.redis.hget(this.keys(runId)[0]!, 'shard');
    return shard === null ? null : Number(shard);
  }

  /** Records `childRunId` as serving `runId`, so ending the parent ends it. */
  async addChild(runId: string, childRunId: string): Promise<void> {
    await this.script('add-child-6', this.keys(runId), [childRunId]);
  }

  /** Nodes whose jobs sit in the delayed set: waiting for a signal or in retry backoff. */
  async parkedNodes(runId: string, statuses: readonly string[] = ['waiting', 'retrying']): Promise<string[]> {
    const live = await this.redis.hgetall(runKeys(this.options.prefix, runId).live);
    return Object.entries(live)
      .filter(([, state]) => statuses.includes((JSON.parse(state) as { status?: string }).status ?? ''))
      .map(([id]) => id);
  }

  /** The snapshots of these nodes that exist. */
  async snapshotsOf(runId: string, nodeIds: readonly string[]): Promise<Map<string, NodeSnapshot>> {
    if (nodeIds.length === 0) return new Map();
    const raw = await this.redis.hmget(runKeys(this.options.prefix, runId).nodes, ...nodeIds);
    return new Map(
      nodeIds.flatMap((id, i) => (raw[i] ? [[id, JSON.parse(raw[i]) as NodeSnapshot] as const] : [])),
    );
  }

  /** All snapshots written so far. */
  async snapshots(runId: string): Promise<Map<string, NodeSnapshot>> {
    const raw = await this.redis.hgetall(runKeys(this.options.prefix, runId).nodes);
    return new Map(Object.entries(raw).map(([id, s]) => [id, JSON.parse(s) as NodeSnapshot]));
  }

  /** Closes a run: fills in snapshots for nodes that never ran, stores the output, sets TTLs. */
  async settle(
    runId: string,
    generation: number,
    fill: ReadonlyMap<string, NodeSnapshot>,
    output: Record<string, unknown> | null,
    final: { status: RunStatus; error: RunError | null; generation: number },
    now: string,
  ): Promise<boolean> {
    const triples = [...fill].flatMap(([id, s]) => [id, snapshotJson(s), `node.${s.status}`]);
    const settled = await this.script('settle-run-6', this.keys(runId), [
      now,
      output ? JSON.stringify(output) : '',
      this.options.retentionSeconds,
      this.channels.settled,
      runId,
      generation,
      JSON.stringify(final),
      ...triples,
    ]);
    return settled === 1;
  }

  /**
   * Reopens a settled failed/timed_out run for the nodes in `rerun`, with `pending` as the new
   * readiness counters. Returns the new generation, or the status that prevented it.
   */
  async resume(
    runId: string,
    rerun: readonly string[],
    pending: ReadonlyMap<string, number>,
    timeoutSeconds: number,
  ): Promise<{ resumed: true; generation: number } | { resumed: false; status: string | null }> {
    const [status, generation] = (await this.script('resume-run-6', this.keys(runId), [
      JSON.stringify(Object.fromEntries([...pending].filter(([, n]) => n > 0))),
      this.safetyTtl(timeoutSeconds),
      ...rerun,
    ])) as [string | null, number | undefined];
    return status === 'queued' && generation !== undefined
      ? { resumed: true, generation }
      : { resumed: false, status };
  }

  /**
   * Delivers a signal if something may take it (see `signal-6.lua`): a wait that began and is not
   * over, or a wait node declaring the name with `acceptEarly`. Records `decision` with it.
   */
  async signal(
    runId: string,
    name: string,
    payload: unknown,
    decision: SignalDecision,
    maxPerRun: number,
    raise?: { readonly costUsd: number },
  ): Promise<SignalDelivery> {
    const result = (await this.script('signal-6', this.keys(runId), [
      name,
      JSON.stringify(payload ?? null),
      JSON.stringify(decision),
      maxPerRun,
      Date.now(),
      raise ? JSON.stringify(raise) : '',
    ])) as SignalDelivery;
    return result;
  }

  /**
   * One wait of a node: the signal's payload (if delivered), who decided it, its deadline (set on
   * the first call, which also registers the wait) and its signal name. `wait.nonce` makes it an
   * approval: its name is `wait.signal` followed by the nonce kept on the first call.
   */
  async waitState(
    runId: string,
    wait: WaitSpec,
    deadlineAt: number,
    live: LiveNodeState,
  ): Promise<WaitState> {
    const [payload, deadline, signal, decision] = (await this.script('wait-state-6', this.keys(runId), [
      wait.nodeId,
      wait.key ?? wait.nodeId,
      wait.signal,
      wait.nonce ?? '',
      deadlineAt,
      new Date(deadlineAt).toISOString(),
      JSON.stringify(live),
      JSON.stringify({
        since: new Date().toISOString(),
        ...(wait.approval ? { approval: wait.approval } : {}),
        ...(wait.budget ? { budget: wait.budget } : {}),
      }),
    ])) as [string | null, number, string, string | null];
    return {
      payload: parseJson(payload),
      delivered: payload !== null,
      deadlineAt: deadline,
      signal,
      decidedBy: decision ? SignalDecision.parse(JSON.parse(decision)) : null,
    };
  }

  /** Appends an event that goes with no state change (streamed text, model usage). */
  async appendEvent(runId: string, type: string, nodeId: string | undefined, data: unknown): Promise<void> {
    await this.script('append-event-6', this.keys(runId), [
      type,
      nodeId ?? '',
      data === undefined ? '' : JSON.stringify(data),
    ]);
  }

  /** Events with seq > `afterSeq`, oldest first. */
  async events(runId: string, afterSeq: number, count = 1000): Promise<RunEvent[]> {
    const key = runKeys(this.options.prefix, runId).events;
    const entries = await this.redis.xrange(key, `(0-${afterSeq}`, '+', 'COUNT', count);
    return entries.map(([id, fields]) => toEvent(runId, id, fields));
  }

  /**
   * One `XREAD BLOCK` over several runs' event streams on `connection` (a dedicated one): the
   * events after each run's `afterSeq`, at most `count` per run, keyed by run; empty when `blockMs`
   * passed with none (or the read was unblocked).
   */
  async readEventStreams(
    connection: RedisClient,
    cursors: ReadonlyArray<{ readonly runId: string; readonly afterSeq: number }>,
    blockMs: number,
    count = 1000,
  ): Promise<Map<string, RunEvent[]>> {
    const found = new Map<string, RunEvent[]>();
    if (cursors.length === 0) return found;
    const runOf = new Map<string, string>();
    const keys = cursors.map(({ runId }) => {
      const key = runKeys(this.options.prefix, runId).events;
      runOf.set(key, runId);
      return key;
    });
    const ids = cursors.map(({ afterSeq }) => `0-${afterSeq}`);
    const result = isCluster(connection)
      ? await pollStreams(connection, keys, ids, blockMs, count)
      : await connection.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', ...keys, ...ids);
    for (const [key, entries] of result ?? []) {
      const runId = runOf.get(key);
      if (runId !== undefined)
        found.set(
          runId,
          entries.map(([id, fields]) => toEvent(runId, id, fields)),
        );
    }
    return found;
  }

  async document(runId: string): Promise<RunDocument | null> {
    const k = runKeys(this.options.prefix, runId);
    const replies = await slotMulti(this.redis)
      .hgetall(k.meta)
      .hgetall(k.nodes)
      .hgetall(k.live)
      .hgetall(k.aux)
      .exec();
    type Hash = Record<string, string>;
    const [meta, snapshots, live, aux] = multiReplies(replies) as [Hash, Hash, Hash, Hash];
    if (!meta.status) return null;
    const plan = (parseJson(meta.plan) as ExecutableGraph | null) ?? { nodes: [], edges: [] };
    const nodes: Record<string, NodeView> = {};
    for (const node of plan.nodes) {
      const snapshot = snapshots[node.id];
      const state = live[node.id];
      const attempts = (parseJson(aux[`attempts:${node.id}`]) as AttemptRecord[] | null) ?? [];
      const waitsRaw = aux[`waits:${node.id}`];
      const waits = waitsRaw ? { waits: WaitRecord.array().parse(JSON.parse(waitsRaw)) } : {};
      const throttledMs = Number(aux[`throttled:${node.id}`] ?? 0);
      const extra = { ...waits, ...(throttledMs > 0 ? { throttledMs } : {}) };
      nodes[node.id] = snapshot
        ? { id: node.id, ...NodeSnapshot.parse(JSON.parse(snapshot)), ...extra }
        : state
          ? { id: node.id, ...LiveNodeState.parse(JSON.parse(state)), attempts, ...extra }
          : { id: node.id, status: 'pending', attempts, ...extra };
    }
    return {
      runId,
      status: RunStatus.parse(meta.status),
      createdAt: meta.createdAt ?? '',
      startedAt: meta.startedAt ?? null,
      finishedAt: meta.finishedAt ?? null,
      graph: parseJson(meta.graph) as Graph | null,
      task: meta.task ?? null,
      model: meta.taskModel ?? null,
      thinking: meta.thinking ? Thinking.parse(JSON.parse(meta.thinking)) : null,
      agentId: meta.agentId ?? 'main',
      tenant: meta.tenant ?? DEFAULT_TENANT,
      sessionKey: meta.sessionKey ?? null,
      lanePosition: null,
      planning: parseJson(meta.planning) as PlanningRecord | null,
      replans: Number(meta.replans ?? 0),
      input: parseJson(meta.input),
      timeoutSeconds: Number(meta.timeoutSeconds),
      budget: Budget.parse(parseJson(meta.budget) ?? {}),
      onBudget: meta.onBudget === 'pause' ? 'pause' : 'fail',
      usage: usageOf(aux),
      generation: Number(meta.generation ?? 0),
      metadata: parseJson(meta.metadata) as Record<string, unknown> | null,
      priority: meta.priority === undefined ? DEFAULT_PRIORITY : Number(meta.priority),
      tags: (parseJson(meta.tags) as string[] | null) ?? [],
      rerunOf: parseJson(meta.rerunOf) as RerunOf | null,
      configVersion: meta.configVersion ?? null,
      // Its deliveries are kept with the tenant's webhooks: the run service adds them.
      webhook: meta.webhook ? { ...RunWebhook.parse(JSON.parse(meta.webhook)), deliveries: [] } : null,
      nodes,
      output: parseJson(meta.output) as Record<string, unknown> | null,
      error: meta.error ? RunError.parse(JSON.parse(meta.error)) : null,
    };
  }
}

/** The usage counters of a run's aux hash (`usage:<name>`). */
const USAGE_COUNTERS = [
  'toolCalls',
  'toolTimeMs',
  'promptTokens',
  'completionTokens',
  'modelCalls',
  'costNanoUsd',
  'unpricedModelCalls',
] as const;

const usageOf = (aux: Record<string, string>): RunDocument['usage'] =>
  usageFromCounters((field) => Number(aux[field] ?? 0));

function toEvent(runId: string, id: string, fields: string[]): RunEvent {
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]!] = fields[i + 1]!;
  const data = f.data ? (JSON.parse(f.data) as unknown) : undefined;
  const type = f.type ?? '';
  const event: RunEvent = {
    seq: Number(id.split('-')[1]),
    type,
    ...familyOf(type, data),
    ts: Number(f.ts),
    runId,
  };
  if (f.node) event.nodeId = f.node;
  if (data !== undefined) event.data = data;
  return event;
}

/** How long a read of several runs' streams on a Redis Cluster waits between polls. */
const CLUSTER_POLL_MS = 50;

/**
 * `XREAD` of several runs' streams on a Redis Cluster, where one `XREAD` names keys of one slot
 * only and each run's stream has its own: a non-blocking `XREAD` per stream, sent together, again
 * every `CLUSTER_POLL_MS` until one has entries or `blockMs` has passed.
 */
async function pollStreams(
  connection: RedisClient,
  keys: readonly string[],
  ids: readonly string[],
  blockMs: number,
  count: number,
): Promise<[string, [string, string[]][]][] | null> {
  const deadline = Date.now() + blockMs;
  for (;;) {
    const replies = await Promise.all(
      keys.map((key, i) => connection.xread('COUNT', count, 'STREAMS', key, ids[i]!)),
    );
    const found = replies.flatMap((r) => r ?? []);
    if (found.length > 0) return found;
    const left = deadline - Date.now();
    if (left <= 0) return null;
    await new Promise((resolve) => setTimeout(resolve, Math.min(CLUSTER_POLL_MS, left)));
  }
}

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
