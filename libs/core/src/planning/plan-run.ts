/**
 * The plan loop's work on one task run: plan it (the first time) or replan it (after a node
 * handed it back), with the prompt assembled from the agent's catalog and workspace.
 */
import type { Ceilings } from '../ceilings/ceilings.js';
import { bootstrapFilesOf, type HookRegistry } from '../hooks/hook-registry.js';
import { DEFAULT_TENANT, scopedName } from '../domain/tenant.js';
import type { NodeSnapshot, PlanningRecord, TaskSpec } from '../domain/run-model.js';
import type { GraphLimits } from '../graph/limits.js';
import type { NodeBase } from '../graph/schema.js';
import type { ModelClient, ThinkingOptions } from '../model/model-client.js';
import type { ToolCatalog } from '../tools/tool-catalog.js';
import type { SkillLimits } from '../workspace/skills.js';
import type { WorkspaceFile } from '../workspace/workspace.js';
import { truncate } from '../model/prompt-render.js';
import { Thinking, thinkingOptions } from '../model/thinking.js';
import type { Lesson } from '../memory/lesson.js';
import type { LessonBook } from '../reflect/lesson-book.js';
import type { PlanCacheStore } from '../state/plan-cache-store.js';
import type { RunPlans } from '../state/runs/run-plan.js';
import { metrics } from '../telemetry/metrics.js';
import { toolCatalog } from '../tools/tool-catalog.js';
import type { ToolRegistry } from '../tools/tool.js';
import { PLANNER_FILES, readWorkspace } from '../workspace/workspace.js';
import { planCacheHash } from './cached-plan.js';
import { expiredNodes } from './expired.js';
import { orderByPreference } from './preferred-tools.js';
import { PLANNER_PROMPT_VERSION } from './planner-prompt.js';
import { planTask, validatePlan, type PlanOutcome, type PlannerDeps } from './planner.js';

/** What the plan loop needs to plan tasks; absent in processes that only execute nodes. */
export interface PlanningDeps {
  /** Absent when no model is configured (task runs are then refused at the API). */
  readonly model?: ModelClient;
  readonly tools: ToolRegistry;
  readonly limits: GraphLimits;
  readonly allowedTools: (agentId: string) => ReadonlySet<string>;
  /** The deployment's ceilings: a plan naming a model its tenant or agent may not call is rejected. */
  readonly ceilings?: Ceilings;
  readonly workspaceDir: string;
  readonly workspaceFileChars: number;
  /** How many skills a loop-mode run's prompt holds, and how large each may be. */
  readonly skillLimits: SkillLimits;
  /**
   * The lessons in effect per agent: the planner is told the hard, soft and prefer ones, prefer
   * lessons order its catalog, and a plan that calls a blocked service is rejected.
   */
  readonly lessons?: LessonBook;
  /** The plan cache (first plans of repeated tasks); absent: never cached. */
  readonly cache?: PlanCacheStore;
  /** Plugin hooks: `agent:bootstrap` may edit the workspace files before the planner's prompt is made. */
  readonly hooks?: HookRegistry;
}

/** What a plan is told of the lessons in effect: hard, soft and prefer ones, most confident first. */
export function plannerLessons(lessons: readonly Lesson[]): Lesson[] {
  return lessons
    .filter((l) => l.kind === 'hard' || l.kind === 'soft' || l.kind === 'prefer')
    .sort((a, b) => b.confidence - a.confidence);
}

/** How much of each completed node's output the replanner sees. */
const SUMMARY_CHARS = 2000;

export interface PlanRunOptions {
  /** The run generation the plan is for. */
  readonly planVersion: number;
  /**
   * Set when replanning: what completed, why the run came back, and the nodes of the plan that
   * stopped (the planner is told which of them expired unstarted).
   */
  readonly replan?: {
    snapshots: ReadonlyMap<string, NodeSnapshot>;
    failure: string;
    nodes: readonly NodeBase[];
  };
  /** @defaultValue 0 */
  readonly environmentVersion?: number;
  /** Aborts the planner call when the run ends meanwhile. */
  readonly signal?: AbortSignal;
  /** The run planned: a first plan stored in the plan cache names it. */
  readonly runId?: string;
  /** The run's tenant, whose model ceilings the plan obeys. @defaultValue DEFAULT_TENANT */
  readonly tenant?: string;
}

