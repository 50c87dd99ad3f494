/**
 * Reads of a run for those who look at it rather than move it: the whole document (`GET
 * /v1/runs/:id`), the header the plan loop starts from, what settling reads, what a webhook event
 * is made of, who the run belongs to, and the runs of a tenant. Each read is one round trip.
 */
import {
  Budget,
  LiveNodeState,
  NodeSnapshot,
  RunError,
  RunStatus,
  SkillsRecord,
  WaitRecord,
  type AttemptRecord,
  type MapProgress,
  type NodeView,
  type PlanningRecord,
  type RerunOf,
  type RunDocument,
  type TaskMode,
  type TaskSpec,
} from '../../domain/run-model.js';
import type { ExecutableGraph, Graph } from '../../nodes/index.js';
import { usageFromCounters } from '../../insight/run-search.js';
import { Thinking } from '../../domain/thinking.js';
import { DEFAULT_TENANT } from '../../domain/tenant.js';
import { RunWebhook } from '../../domain/webhook.js';
import { DEFAULT_PRIORITY } from '../../flow/limits.js';
import { tenantRunsKey } from '../keys.js';
import { slotMulti } from '../slot-multi.js';
import { TraceCarrier } from '../../telemetry/tracing.js';
import type { RunTraceFacts } from '../../telemetry/run-span.js';
import { parseMapState } from './map-items.js';
import { multiReplies, parseJson, type RunContext } from './run-context.js';

/** A map node's progress in the run document: its state without the concurrency. */
const mapProgress = (raw: string): MapProgress => {
  const { done, failed, running, total } = parseMapState(raw);
  return { done, failed, running, total };
};

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

/** What {@link RunReadModel.summaryFacts} reads: the document's fields a run's memory summary uses. */
export type RunSummaryFacts = Pick<
  RunDocument,
  | 'runId'
  | 'status'
  | 'createdAt'
  | 'finishedAt'
  | 'graph'
  | 'task'
  | 'agentId'
  | 'tenant'
  | 'planning'
  | 'metadata'
  | 'usage'
  | 'error'
> & { readonly nodes: Record<string, { readonly attempts: readonly AttemptRecord[] }> };

/** The run hash's fields {@link RunSummaryFacts} is made of. */
const SUMMARY_FIELDS = [
  'status',
  'createdAt',
  'finishedAt',
  'graph',
  'task',
  'agentId',
  'tenant',
  'planning',
  'metadata',
  'error',
] as const;

export interface OutcomeState {
  readonly snapshots: Map<string, NodeSnapshot>;
  readonly status: RunStatus | null;
  readonly error: RunError | null;
  readonly createdAt: string | null;
  readonly sessionKey: string | null;
  readonly replanRequested: boolean;
  /** A task run's mode (null for a fixed graph): a window-mode run's drained window asks for the next. */
  readonly mode: TaskMode | null;
  /** Whether the run has a `webhook` of its own: without one, only its tenant's subscriptions hear of it. */
  readonly hasWebhook: boolean;
}

/** Whether a run has settled, and what a pass that finds it settled needs (see `settleFacts`). */
export interface SettleFacts {
  /** Null for an unknown run. */
  readonly status: RunStatus | null;
  readonly settled: boolean;
  readonly sessionKey: string | null;
  readonly hasWebhook: boolean;
  /** The node job that settled it got through what follows (`markFollowedUp`). */
  readonly followedUp: boolean;
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

/** The fields of an `HMGET` answer that are set, by name (`names`: the fields asked for, in order). */
function setFields(names: readonly string[], values: readonly (string | null)[]): Record<string, string> {
  const fields: Record<string, string> = {};
  names.forEach((name, i) => {
    const value = values[i];
    if (value !== null && value !== undefined) fields[name] = value;
  });
  return fields;
}

/** The aux fields `usageOf` reads. */
const USAGE_FIELDS: readonly string[] = (() => {
  const fields = new Set<string>();
  usageFromCounters((field) => (fields.add(field), 0));
  return [...fields];
})();

const taskMode = (mode: string | null | undefined): TaskMode =>
  mode === 'loop' || mode === 'window' ? mode : 'dag';

/** The strings of a stored JSON array (anything else: none). */
const stringList = (value: unknown): string[] =>
  Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];

