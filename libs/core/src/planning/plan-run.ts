/**
 * The plan loop's work on one task run: plan it (the first time) or replan it (after a node
 * handed it back), with the prompt assembled from the agent's catalog and workspace.
 */
import type { NodeSnapshot, PlanningRecord, TaskSpec } from '../domain/run-model.js';
import type { GraphLimits } from '../graph/limits.js';
import type { ModelClient } from '../model/model-client.js';
import { truncate } from '../model/prompt-render.js';
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
  const completed = replan
    ? Object.fromEntries(
        [...replan.snapshots]
          .filter(([, s]) => s.status === 'succeeded')
          .map(([id, s]) => [id, truncate(JSON.stringify(s.output ?? null), SUMMARY_CHARS)]),
      )
    : undefined;
  const outcome = await planTask(
    { model: deps.model, tools: deps.tools, limits: deps.limits, allowedTools: allowed },
    {
      task: task.task,
      catalog,
      workspace,
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
    },
  };
}