/** Where a run's first plan sits in the plan cache: the entry's key and the run it names. */
export interface PlanCacheRef {
  readonly key: string;
  readonly runId: string;
}

export type PlanRunResult =
  { outcome: PlanOutcome; planning: PlanningRecord; cache?: PlanCacheRef } | { error: string };

/** What every planner call of a task run is assembled from: catalog, workspace, lessons, checks. */
export interface PlannerContext {
  readonly model: ModelClient;
  readonly catalog: ToolCatalog;
  readonly workspace: WorkspaceFile[];
  /** The lessons the planner is told, most confident first. */
  readonly told: Lesson[];
  readonly lessonsVersion: number;
  /** The agent within its tenant: whose lessons and cached plans these are. */
  readonly memoryAgent: string;
  /** The checks of a plan of this agent. */
  readonly planner: Omit<PlannerDeps, 'model'>;
  /**
   * The planning record of a plan made by `model` with prompt `promptVersion`, given what
   * `inputSha256` fingerprints (absent when no planner was asked: a plan cache hit).
   */
  readonly record: (model: string, promptVersion: string, inputSha256?: string) => PlanningRecord;
}

/** Reads what the planner of `task` needs: its catalog, workspace files and lessons in effect. */
export async function plannerContext(
  deps: PlanningDeps,
  task: TaskSpec,
  options: Pick<PlanRunOptions, 'planVersion' | 'environmentVersion' | 'tenant' | 'runId'>,
): Promise<PlannerContext | { error: string }> {
  const { planVersion, environmentVersion = 0, tenant = DEFAULT_TENANT, runId } = options;
  if (!deps.model) return { error: 'no model is configured' };
  const allowed = deps.allowedTools(task.agentId);
  let workspace = await readWorkspace(
    deps.workspaceDir,
    task.agentId,
    PLANNER_FILES,
    deps.workspaceFileChars,
  );
  if (deps.hooks?.has('agent:bootstrap')) {
    const files = workspace;
    const { ctx } = await deps.hooks.run(
      'agent:bootstrap',
      { agentId: task.agentId, files, ...(runId ? { runId } : {}) },
      (c, r) => {
        const edited = bootstrapFilesOf(r.files, deps.workspaceFileChars);
        return edited ? { ...c, files: edited } : c;
      },
    );
    workspace = [...ctx.files];
  }
  // Lessons and cached plans are the agent's within its tenant.
  const memoryAgent = scopedName(task.tenant ?? DEFAULT_TENANT, task.agentId);
  const book = deps.lessons ? await deps.lessons.inEffect(memoryAgent) : { version: 0, lessons: [] };
  const told = plannerLessons(book.lessons);
  // A tool a prefer lesson in effect prefers comes before the one it is preferred over.
  const catalog = orderByPreference(toolCatalog(deps.tools, allowed), book.lessons);
  const hard = book.lessons.filter((l) => l.kind === 'hard');
  const blocked = (tool: string, target: string): string | undefined => {
    const lesson = hard.find((l) => l.scope.tool === tool && l.scope.host === target);
    return lesson ? `blocked by lesson ${lesson.id}: ${lesson.statement}` : undefined;
  };
  // What the run grants its planned nodes: the request's grant and the agent's declared secrets.
  const secrets = new Set([...(task.secrets ?? []), ...(deps.ceilings?.agentSecrets(task.agentId) ?? [])]);
  // Told to the planner, or part of the cached plan made with the same lessons version.
  if (told.length > 0) metrics.lessonApplications.inc({ kind: 'soft' }, told.length);
  return {
    model: deps.model,
    catalog,
    workspace,
    told,
    lessonsVersion: book.version,
    memoryAgent,
    planner: {
      tools: deps.tools,
      limits: deps.limits,
      allowedTools: allowed,
      ...(deps.ceilings ? { models: deps.ceilings.models(tenant, task.agentId) } : {}),
      blocked,
      secrets,
    },
    record: (model, promptVersion, inputSha256) => ({
      plannerModel: model,
      promptVersion,
      ...(inputSha256 !== undefined ? { inputSha256 } : {}),
      toolCatalogVersion: catalog.version,
      planVersion,
      environmentVersion,
      ...(deps.lessons ? { lessonsVersion: book.version, lessons: told.map((l) => l.id) } : {}),
    }),
  };
}

