/**
 * The plan loop's work on one task run: plan it (the first time) or replan it (after a node
 * handed it back), with the prompt assembled from the agent's catalog and workspace.
 */
import type { NodeSnapshot, PlanningRecord, TaskSpec } from '../domain/run-model.js';
import type { GraphLimits } from '../graph/limits.js';
import type { ModelClient } from '../model/model-client.js';
import { truncate } from '../model/prompt-render.js';
import type { Lesson } from '../memory/lesson.js';
import type { LessonBook } from '../reflect/lesson-book.js';
import { metrics } from '../telemetry/metrics.js';
import { toolCatalog } from '../tools/tool-catalog.js';
import type { ToolRegistry } from '../tools/tool.js';
import { PLANNER_FILES, readWorkspace } from '../workspace/workspace.js';
import { PLANNER_PROMPT_VERSION } from './planner-prompt.js';
import { planTask, type PlanOutcome } from './planner.js';

/** What the plan loop needs to plan tasks; absent in processes that only execute nodes. */
export interface PlanningDeps {
  /** Absent when no model is configured (task runs are then refused at the API). */
  readonly model?: ModelClient;
  readonly tools: ToolRegistry;
  readonly limits: GraphLimits;
  readonly allowedTools: (agentId: string) => ReadonlySet<string>;
  readonly workspaceDir: string;
  readonly workspaceFileChars: number;
  /** The lessons in effect per agent: the planner is told the hard and soft ones, and a plan that calls a blocked service is rejected. */
  readonly lessons?: LessonBook;
}

/** What a plan is told of the lessons in effect: hard and soft ones, most confident first. */
export function plannerLessons(lessons: readonly Lesson[]): Lesson[] {
  return lessons
    .filter((l) => l.kind === 'hard' || l.kind === 'soft')
    .sort((a, b) => b.confidence - a.confidence);
}

/** How much of each completed node's output the replanner sees. */
const SUMMARY_CHARS = 2000;

export interface PlanRunOptions {
  /** The run generation the plan is for. */
  readonly planVersion: number;
  /** Set when replanning: what completed, and why the run came back. */
  readonly replan?: { snapshots: ReadonlyMap<string, NodeSnapshot>; failure: string };
  /** @defaultValue 0 */
  readonly environmentVersion?: number;
  /** Aborts the planner call when the run ends meanwhile. */
  readonly signal?: AbortSignal;
}

export async function planRun(
  deps: PlanningDeps,
  task: TaskSpec,
  input: unknown,
  options: PlanRunOptions,
): Promise<{ outcome: PlanOutcome; planning: PlanningRecord } | { error: string }> {
  const { planVersion, replan, environmentVersion = 0, signal } = options;
  if (!deps.model) return { error: 'no model is configured' };
  const allowed = deps.allowedTools(task.agentId);
  const catalog = toolCatalog(deps.tools, allowed);
  const workspace = await readWorkspace(
    deps.workspaceDir,
    task.agentId,
    PLANNER_FILES,
    deps.workspaceFileChars,
  );
  const book = deps.lessons ? await deps.lessons.inEffect(task.agentId) : { version: 0, lessons: [] };
  const told = plannerLessons(book.lessons);
  const hard = book.lessons.filter((l) => l.kind === 'hard');
  const blocked = (tool: string, target: string): string | undefined => {
    const lesson = hard.find((l) => l.scope.tool === tool && l.scope.host === target);
    return lesson ? `blocked by lesson ${lesson.id}: ${lesson.statement}` : undefined;
  };
  if (told.length > 0) metrics.lessonApplications.inc({ kind: 'soft' }, told.length);
  const completed = replan
    ? Object.fromEntries(
        [...replan.snapshots]
          .filter(([, s]) => s.status === 'succeeded')
          .map(([id, s]) => [id, truncate(JSON.stringify(s.output ?? null), SUMMARY_CHARS)]),
      )
    : undefined;
  const outcome = await planTask(
    { model: deps.model, tools: deps.tools, limits: deps.limits, allowedTools: allowed, blocked },
    {
      task: task.task,
      catalog,
      workspace,
      ...(told.length > 0 ? { lessons: told.map((l) => l.statement) } : {}),
      ...(task.overrides ? { overrides: task.overrides } : {}),
      ...(replan && completed ? { replan: { completed, failure: replan.failure } } : {}),
    },
    input,
    signal,
  );
  return {
    outcome,
    planning: {
      plannerModel: outcome.model,
      promptVersion: PLANNER_PROMPT_VERSION,
      toolCatalogVersion: catalog.version,
      planVersion,
      environmentVersion,
      ...(deps.lessons ? { lessonsVersion: book.version, lessons: told.map((l) => l.id) } : {}),
    },
  };
}
