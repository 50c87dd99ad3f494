/**
 * The planner's prompt, assembled in one fixed order: base rules → tool catalog → workspace files
 * → runtime overrides → (when replanning) what already happened. Pure; its version is recorded
 * with every plan so a run can be replayed with the prompt it was planned with.
 */
import type { ChatMessage } from '../model/model-client.js';
import { PLANNED_NODE_RULE } from '../graph/schema.js';
import { PLANNED_TTL_RULE } from '../graph/task-ttl.js';
import { NODE_KINDS } from '../nodes/index.js';
import type { ToolCatalog } from '../tools/tool-catalog.js';
import type { WorkspaceFile } from '../workspace/workspace.js';
import { expiredMessage, type ExpiredNode } from './expired.js';
import { assembleSystemPrompt } from './system-prompt.js';

export const PLANNER_PROMPT_VERSION = 'planner-v5';

/** The rules of a graph every planner states: ids, node kinds, failure policy, references, tools. */
export const GRAPH_RULES = `- Node ids match [A-Za-z0-9_-]{1,64} and are unique. "input" is reserved.
${Object.values(NODE_KINDS)
  .flatMap((k) => (k.planner ? [`- ${k.planner.rule}`] : []))
  .join('\n')}
- ${PLANNED_NODE_RULE}
- ${PLANNED_TTL_RULE}
- A node reads another node's result with {"$ref": "<id>.output.<path>"} as a whole value, or "{{<id>.output.<path>}}" inside a string, and the run input with "input.<path>".
- A node may only reference nodes it depends on (directly or through other nodes), and every dependency is an edge.
- No cycles. Independent steps must not depend on each other, so they run in parallel.
- Use only the tools in the catalog.`;

const BASE = `You plan tasks for Tetraloop, a runtime that executes a plan as a directed acyclic graph.
Answer with one JSON object {"nodes": [...], "edges": [[from, to], ...]} and nothing else.
Rules:
${GRAPH_RULES}`;

export interface PlannerPromptInput {
  readonly task: string;
  readonly catalog: ToolCatalog;
  readonly workspace: readonly WorkspaceFile[];
  readonly overrides?: string;
  /** Lessons in effect for the agent, as lines, most confident first. */
  readonly lessons?: readonly string[];
  /**
   * When replanning: the nodes that completed (their outputs, summarised), what failed, and the
   * nodes that expired unstarted.
   */
  readonly replan?: {
    readonly completed: Record<string, string>;
    readonly failure: string;
    readonly expired?: readonly ExpiredNode[];
  };
}

export function plannerMessages(input: PlannerPromptInput): ChatMessage[] {
  const system = assembleSystemPrompt({
    base: BASE,
    catalog: input.catalog,
    bootstrap: input.workspace,
    ...(input.lessons && input.lessons.length > 0 ? { lessons: input.lessons } : {}),
    ...(input.overrides ? { overrides: input.overrides } : {}),
  });
  const user = input.replan
    ? [
        `Task: ${input.task}`,
        `The previous plan stopped: ${input.replan.failure}`,
        ...(input.replan.expired?.length ? [expiredMessage(input.replan.expired)] : []),
        `These nodes completed; a node of the new plan with the same id and definition reuses its result:\n${JSON.stringify(input.replan.completed)}`,
        'Return a graph for the remaining work.',
      ].join('\n\n')
    : `Task: ${input.task}`;
  return [
    { role: 'system', content: system },
    { role: 'user', content: user },
  ];
}

/** The message asking the planner to repair a rejected graph. */
export function repairMessage(issues: readonly { path: string; message: string }[]): ChatMessage {
  return {
    role: 'user',
    content: `The graph was rejected. Fix every problem and answer with the whole corrected graph:\n${issues
      .map((i) => `- ${i.path || '(graph)'}: ${i.message}`)
      .join('\n')}`,
  };
}