export async function planRun(
  deps: PlanningDeps,
  task: TaskSpec,
  input: unknown,
  options: PlanRunOptions,
): Promise<PlanRunResult> {
  const { planVersion, replan, signal, runId } = options;
  const context = await plannerContext(deps, task, options);
  if ('error' in context) return context;
  const { catalog, workspace, told, memoryAgent, planner, model: client } = context;
  const call = plannerCall(task);
  const plannerModel = call.model ?? client.config.plannerModel;
  const record = (model: string, inputSha256?: string): PlanningRecord =>
    context.record(model, PLANNER_PROMPT_VERSION, inputSha256);

  // Only a run's first plan goes through the plan cache; replans are always asked for.
  const cache = deps.cache?.enabled && !replan && planVersion === 0 && runId ? deps.cache : undefined;
  const cacheKey = cache?.keyOf(
    memoryAgent,
    planCacheHash({
      task: task.task,
      input,
      toolCatalogVersion: catalog.version,
      lessonsVersion: context.lessonsVersion,
      plannerModel,
      promptVersion: PLANNER_PROMPT_VERSION,
      overrides: task.overrides,
      workspace,
      // A plan made with a grant is never replayed to a run without it.
      secrets: [...planner.secrets].sort(),
    }),
  );
  if (cache && cacheKey) {
    const cached = await cache.get(cacheKey);
    if (cached !== null) {
      // A cached plan is checked like a planner's answer: allowlist, limits, input, hard lessons.
      const checked = cached === 'corrupt' ? null : validatePlan(planner, cached.graph, input);
      if (cached !== 'corrupt' && checked?.ok) {
        metrics.planCache.inc({ outcome: 'hit' });
        return {
          outcome: {
            ok: true,
            graph: checked.graph,
            plan: checked.plan,
            topology: checked.topology,
            usage: { promptTokens: 0, completionTokens: 0 },
            calls: 0,
            model: plannerModel,
          },
          planning: { ...record(plannerModel), cache: 'hit', cachedFrom: cached.runId },
          cache: { key: cacheKey, runId: cached.runId },
        };
      }
      metrics.planCache.inc({ outcome: 'stale' });
      await cache.forget(cacheKey, cached === 'corrupt' ? undefined : cached.runId);
    } else {
      metrics.planCache.inc({ outcome: 'miss' });
    }
  }

  const completed = replan
    ? Object.fromEntries(
        [...replan.snapshots]
          .filter(([, s]) => s.status === 'succeeded')
          .map(([id, s]) => [id, truncate(JSON.stringify(s.output ?? null), SUMMARY_CHARS)]),
      )
    : undefined;
  const outcome = await planTask(
    { ...planner, model: client },
    {
      task: task.task,
      catalog,
      workspace,
      ...(told.length > 0 ? { lessons: told.map((l) => l.statement) } : {}),
      ...(task.overrides ? { overrides: task.overrides } : {}),
      ...(replan && completed
        ? {
            replan: {
              completed,
              failure: replan.failure,
              expired: expiredNodes(replan.nodes, replan.snapshots),
            },
          }
        : {}),
    },
    input,
    signal,
    call,
  );
  if (!cache || !cacheKey || !runId) return { outcome, planning: record(outcome.model, outcome.inputSha256) };
  if (outcome.ok) {
    await cache.put(cacheKey, { graph: outcome.graph, createdAt: new Date().toISOString(), runId });
  }
  return {
    outcome,
    planning: { ...record(outcome.model, outcome.inputSha256), cache: 'miss' },
    ...(outcome.ok ? { cache: { key: cacheKey, runId } } : {}),
  };
}

/**
 * A run that failed or timed out takes the plan it ran with out of the plan cache: the entry it
 * was planned from or stored, if that entry still names the same run.
 */
export async function forgetCachedPlan(
  deps: Pick<PlanningDeps, 'cache'>,
  store: Pick<RunPlans, 'planCacheRef'>,
  runId: string,
): Promise<boolean> {
  if (!deps.cache) return false;
  const ref = await store.planCacheRef(runId);
  return ref ? deps.cache.forget(ref.key, ref.runId) : false;
}

/** A run may name its planner's model and reasoning effort (`model`, `thinking`). */
export function plannerCall(task: TaskSpec): { model?: string; thinking?: ThinkingOptions } {
  const asked = Thinking.safeParse(task.thinking);
  const thinking = asked.success ? thinkingOptions(asked.data) : undefined;
  return { ...(task.model !== undefined ? { model: task.model } : {}), ...(thinking ? { thinking } : {}) };
}
