/**
 * A new run: its record, readiness counters and (for a rerun) the origin's snapshots it reuses,
 * written by `create-run-6.lua` in one step, with the indexes that find it (the queued runs the
 * reconciler reads, the tenant's runs and, for a listed run, its search indexes).
 */
import { isCluster } from '../redis-client.js';
import {
  DEFAULT_MAX_WAIT_DAYS,
  maxRunSeconds,
  RunStatus,
  type Budget,
  type NodeSnapshot,
  type OnBudget,
  type RerunOf,
  type RunOrigin,
  type TaskSpec,
} from '../../domain/run-model.js';
import type { ExecutableGraph, Graph } from '../../nodes/index.js';
import { DEFAULT_TENANT } from '../../domain/tenant.js';
import type { RunWebhook } from '../../domain/webhook.js';
import { DEFAULT_PRIORITY } from '../../flow/limits.js';
import { queuedRunsKey, runSearchKeys, tenantRunsKey } from '../keys.js';
import { slotMulti } from '../slot-multi.js';
import { pendingJson, snapshotJson, type RunContext } from './run-context.js';
import { traceCarrier } from '../../telemetry/tracing.js';
import type { SkillsRecord } from '../../workspace/skills.js';

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
  /** The steering messages the run starts with (`aux.steer`), for an agent's first turn. */
  readonly steering?: readonly string[];
  /** The skills an agent run's prompt was made with (a session run's is made before it is stored). */
  readonly skills?: SkillsRecord;
  readonly input: unknown;
  readonly timeoutSeconds: number;
  readonly budget: Budget;
  /** What a spent money budget does. @defaultValue "fail" */
  readonly onBudget?: OnBudget;
  readonly metadata: Record<string, unknown> | undefined;
  /** @defaultValue DEFAULT_PRIORITY */
  readonly priority?: number;
  /** How many of the run's node jobs may run at once; no cap when unset. */
  readonly maxParallelNodes?: number;
  /** Labels to find the run by (its search indexes). */
  readonly tags?: readonly string[];
  /** What started the run when no API call did: a schedule, or a trigger and its events. */
  readonly origin?: RunOrigin;
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

export interface CreateResult {
  /** False when a run with this id existed: nothing was written. */
  readonly created: boolean;
  /** The run's status now (`queued` when just created). */
  readonly status: RunStatus;
  /** When the run was accepted (its first request's time). */
  readonly createdAt: string;
}

export class RunCreation {
  constructor(private readonly ctx: RunContext) {}

  /**
   * Stores a new run, queued, unless a run with its id exists: then nothing changes and the
   * existing run's status and acceptance time are answered (`created: false`). Safe to repeat.
   * The run is put on the index of queued runs in the same step (one Redis) or first (a cluster),
   * so no crash leaves a stored run the reconciler cannot find; an entry whose run was never stored
   * is dropped by the reconciler.
   */
  async create(run: NewRun): Promise<CreateResult> {
    const { redis, options } = this.ctx;
    const meta = recordOf(run, options);
    const created = Date.parse(run.createdAt);
    // Listed runs (not child runs: they are found through their parent) name their tenant's search
    // indexes, which the run scripts keep (run.lib.lua).
    const keepSeconds =
      (options.maxRunSeconds ?? maxRunSeconds(DEFAULT_MAX_WAIT_DAYS)) + options.retentionSeconds;
    const keepMs = keepSeconds * 1000;
    // The create script's payload: the record, then what the script writes beside it (`index`,
    // `_lists`, `_steer`), added to the same object.
    const payload: Record<string, unknown> = meta;
    if (!run.parentRunId) {
      payload.index = JSON.stringify({
        base: runSearchKeys(options.prefix, meta.tenant).base,
        id: run.runId,
        score: created,
        keepMs,
      });
    }
    // The index of queued runs feeds the reconciler; the tenant's index of runs is trimmed of runs
    // past any retention (a run lives at most its deadline plus the retention), so it stays as large
    // as the runs that can still exist. On one Redis the create script writes both in the same step
    // as the run (`_lists`): no MULTI, no round trip of their own, and never a run without them. On a
    // cluster they are in other slots: written first, in one round trip (NX keeps a repeat's first
    // time), and the create waits for them; the reconciler drops an entry whose run was never made.
    const runs = tenantRunsKey(options.prefix, meta.tenant);
    const cluster = isCluster(redis);
    if (cluster) {
      await slotMulti(redis)
        .zadd(queuedRunsKey(options.prefix), 'NX', created, run.runId)
        .zadd(runs, 'NX', created, run.runId)
        .zremrangebyscore(runs, '-inf', created - keepMs)
        .expire(runs, keepSeconds)
        .exec();
    } else {
      payload._lists = {
        queued: queuedRunsKey(options.prefix),
        runs,
        id: run.runId,
        score: created,
        keepMs,
        ttl: keepSeconds,
      };
    }
    const reused = [...(run.rerun?.reused ?? [])].flatMap(([id, snapshot]) => [
      id,
      snapshotJson({ ...snapshot, reusedFrom: run.rerun!.of.runId }),
    ]);
    // Written to `aux`, not the hash, by the create script, in the same step as the run.
    if (run.steering?.length) payload._steer = JSON.stringify(run.steering);
    const reply = await this.ctx.script('create-run-6', this.ctx.scriptKeys(run.runId), [
      JSON.stringify(payload),
      pendingJson(run.pending),
      // A session run may wait in its lane behind a run that waits for weeks before it starts.
      run.sessionKey ? this.ctx.laneSafetyTtl() : this.ctx.safetyTtl(run.timeoutSeconds),
      run.rerun?.of.runId ?? '',
      ...reused,
    ]);
    const [made, status, createdAt] = reply as [number, string | null | undefined, string | null | undefined];
    const acceptedAt = made === 1 ? run.createdAt : (createdAt ?? run.createdAt);
    if (made === 1) return { created: true, status: 'queued', createdAt: run.createdAt };
    return { created: false, status: RunStatus.parse(status ?? 'queued'), createdAt: acceptedAt };
  }
}

