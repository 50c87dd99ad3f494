/**
 * Window mode's pure parts: the window planner's prompt, the shape of its answer and the checks
 * beyond a graph's, which completed nodes carry over into the next window, the graph a window runs
 * as, and what the next window's planner is shown. No I/O.
 *
 * A window's graph is the completed nodes carried over from earlier windows plus the window's own
 * nodes, so a new node reads an earlier result by an edge and a reference, exactly as in one graph,
 * and the replan step reuses the carried nodes' snapshots (same id, same definition).
 */
import { z } from 'zod';
import type { NodeSnapshot, WindowRecord, WindowSettings } from '../domain/run-model.js';
import type { ValidationResult } from '../compile/validate.js';
import type { ValidationIssue } from '../graph/schema.js';
import type { Topology } from '../graph/topology.js';
import type { ChatMessage } from '../model/model-client.js';
import { truncate } from '../model/prompt-render.js';
import { kindHas, toolOf, type ExecutableGraph, type Graph, type GraphNode } from '../nodes/index.js';
import type { ToolCatalog } from '../tools/tool-catalog.js';
import type { WorkspaceFile } from '../workspace/workspace.js';
import { expiredMessage, expiredNodes, type ExpiredNode } from './expired.js';
import { GRAPH_RULES } from './planner-prompt.js';
import { PlannedNode } from './planner.js';
import { assembleSystemPrompt } from './system-prompt.js';

export const WINDOW_PROMPT_VERSION = 'planner-window-v4';

/** How much of each observed output the next window's planner sees. */
export const OBSERVED_CHARS = 2000;

/** Why the first window is asked for. */
export const FIRST_WINDOW_REASON = 'start';

const base = (size: number): string =>
  `You plan tasks for Tetraloop in windows: each answer holds only the next few steps. They run in parallel where their edges allow; you are asked again, with their results, when they are all done, when one of them fails, or when the environment changes.
Answer with one JSON object {"nodes": [...], "edges": [[from, to], ...], "goalReached": true|false, "observe": [ids]} and nothing else.
Rules:
${GRAPH_RULES}
- At most ${size} nodes per answer.
- "goalReached": true when the task is done once this answer's nodes are (with no nodes: it is done already). The run then ends; its output is the outputs of the nodes no other node depends on. With "goalReached": false, give at least one node.
- Completed nodes of earlier windows are listed by id: a new node may use one through an edge from it and a reference to it. Do not reuse their ids.
- "observe": the ids of nodes (this answer's or completed ones) whose outputs you need to see when asked again. Left out: this answer's nodes that no other node of it depends on.
- "priority" orders the ready nodes of a window: set it when some steps matter more than others.`;

/** The structured-output schema of a window answer, named `window`: at most `size` nodes. */
export function windowAnswerSchema(size: number): Record<string, unknown> {
  return z.toJSONSchema(
    z.object({
      nodes: z.array(PlannedNode).max(size),
      edges: z.array(z.tuple([z.string(), z.string()])),
      goalReached: z.boolean(),
      observe: z.array(z.string()).optional(),
    }),
    { unrepresentable: 'any' },
  );
}

/** What the planner is shown of the run when asked for a window after the first. */
export interface WindowHistory {
  /** Why it is asked: the window drained, a node failed (`code: message`), the environment moved. */
  readonly reason: string;
  /** The completed nodes a new node may depend on: id and what it is (its tool, or its kind). */
  readonly completed: readonly { id: string; label: string }[];
  /** The outputs the last window asked to observe, as JSON cut to OBSERVED_CHARS. */
  readonly observed: Readonly<Record<string, string>>;
  /** Nodes of the last window that failed or never ran, one line each; the expired ones aside. */
  readonly failed: readonly string[];
  /** Nodes of the last window that expired unstarted: handed back to the planner. */
  readonly expired: readonly ExpiredNode[];
}

export interface WindowPromptInput {
  readonly task: string;
  readonly catalog: ToolCatalog;
  readonly workspace: readonly WorkspaceFile[];
  readonly overrides?: string;
  readonly lessons?: readonly string[];
  readonly settings: WindowSettings;
  /** 0 for the first window. */
  readonly index: number;
  /** Absent for the first window. */
  readonly history?: WindowHistory;
}

