/**
 * The plan loop's work on one window of a window-mode task run: ask the window planner for the
 * next few nodes, given only what it needs (where the run stands and the outputs asked for), and
 * check the answer with the completed nodes it builds on.
 */
import type { NodeSnapshot, PlanningRecord, TaskSpec, WindowSettings } from '../domain/run-model.js';
import type { Graph } from '../nodes/index.js';
import {
  plannerCall,
  plannerContext,
  type PlanningDeps,
  type PlanRunOptions,
  type PlanRunResult,
} from './plan-run.js';
import { askPlanner, validatePlan } from './planner.js';
import {
  FIRST_WINDOW_REASON,
  WINDOW_PROMPT_VERSION,
  carriedGraph,
  checkWindow,
  windowAnswerSchema,
  windowHistory,
  windowMessages,
} from './window.js';

/** Longest reason kept in a window's record. */
const REASON_CHARS = 500;

export interface PlanWindowOptions extends Omit<PlanRunOptions, 'replan' | 'runId'> {
  readonly settings: WindowSettings;
  /** Absent for the first window: the run so far, and why the planner is asked again. */
  readonly previous?: {
    readonly graph: Graph;
    readonly planning: PlanningRecord | null;
    readonly snapshots: ReadonlyMap<string, NodeSnapshot>;
    readonly reason: string;
  };
}

export async function planWindow(
  deps: PlanningDeps,
  task: TaskSpec,
  input: unknown,
  options: PlanWindowOptions,
): Promise<PlanRunResult> {
  const { settings, previous, planVersion, signal } = options;
  const context = await plannerContext(deps, task, options);
  if ('error' in context) return context;
  const windows = previous?.planning?.windows ?? [];
  const carried: Graph = previous
    ? carriedGraph(previous.graph, previous.snapshots)
    : { nodes: [], edges: [] };
  const reason = previous ? previous.reason.slice(0, REASON_CHARS) : FIRST_WINDOW_REASON;
  const messages = windowMessages({
    task: task.task,
    catalog: context.catalog,
    workspace: context.workspace,
    ...(context.told.length > 0 ? { lessons: context.told.map((l) => l.statement) } : {}),
    ...(task.overrides ? { overrides: task.overrides } : {}),
    settings,
    index: windows.length,
    ...(previous
      ? { history: windowHistory(reason, windows.at(-1), carried, previous.snapshots, previous.graph) }
      : {}),
  });
  const asked = await askPlanner(
    context.model,
    messages,
    { name: 'window', schema: windowAnswerSchema(settings.size) },
    (raw) => checkWindow(raw, settings.size, carried, (graph) => validatePlan(context.planner, graph, input)),
    signal,
    plannerCall(task),
  );
  const { usage, calls, model, inputSha256 } = asked;
  const given = inputSha256 !== undefined ? { inputSha256 } : {};
  if (!asked.ok) {
    return { outcome: asked, planning: context.record(model, WINDOW_PROMPT_VERSION, inputSha256) };
  }
  const window = asked.value;
  const planning: PlanningRecord = {
    ...context.record(model, WINDOW_PROMPT_VERSION, inputSha256),
    windows: [
      ...windows,
      {
        generation: planVersion,
        nodes: window.nodes,
        observe: window.observe,
        goalReached: window.goalReached,
        reason,
        ...given,
        usage: {
          promptTokens: usage.promptTokens,
          completionTokens: usage.completionTokens,
          modelCalls: calls,
        },
      },
    ],
  };
  return {
    outcome: {
      ok: true,
      graph: window.graph,
      plan: window.plan,
      topology: window.topology,
      usage,
      calls,
      model,
      ...given,
    },
    planning,
  };
}
