/**
 * Plans a task into a graph with one model call (structured output), checks it with the same
 * static validation as a fixed graph, and asks once for a repair if it fails. Nothing runs from
 * an invalid plan.
 */
import { z } from 'zod';
import type { ModelPolicy } from '../ceilings/ceilings.js';
import { validateGraph, type ValidationResult } from '../compile/validate.js';
import type { GraphLimits } from '../graph/limits.js';
import type { AnyNode, ValidationIssue } from '../graph/schema.js';
import type { Topology } from '../graph/topology.js';
import type { ChatMessage, ModelClient, ModelUsage, ThinkingOptions } from '../model/model-client.js';
import { NODE_KINDS, type ExecutableGraph, type Graph } from '../nodes/index.js';
import { observeModelCall } from '../telemetry/metrics.js';
import { inChatSpan } from '../telemetry/genai.js';
import type { ToolRegistry } from '../tools/tool.js';
import { plannerMessages, repairMessage, type PlannerPromptInput } from './planner-prompt.js';
import { fingerprint } from '../domain/fingerprint.js';

/** What the planner may answer: the kinds the table lets it write. Sent as the structured-output schema. */
const plannedKinds = Object.values(NODE_KINDS).flatMap((k) => (k.planner ? [k.planner.schema] : []));
/** One node as the planner may write it (any planned kind). */
export const PlannedNode = z.union(plannedKinds as [z.ZodType, z.ZodType, ...z.ZodType[]]);
const PlannedGraph = z.object({
  nodes: z.array(PlannedNode),
  edges: z.array(z.tuple([z.string(), z.string()])),
});
export const PLANNER_SCHEMA = z.toJSONSchema(PlannedGraph, { unrepresentable: 'any' }) as Record<
  string,
  unknown
>;

export interface PlannerDeps {
  readonly model: ModelClient;
  readonly tools: ToolRegistry;
  readonly limits: GraphLimits;
  readonly allowedTools: ReadonlySet<string>;
  /** The models the plan's nodes may call (the run's tenant and agent ceilings); any when omitted. */
  readonly models?: ModelPolicy;
  /** Why a call is refused by a hard lesson; a plan with such a call fails validation. */
  readonly blocked?: (tool: string, target: string) => string | undefined;
  /** The secrets the run grants its planned nodes: a plan naming any other is rejected. */
  readonly secrets: ReadonlySet<string>;
}

export type PlanOutcome =
  | {
      ok: true;
      graph: Graph;
      plan: ExecutableGraph;
      topology: Topology;
      usage: ModelUsage;
      calls: number;
      model: string;
      /** The fingerprint of what the planner was given (`Asked`). */
      inputSha256?: string;
    }
  | {
      ok: false;
      issues: readonly ValidationIssue[];
      usage: ModelUsage;
      calls: number;
      model: string;
      inputSha256?: string;
    };

/**
 * Checks a graph as a plan of this agent for this input: the static validation of a fixed graph
 * (tools, limits, the agent's allowlist, the models allowed, `input.*` references) and the hard
 * lessons in effect; and it may reference only the secrets the run grants.
 * A planner's answer and a cached plan go through the same checks.
 */
export function validatePlan(
  deps: Omit<PlannerDeps, 'model'>,
  raw: unknown,
  runInput: unknown,
): ValidationResult {
  const unplannable = unplannableKinds(raw);
  if (unplannable.length > 0) return { ok: false, issues: unplannable };
  return validateGraph(raw, {
    tools: deps.tools,
    limits: deps.limits,
    allowedTools: deps.allowedTools,
    input: { value: runInput },
    ...(deps.models ? { models: deps.models } : {}),
    ...(deps.blocked ? { blocked: deps.blocked } : {}),
    secrets: deps.secrets,
  });
}

/**
 * Nodes of kinds the planner may not write (`wait`, `loop`, `graph`: kinds without a planner
 * entry), at the top of the plan or inside a node that runs another (a map's item template). Its
 * structured output offers only the planned kinds, but an answer is data, not authority: a model
 * that ignores the schema (or an injected plan) must not get a kind that carries its own
 * capabilities, such as an agent loop naming its secrets.
 */