/**
 * The window planner's messages: the same system prompt order as plan-once (rules, catalog,
 * workspace, lessons, overrides) with window rules, and a user message holding only what this
 * call needs: the task, where the run stands, and the outputs asked for — never the earlier
 * conversations.
 */
export function windowMessages(input: WindowPromptInput): ChatMessage[] {
  const system = assembleSystemPrompt({
    base: base(input.settings.size),
    catalog: input.catalog,
    bootstrap: input.workspace,
    ...(input.lessons && input.lessons.length > 0 ? { lessons: input.lessons } : {}),
    ...(input.overrides ? { overrides: input.overrides } : {}),
  });
  const { settings, index, history } = input;
  const parts = [
    `Task: ${input.task}`,
    `Window ${index + 1} of at most ${settings.maxWindows}, at most ${settings.size} nodes.`,
  ];
  if (history) {
    parts.push(`Why you are asked again: ${history.reason}`);
    parts.push(
      `Completed nodes you may depend on: ${
        history.completed.length > 0
          ? history.completed.map((c) => `${c.id} (${c.label})`).join(', ')
          : 'none'
      }`,
    );
    if (Object.keys(history.observed).length > 0) {
      parts.push(`Outputs you asked to observe:\n${JSON.stringify(history.observed)}`);
    }
    if (history.failed.length > 0) {
      parts.push(`Nodes of the last window that did not complete:\n${history.failed.join('\n')}`);
    }
    if (history.expired.length > 0) parts.push(expiredMessage(history.expired));
    parts.push('Return the next window.');
  } else {
    parts.push('Return the first window.');
  }
  return [
    { role: 'system', content: system },
    { role: 'user', content: parts.join('\n\n') },
  ];
}

/**
 * The completed part of a window run's graph that the next window keeps: nodes that succeeded and
 * whose every ancestor is kept too (a node that read a failed node's error through `onError:
 * "continue"` is dropped with it), and the edges among them.
 */
export function carriedGraph(graph: Graph, snapshots: ReadonlyMap<string, NodeSnapshot>): Graph {
  const parents = new Map<string, string[]>();
  for (const [from, to] of graph.edges) parents.set(to, [...(parents.get(to) ?? []), from]);
  const memo = new Map<string, boolean>();
  const carried = (id: string): boolean => {
    const known = memo.get(id);
    if (known !== undefined) return known;
    // Graphs are acyclic; the guard only keeps a corrupt one from recursing forever.
    memo.set(id, false);
    const kept = snapshots.get(id)?.status === 'succeeded' && (parents.get(id) ?? []).every(carried);
    memo.set(id, kept);
    return kept;
  };
  return {
    nodes: graph.nodes.filter((n) => carried(n.id)),
    edges: graph.edges.filter(([from, to]) => carried(from) && carried(to)),
  };
}

/**
 * What the next window's planner is shown, from the last window and the snapshots it left; `graph`
 * (the run's graph so far) says what a node of the last window that expired unstarted was.
 */
export function windowHistory(
  reason: string,
  last: WindowRecord | undefined,
  carried: Graph,
  snapshots: ReadonlyMap<string, NodeSnapshot>,
  graph: Graph,
): WindowHistory {
  const observed: Record<string, string> = {};
  for (const id of last?.observe ?? []) {
    const s = snapshots.get(id);
    if (s?.status === 'succeeded') observed[id] = truncate(JSON.stringify(s.output ?? null), OBSERVED_CHARS);
  }
  const own = new Set(last?.nodes ?? []);
  const expired = expiredNodes(
    graph.nodes.filter((n) => own.has(n.id)),
    snapshots,
  );
  const failed: string[] = [];
  for (const id of last?.nodes ?? []) {
    const s = snapshots.get(id);
    if (expired.some((e) => e.id === id)) continue;
    if (!s) failed.push(`- ${id}: did not run`);
    else if (s.status === 'failed')
      failed.push(`- ${id}: ${s.error ? `${s.error.code}: ${s.error.message}` : 'failed'}`);
    else if (s.status !== 'succeeded') failed.push(`- ${id}: ${s.status}`);
  }
  return {
    reason,
    completed: carried.nodes.map((n) => ({ id: n.id, label: labelOf(n) })),
    observed,
    failed,
    expired,
  };
}