export class RunReadModel {
  constructor(private readonly ctx: RunContext) {}

  /**
   * `HMGET` of each key's fields, in one `MULTI` (one round trip; the keys of one run share its
   * slot): each answer, in order. A list of fields may not be empty (`HMGET` needs one).
   */
  private async hmgets<R extends readonly (readonly [key: string, fields: readonly string[]])[]>(
    ...reads: R
  ): Promise<{ [I in keyof R]: (string | null)[] }> {
    const multi = slotMulti(this.ctx.redis);
    for (const [key, fields] of reads) multi.hmget(key, ...fields);
    return multiReplies(await multi.exec()) as { [I in keyof R]: (string | null)[] };
  }

  /** The ids of a tenant's runs that may still exist (their keys may have expired since). */
  async tenantRuns(tenant: string): Promise<string[]> {
    return this.ctx.redis.zrange(tenantRunsKey(this.ctx.options.prefix, tenant), '0', '-1');
  }

  /** The tenant a run belongs to, or null for an unknown run. */
  async tenantOf(runId: string): Promise<string | null> {
    const [status, tenant] = await this.ctx.redis.hmget(this.ctx.keysOf(runId).meta, 'status', 'tenant');
    return status === null ? null : (tenant ?? DEFAULT_TENANT);
  }

  /** The session of a session run. */
  async sessionOf(runId: string): Promise<string | null> {
    return this.ctx.redis.hget(this.ctx.keysOf(runId).meta, 'sessionKey');
  }

  /** The queue shard recorded for a run (a child run of sharded queues), or null. */
  async queueShard(runId: string): Promise<number | null> {
    const shard = await this.ctx.redis.hget(this.ctx.keysOf(runId).meta, 'shard');
    return shard === null ? null : Number(shard);
  }

