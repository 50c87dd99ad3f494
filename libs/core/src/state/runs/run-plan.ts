/**
 * A run's plan: the executable plan a worker reads (immutable for a generation, so cacheable), a
 * task run's first plan, replans and window-mode windows, the usage planning charges, and the
 * session environment a plan was made from (a change hands the run back to the planner or steers
 * its agent).
 */
import type {
  OnBudget,
  PlanningRecord,
  RunError,
  SkillsRecord,
  UsageCharge,
} from '../../domain/run-model.js';
import type { ExecutableGraph, Graph } from '../../nodes/index.js';
import { DEFAULT_TENANT } from '../../domain/tenant.js';
import { DEFAULT_PRIORITY } from '../../flow/limits.js';
import { slotMulti } from '../slot-multi.js';
import { chargeJson, multiReplies, parseJson, pendingJson, type RunContext } from './run-context.js';

/** What a worker needs to execute a run's nodes; immutable for the run's life, so cacheable. */
export interface RunPlan {
  readonly agentId: string;
  readonly tenant: string;
  /** 1 (lowest) to 10: which of a counter's waiting calls goes first (flow control). */
  readonly priority: number;
  /** How many of the run's node jobs may run at once; null: no cap. */
  readonly maxParallelNodes: number | null;
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

/** A plan as set-plan and replan store it: the graph, its executable plan, its readiness counters. */
export interface NewPlan {
  readonly graph: Graph;
  readonly plan: ExecutableGraph;
  readonly pending: ReadonlyMap<string, number>;
}

/** The arguments set-plan and replan share: graph, plan, counters, planning record, charge, event. */
function planArgs(plan: NewPlan, planning: PlanningRecord, charge: UsageCharge): string[] {
  return [
    JSON.stringify(plan.graph),
    JSON.stringify(plan.plan),
    pendingJson(plan.pending),
    JSON.stringify(planning),
    chargeJson(charge),
    JSON.stringify({ ...planning, nodes: plan.plan.nodes.length }),
  ];
}

export class RunPlans {
  constructor(private readonly ctx: RunContext) {}

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
      maxParallelNodes,
    ] = await this.ctx.redis.hmget(
      this.ctx.keysOf(runId).meta,
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
      'maxParallelNodes',
    );
    if (plan === null) return null;
    return {
      agentId: agentId ?? 'main',
      tenant: tenant ?? DEFAULT_TENANT,
      priority: priority === null ? DEFAULT_PRIORITY : Number(priority),
      maxParallelNodes: maxParallelNodes === null ? null : Number(maxParallelNodes),
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

  /**
   * Stores a task run's first plan; false when it already has one. `cache`: the plan cache entry
   * the plan came from or was stored in (its key and the run it names), kept with the run.
   */
  async setPlan(
    runId: string,
    plan: NewPlan,
    planning: PlanningRecord,
    charge: UsageCharge,
    cache?: { key: string; runId: string },
  ): Promise<boolean> {
    const stored = await this.ctx.script('set-plan-6', this.ctx.scriptKeys(runId), [
      ...planArgs(plan, planning, charge),
      cache?.key ?? '',
      cache?.runId ?? '',
      '',
    ]);
    return stored === 1;
  }

  /**
   * Stores the graph of a loop-mode run prepared by the plan loop (its agent's prompt made there)
   * and the skills that prompt holds; false when it already has one. No planner made it: the run
   * has no planning record.
   */
  async setPrepared(runId: string, plan: NewPlan, skills: SkillsRecord): Promise<boolean> {
    const stored = await this.ctx.script('set-plan-6', this.ctx.scriptKeys(runId), [
      JSON.stringify(plan.graph),
      JSON.stringify(plan.plan),
      pendingJson(plan.pending),
      '',
      '{}',
      JSON.stringify({ nodes: plan.plan.nodes.length }),
      '',
      '',
      JSON.stringify(skills),
    ]);
    return stored === 1;
  }

  /** The plan cache entry a run's first plan came from or was stored in, if any. */
  async planCacheRef(runId: string): Promise<{ key: string; runId: string } | null> {
    const [key, from] = await this.ctx.redis.hmget(
      this.ctx.keysOf(runId).meta,
      'planCacheKey',
      'planCacheFrom',
    );
    return key && from ? { key, runId: from } : null;
  }

  /** Charges usage that belongs to no node, with an optional event. */
  async charge(runId: string, charge: UsageCharge, event?: { type: string; data: unknown }): Promise<void> {
    await this.ctx.script('charge-6', this.ctx.scriptKeys(runId), [
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
    failure: RunError | { code: 'window_drained' | 'cycle_budget'; message: string },
    generation: number,
  ): Promise<boolean> {
    const requested = await this.ctx.script('request-replan-6', this.ctx.scriptKeys(runId), [
      JSON.stringify(failure),
      generation,
    ]);
    return requested === 1;
  }

  /** Installs a new plan after a requested replan. Returns the new generation, or 0. */
  async replan(
    runId: string,
    generation: number,
    plan: NewPlan,
    planning: PlanningRecord,
    charge: UsageCharge,
    drop: readonly string[],
  ): Promise<number> {
    return (await this.ctx.script('replan-6', this.ctx.scriptKeys(runId), [
      ...planArgs(plan, planning, charge),
      generation,
      ...drop,
    ])) as number;
  }

  /**
   * What planning a window-mode run's next window reads, in one round trip: the graph so far, the
   * current planning record (its windows) and the usage counters a replan restarts, which the next
   * window carries over so the run's budget holds across windows.
   */
  async windowState(runId: string): Promise<WindowState> {
    const k = this.ctx.keysOf(runId);
    const replies = await slotMulti(this.ctx.redis)
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

  /**
   * Records the session environment version the run's next plan is made from: the version the
   * environment check compares against (`envVersion`, moved by a change) and the plan's own
   * (`planEnvVersion`), which a queued node of an outdated plan is checked against at its start.
   */
  async setEnvironmentVersion(runId: string, version: number): Promise<void> {
    const v = String(version);
    await this.ctx.redis.hset(this.ctx.keysOf(runId).meta, 'envVersion', v, 'planEnvVersion', v);
  }

  async environmentVersion(runId: string): Promise<number> {
    return Number((await this.ctx.redis.hget(this.ctx.keysOf(runId).meta, 'envVersion')) ?? 0);
  }

  /**
   * Tells a running run that its session's environment moved to `version`: records it, appends
   * `environment.changed` with the entries it has not seen, and hands a planned run back to the
   * planner or gives an agent run the entries as steering — one step. `recent` is the environment's
   * recent entries as lines, newest last. False when the run is not running or saw this version.
   */
  async environmentChanged(runId: string, version: number, recent: readonly string[]): Promise<boolean> {
    const told = await this.ctx.script('environment-changed-6', this.ctx.scriptKeys(runId), [
      version,
      JSON.stringify(recent),
    ]);
    return told === 1;
  }

  /** Steering messages for a running agent, oldest first (appended by the environment check). */
  async steering(runId: string): Promise<string[]> {
    const raw = await this.ctx.redis.hget(this.ctx.keysOf(runId).aux, 'steer');
    return raw ? (JSON.parse(raw) as string[]) : [];
  }
}