function unplannableKinds(raw: unknown): ValidationIssue[] {
  const nodes = (raw as { nodes?: unknown } | null)?.nodes;
  if (!Array.isArray(nodes)) return [];
  const planned: string[] = Object.values(NODE_KINDS).flatMap((k) => (k.planner ? [k.kind] : []));
  const refused = (kind: unknown): kind is string =>
    typeof kind === 'string' && !planned.includes(kind) && Object.hasOwn(NODE_KINDS, kind);
  const issue = (path: readonly PropertyKey[], kind: string): ValidationIssue => ({
    path: path.join('.'),
    message: `a plan may hold only ${planned.join(', ')} nodes, not "${kind}"`,
  });
  return nodes.flatMap((node: unknown, i) => {
    const kind = (node as { kind?: unknown } | null)?.kind;
    if (refused(kind)) return [issue(['nodes', i, 'kind'], kind)];
    if (typeof kind !== 'string' || !Object.hasOwn(NODE_KINDS, kind)) return [];
    const inside = NODE_KINDS[kind as keyof typeof NODE_KINDS].planner?.carries?.(node as AnyNode) ?? [];
    return inside.flatMap((c) => (refused(c.kind) ? [issue(['nodes', i, ...c.at], c.kind)] : []));
  });
}

/** `signal` aborts the planner call (the run was cancelled, failed or timed out meanwhile). */
export async function planTask(
  deps: PlannerDeps,
  prompt: PlannerPromptInput,
  runInput: unknown,
  signal?: AbortSignal,
  /** The run's own model and reasoning effort for the planner call (`model`, `thinking` of a dag-mode run). */
  call: { readonly model?: string; readonly thinking?: ThinkingOptions } = {},
): Promise<PlanOutcome> {
  const asked = await askPlanner(
    deps.model,
    plannerMessages(prompt),
    { name: 'graph', schema: PLANNER_SCHEMA },
    (raw) => {
      const checked = validatePlan(deps, raw, runInput);
      return checked.ok ? { ok: true, value: checked } : checked;
    },
    signal,
    call,
  );
  if (!asked.ok) return asked;
  const { value, ...rest } = asked;
  return { ...rest, graph: value.graph, plan: value.plan, topology: value.topology };
}

/** What one planner exchange (an answer and at most one repair) ends with. */
export type Asked<T> = (
  | { ok: true; value: T; usage: ModelUsage; calls: number; model: string }
  | { ok: false; issues: readonly ValidationIssue[]; usage: ModelUsage; calls: number; model: string }
) & {
  /**
   * The fingerprint of what the planner was given: the sha256 of the canonical JSON of its first
   * call's messages (a repair adds only the planner's own answer and the issues found in it).
   */
  inputSha256?: string;
};

/**
 * Asks the planner model with structured output named `schema.name`, parses and checks the answer
 * with `check`, and sends every problem back for one repair. Shared by plan-once and window
 * planning, so both count calls and tokens, retry and repair the same way.
 */
export async function askPlanner<T>(
  client: ModelClient,
  messages: ChatMessage[],
  schema: { name: string; schema: Record<string, unknown> },
  check: (raw: unknown) => { ok: true; value: T } | { ok: false; issues: readonly ValidationIssue[] },
  signal?: AbortSignal,
  /** The run's own model and reasoning effort (`model`, `thinking` of a task run). */
  call: { readonly model?: string; readonly thinking?: ThinkingOptions } = {},
): Promise<Asked<T>> {
  const usage: ModelUsage = { promptTokens: 0, completionTokens: 0 };
  let calls = 0;
  const model = call.model ?? client.config.plannerModel;
  let issues: readonly ValidationIssue[] = [];
  const given = fingerprint(messages);
  const fingerprinted = given !== undefined ? { inputSha256: given } : {};
  // One plan, and at most one repair of it.
  for (let round = 0; round < 2; round++) {
    const answer = await inChatSpan(model, () =>
      client.chat({
        model,
        messages,
        schema,
        ...(call.thinking?.effort ? { thinking: { effort: call.thinking.effort } } : {}),
        retries: client.config.maxRetries,
        ...(signal ? { signal } : {}),
      }),
    );
    observeModelCall(answer);
    usage.promptTokens += answer.usage.promptTokens;
    usage.completionTokens += answer.usage.completionTokens;
    if (answer.usage.cachedPromptTokens) {
      usage.cachedPromptTokens = (usage.cachedPromptTokens ?? 0) + answer.usage.cachedPromptTokens;
    }
    calls += answer.calls;
    let raw: unknown;
    try {
      raw = JSON.parse(answer.text) as unknown;
    } catch {
      raw = undefined;
    }
    const result =
      raw === undefined
        ? { ok: false as const, issues: [{ path: '', message: 'the answer is not JSON' }] }
        : check(raw);
    if (result.ok) return { ok: true, value: result.value, usage, calls, model, ...fingerprinted };
    issues = result.issues;
    messages.push({ role: 'assistant', content: answer.text } satisfies ChatMessage, repairMessage(issues));
  }
  return { ok: false, issues, usage, calls, model, ...fingerprinted };
}