/**
 * The fields of a new run's record (its `meta` hash), each a string. Set one by one rather than
 * spread from optional parts: it is built on every accept, and the hash does not keep an order.
 */
function recordOf(run: NewRun, options: RunContext['options']): Record<string, string> & { tenant: string } {
  const record: Record<string, string> & { tenant: string } = {
    status: 'queued' satisfies RunStatus,
    createdAt: run.createdAt,
    agentId: run.task?.agentId ?? run.agentId ?? 'main',
    tenant: run.tenant ?? DEFAULT_TENANT,
    input: JSON.stringify(run.input ?? null),
    timeoutSeconds: String(run.timeoutSeconds),
    budget: JSON.stringify(run.budget),
    metadata: JSON.stringify(run.metadata ?? null),
    priority: String(run.priority ?? DEFAULT_PRIORITY),
    generation: '0',
    eventsMax: String(options.eventsMax ?? 10_000),
  };
  if (run.graph && run.plan) {
    record.graph = JSON.stringify(run.graph);
    record.plan = JSON.stringify(run.plan);
  }
  const { task } = run;
  if (task) {
    record.task = task.task;
    record.mode = task.mode ?? 'dag';
    record.maxReplans = String(task.maxReplans);
    // Window mode's size; its window bound is `maxReplans + 1`.
    if (task.window) record.window = String(task.window.size);
    if (task.window?.cycleBudgetMs) record.cycleBudgetMs = String(task.window.cycleBudgetMs);
    if (task.overrides) record.overrides = task.overrides;
    if (task.model !== undefined) record.taskModel = task.model;
    if (task.thinking !== undefined) record.thinking = JSON.stringify(task.thinking);
    if (task.secrets?.length) record.secrets = JSON.stringify(task.secrets);
    if (task.maxIterations !== undefined) record.maxIterations = String(task.maxIterations);
  }
  if (run.parentRunId) record.parentRunId = run.parentRunId;
  if (run.queueShard !== undefined) record.shard = String(run.queueShard);
  if (run.sessionKey) record.sessionKey = run.sessionKey;
  if (run.skills) record.skills = JSON.stringify(run.skills);
  if (run.onBudget === 'pause') record.onBudget = run.onBudget;
  if (run.maxParallelNodes) record.maxParallelNodes = String(run.maxParallelNodes);
  if (run.tags && run.tags.length > 0) record.tags = JSON.stringify(run.tags);
  if (run.plan) record.nodeCount = String(run.plan.nodes.length);
  if (run.rerun) record.rerunOf = JSON.stringify(run.rerun.of);
  if (run.origin?.scheduleId) record.scheduleId = run.origin.scheduleId;
  if (run.origin?.triggerId) record.triggerId = run.origin.triggerId;
  if (run.origin?.eventIds?.length) record.eventIds = JSON.stringify(run.origin.eventIds);
  if (run.webhook) record.webhook = JSON.stringify(run.webhook);
  if (options.configVersion) record.configVersion = options.configVersion;
  const traced = traceCarrier();
  // The trace the run is created in (the request's, or the job's that made it), when traced: the
  // trace of the run's `invoke_agent` span and that span's parent (see telemetry/run-span.ts).
  if (traced.trace) record.trace = JSON.stringify(traced.trace);
  return record;
}