  /** The run's budget now (a budget decision may have raised it since a node began). */
  async budget(runId: string): Promise<Budget> {
    const raw = await this.ctx.redis.hget(this.ctx.keysOf(runId).meta, 'budget');
    return Budget.parse(parseJson(raw) ?? {});
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
    const meta = this.ctx.keysOf(runId).meta;
    const replies = await slotMulti(this.ctx.redis)
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
        'cycleBudgetMs',
        'maxIterations',
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
      cycleBudgetMs,
      maxIterations,
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
              ...(maxIterations ? { maxIterations: Number(maxIterations) } : {}),
              maxReplans: Number(maxReplans ?? 0),
              ...(size
                ? {
                    window: {
                      size: Number(size),
                      maxWindows: Number(maxReplans ?? 0) + 1,
                      ...(cycleBudgetMs ? { cycleBudgetMs: Number(cycleBudgetMs) } : {}),
                    },
                  }
                : {}),
              planned: hasPlan === 1,
              replanRequest: parseJson(replan),
            },
    };
  }

  /**
   * What settling a run needs, in one round trip: its snapshots, status, error, creation time,
   * session, whether a replan was requested and whether it has a webhook of its own.
   */
  async outcomeState(runId: string): Promise<OutcomeState> {
    const k = this.ctx.keysOf(runId);
    const replies = await slotMulti(this.ctx.redis)
      .hgetall(k.nodes)
      .hmget(k.meta, 'status', 'error', 'createdAt', 'sessionKey', 'replan', 'mode', 'webhook')
      .exec();
    const [nodes, fields] = multiReplies(replies) as [Record<string, string>, (string | null)[]];
    const [status, error, createdAt, sessionKey, replan, mode, webhook] = fields;
    return {
      snapshots: new Map(Object.entries(nodes).map(([id, raw]) => [id, JSON.parse(raw) as NodeSnapshot])),
      status: status ? RunStatus.parse(status) : null,
      error: error ? RunError.parse(JSON.parse(error)) : null,
      createdAt: createdAt ?? null,
      sessionKey: sessionKey ?? null,
      replanRequested: replan !== null && replan !== undefined,
      // Only a task run has a mode.
      mode: mode === null || mode === undefined ? null : taskMode(mode),
      hasWebhook: webhook !== null && webhook !== undefined,
    };
  }

  /**
   * Whether the run has settled, with its session and whether it has a webhook of its own, in one
   * read: a root job's finalize pass that finds its run settled (by the node job whose completion
   * decided it) reads nothing more.
   */
  async settleFacts(runId: string): Promise<SettleFacts> {
    const [status, finishedAt, sessionKey, webhook, followedUp] = await this.ctx.redis.hmget(
      this.ctx.keysOf(runId).meta,
      'status',
      'finishedAt',
      'sessionKey',
      'webhook',
      'followedUp',
    );
    return {
      status: status ? RunStatus.parse(status) : null,
      settled: status !== null && finishedAt !== null,
      sessionKey: sessionKey ?? null,
      hasWebhook: webhook !== null,
      followedUp: followedUp !== null,
    };
  }

  /** What the run's `invoke_agent` span is made from; null for an unknown run. */
  async traceFacts(runId: string): Promise<RunTraceFacts | null> {
    const fields = await this.ctx.redis.hmget(
      this.ctx.keysOf(runId).meta,
      'status',
      'agentId',
      'sessionKey',
      'createdAt',
      'trace',
      'error',
    );
    const [status, agentId, sessionKey, createdAt, trace, error] = fields;
    if (!status) return null;
    const created = TraceCarrier.safeParse(parseJson(trace));
    return {
      status: RunStatus.parse(status),
      agentId: agentId ?? 'main',
      sessionKey: sessionKey ?? null,
      createdAt: createdAt ?? '',
      created: created.success ? created.data : null,
      error: error ? RunError.parse(JSON.parse(error)) : null,
    };
  }

  /**
   * What a webhook event of the run is made from: who it belongs to, its own `webhook`, and, once
   * it has settled, its outcome, usage and output. Null for an unknown run.
   */
  async webhookSubject(runId: string): Promise<WebhookSubject | null> {
    const k = this.ctx.keysOf(runId);
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
    const [meta, usage] = await this.hmgets([k.meta, fields], [k.aux, usageFields]);
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

  /**
   * What a settled run's memory summary is made from (`memory/run-summary.ts`), in one round trip:
   * the few fields of its document it reads, and the attempts of `nodeIds` (its plan's nodes, which
   * the caller holds) from their snapshots. Lighter than {@link document}, which the plan loop would
   * otherwise read whole (every field, the live states, the attempts kept apart) and validate node
   * by node, once per run. Null for an unknown run.
   */
  async summaryFacts(runId: string, nodeIds: readonly string[]): Promise<RunSummaryFacts | null> {
    const k = this.ctx.keysOf(runId);
    const [metaList, snapshotList, usageList] = await this.hmgets(
      [k.meta, SUMMARY_FIELDS],
      [k.nodes, [...nodeIds, '']],
      [k.aux, USAGE_FIELDS],
    );
    const meta = setFields(SUMMARY_FIELDS, metaList);
    if (!meta.status) return null;
    const aux = setFields(USAGE_FIELDS, usageList);
    const nodes: RunSummaryFacts['nodes'] = {};
    nodeIds.forEach((id, i) => {
      const raw = snapshotList[i];
      // Written by the run's own scripts from a validated snapshot: read, not validated again.
      nodes[id] = { attempts: raw ? ((JSON.parse(raw) as NodeSnapshot).attempts ?? []) : [] };
    });
    return {
      runId,
      status: RunStatus.parse(meta.status),
      createdAt: meta.createdAt ?? '',
      finishedAt: meta.finishedAt ?? null,
      graph: parseJson(meta.graph) as Graph | null,
      task: meta.task ?? null,
      agentId: meta.agentId ?? 'main',
      tenant: meta.tenant ?? DEFAULT_TENANT,
      planning: parseJson(meta.planning) as PlanningRecord | null,
      metadata: parseJson(meta.metadata) as Record<string, unknown> | null,
      usage: usageOf(aux),
      error: meta.error ? RunError.parse(JSON.parse(meta.error)) : null,
      nodes,
    };
  }

  /**
   * The run as `GET /v1/runs/:id` shows it, every node of its plan with its state; null for an
   * unknown run. Two round trips: the run's hash, then only the fields of its plan's nodes, so a
   * map's items (their snapshots in `nodes`, their values in `aux`, thousands of them) are never
   * read for the document that shows the map as one node.
   */
  async document(runId: string): Promise<RunDocument | null> {
    const k = this.ctx.keysOf(runId);
    const meta = await this.ctx.redis.hgetall(k.meta);
    if (!meta.status) return null;
    const plan = (parseJson(meta.plan) as ExecutableGraph | null) ?? { nodes: [], edges: [] };
    const ids = plan.nodes.map((n) => n.id);
    const auxFields = [
      ...USAGE_FIELDS,
      ...ids.flatMap((id) => [`attempts:${id}`, `waits:${id}`, `throttled:${id}`]),
      // A map's counts (its items' state), read for map nodes only.
      ...plan.nodes.flatMap((n) => (n.kind === 'map' ? [`map:${n.id}`] : [])),
    ];
    const [snapshotList, liveList, auxList] = await this.hmgets(
      [k.nodes, [...ids, '']],
      [k.live, [...ids, '']],
      [k.aux, auxFields],
    );
    const aux = setFields(auxFields, auxList);
    const nodes: Record<string, NodeView> = {};
    plan.nodes.forEach((node, i) => {
      const snapshot = snapshotList[i];
      const state = liveList[i];
      const attempts = (parseJson(aux[`attempts:${node.id}`]) as AttemptRecord[] | null) ?? [];
      const waitsRaw = aux[`waits:${node.id}`];
      const waits = waitsRaw ? { waits: WaitRecord.array().parse(JSON.parse(waitsRaw)) } : {};
      const throttledMs = Number(aux[`throttled:${node.id}`] ?? 0);
      const mapRaw = aux[`map:${node.id}`];
      const extra = {
        ...waits,
        ...(throttledMs > 0 ? { throttledMs } : {}),
        ...(mapRaw ? { map: mapProgress(mapRaw) } : {}),
      };
      nodes[node.id] = snapshot
        ? { id: node.id, ...NodeSnapshot.parse(JSON.parse(snapshot)), ...extra }
        : state
          ? { id: node.id, ...LiveNodeState.parse(JSON.parse(state)), attempts, ...extra }
          : { id: node.id, status: 'pending', attempts, ...extra };
    });
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
      scheduleId: meta.scheduleId ?? null,
      triggerId: meta.triggerId ?? null,
      eventIds: parseJson(meta.eventIds) as string[] | null,
      configVersion: meta.configVersion ?? null,
      skills: meta.skills ? SkillsRecord.parse(JSON.parse(meta.skills)) : null,
      // Its deliveries are kept with the tenant's webhooks: the run service adds them.
      webhook: meta.webhook ? { ...RunWebhook.parse(JSON.parse(meta.webhook)), deliveries: [] } : null,
      nodes,
      output: parseJson(meta.output) as Record<string, unknown> | null,
      error: meta.error ? RunError.parse(JSON.parse(meta.error)) : null,
    };
  }
}