/** What a completed node is, for the planner: the tool it calls (a `tool` node), or its kind. */
const labelOf = (node: GraphNode): string => toolOf(node) ?? node.kind;

/** A window answer as the run installs it: the merged graph, checked, and the window's record. */
export interface CheckedWindow {
  readonly graph: Graph;
  readonly plan: ExecutableGraph;
  readonly topology: Topology;
  readonly nodes: string[];
  readonly observe: string[];
  readonly goalReached: boolean;
}

const WindowAnswer = z.object({
  nodes: z.array(z.unknown()),
  edges: z.array(z.unknown()).default([]),
  goalReached: z.boolean(),
  observe: z.array(z.string()).optional(),
});

/**
 * A window's nodes of the kinds that replan in a window (`replansInWindow`) hand the run back to
 * the planner when they fail (`onError: "replan"`), unless the planner chose otherwise: a failure
 * is news for the next window, not the end of the run.
 */
function withWindowDefaults(node: unknown): unknown {
  if (typeof node !== 'object' || node === null || Array.isArray(node)) return node;
  const n = node as Record<string, unknown>;
  if (kindHas(n.kind, 'replansInWindow') && n.onError === undefined) return { ...n, onError: 'replan' };
  return node;
}

/**
 * Checks a window answer whole: its shape, at most `size` nodes (more is a problem sent back for
 * repair, never cut), none reusing a carried id, at least one node unless the goal is reached,
 * `observe` naming known nodes, and the merged graph (window nodes first, so a problem's
 * `nodes.N` is the answer's N-th node) through `validate`, the checks of any plan.
 */
export function checkWindow(
  raw: unknown,
  size: number,
  carried: Graph,
  validate: (graph: unknown) => ValidationResult,
): { ok: true; value: CheckedWindow } | { ok: false; issues: ValidationIssue[] } {
  const parsed = WindowAnswer.safeParse(raw);
  if (!parsed.success) {
    return {
      ok: false,
      issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), message: i.message })),
    };
  }
  const answer = parsed.data;
  const issues: ValidationIssue[] = [];
  if (answer.nodes.length > size) {
    issues.push({
      path: 'nodes',
      message: `at most ${size} nodes per window; the answer has ${answer.nodes.length}`,
    });
  }
  if (!answer.goalReached && answer.nodes.length === 0) {
    issues.push({ path: 'nodes', message: 'a window whose goal is not reached needs at least one node' });
  }
  const carriedIds = new Set(carried.nodes.map((n) => n.id));
  const ids = answer.nodes.map((n) => (n as { id?: unknown } | null)?.id);
  ids.forEach((id, i) => {
    if (typeof id === 'string' && carriedIds.has(id)) {
      issues.push({ path: `nodes.${i}.id`, message: `"${id}" is a completed node of an earlier window` });
    }
  });
  if (issues.length > 0) return { ok: false, issues };
  const merged = {
    nodes: [...answer.nodes.map(withWindowDefaults), ...carried.nodes],
    edges: [...answer.edges, ...carried.edges],
  };
  const checked = validate(merged);
  if (!checked.ok) return { ok: false, issues: [...checked.issues] };
  const own = ids as string[];
  const known = new Set([...own, ...carriedIds]);
  (answer.observe ?? []).forEach((id, i) => {
    if (!known.has(id)) issues.push({ path: `observe.${i}`, message: `unknown node "${id}"` });
  });
  if (issues.length > 0) return { ok: false, issues };
  // By default the window's results: its nodes that no other node of the window reads.
  const feeds = new Set(checked.graph.edges.filter(([, to]) => own.includes(to)).map(([from]) => from));
  const observe = answer.observe ?? own.filter((id) => !feeds.has(id));
  return {
    ok: true,
    value: {
      graph: checked.graph,
      plan: checked.plan,
      topology: checked.topology,
      nodes: own,
      observe: [...new Set(observe)],
      goalReached: answer.goalReached,
    },
  };
}
