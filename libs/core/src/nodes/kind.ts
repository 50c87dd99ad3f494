/**
 * What a node kind is. Each kind (tool, llm, wait, loop, graph) is one module in this folder that
 * declares, in one entry, everything the rest of Tetraloop needs to know about it: its schema, the
 * fields that may hold references, its static checks, how the planner may write it, whether its
 * retries may vary, whether it may be a fallback, whether it replans in a window, how it expands,
 * and — for kinds that execute — whether it retries, whether it may run handed off, the tool call
 * it declares, what it charges, its call limits, its label and its runner. Validation, expansion,
 * the plan cache, the node executor, handoff, node-job enqueueing, the planner and window planning
 * read the table in `index.ts`; none of them branches on a kind.
 *
 * A runner talks to the harness only through {@link NodeRun}: the harness owns snapshots, retries,
 * limits, hooks, parking and the store, so a kind never touches Redis or BullMQ itself.
 */
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { Budget, NodeSnapshot, NodeUsage, UsageCharge } from '../domain/node-snapshot.js';
import type { NodeErrorData } from '../errors/node-error.js';
import type { AnyNode, GraphOf, NodeBase, NodeRetry } from '../graph/schema.js';
import type { ChatCall, ChatResult } from '../model/model-client.js';
import type { SecretRef } from '../secrets/secret-ref.js';
import type { Tool, ToolOutcome, ToolRegistry } from '../tools/tool.js';

/** What validation offers a kind's own checks; each reports its problems with a path and answers ok. */
export interface NodeCheck {
  /** Path of the node in the submitted graph, e.g. `['nodes', 2]`. */
  readonly path: readonly PropertyKey[];
  /** Reports a problem at `at` below the node. */
  issue(at: readonly PropertyKey[], message: string): void;
  /**
   * A model is configured here, and the run may call `name` (the default model when undefined);
   * a refused model is reported at `at` below the node.
   */
  model(name: string | undefined, at: readonly PropertyKey[]): boolean;
  /** The tool exists and this run's agent may use it. */
  toolName(name: string, at: readonly PropertyKey[]): boolean;
  /** The tool is allowed and args without references fit its input schema; `at` holds `tool` and `args`. */
  toolCall(name: string, args: Record<string, unknown>, at: readonly PropertyKey[]): boolean;
  /**
   * A node that runs in this node's stead per item (a map's item template) at `at`, checked like
   * a node of its own (its tool-call args noted as this node's); undefined when it has problems.
   */
  template(raw: unknown, at: readonly PropertyKey[]): AnyNode | undefined;
  /** A nested graph at `at`, checked one level deeper; undefined when it has problems. */
  nested(raw: unknown, at: readonly PropertyKey[]): GraphOf | undefined;
  /**
   * A graph run per item (a map's `graph`) at `at`, checked one level deeper, where its nodes'
   * references to `item` and `index` read `input.item` and `input.index`; answered with them so
   * rewritten, or undefined when it has problems.
   */
  itemGraph(raw: unknown, at: readonly PropertyKey[]): GraphOf | undefined;
  /**
   * The secrets named at `at` (an agent's `secrets`) are ones this graph may use: any of the
   * tenant's in a graph its caller wrote, only the run's grant in one a model wrote.
   */
  secretNames(names: readonly string[], at: readonly PropertyKey[]): boolean;
  /**
   * The longest a wait may last here (`TETRALOOP_MAX_WAIT_DAYS`, in ms), and the instant the graph
   * is checked at, which a wait `until` a time counts from.
   */
  readonly waits: { readonly maxMs: number; readonly now: number };
}

/** How the planner may write a kind: the shape it answers in and the rule its prompt states. */
export interface PlannerEntry {
  readonly schema: z.ZodType;
  readonly rule: string;
  /**
   * The kinds a planned node of this kind runs inside it (a map's item template), with where each
   * is named: a plan may hold them only when the planner may write them too.
   */
  readonly carries?: (node: AnyNode) => { readonly at: readonly PropertyKey[]; readonly kind: unknown }[];
}

/** Every kind. */
export interface NodeKindSpec<N extends NodeBase> {
  readonly kind: N['kind'];
  /** Parses one node of this kind; nested graphs are `unknown` here and checked by `check`. */
  readonly schema: z.ZodType;
  /** Paths inside the node of the fields that may hold references; absent fields are skipped. */
  readonly referenceFields: readonly (readonly string[])[];
  /**
   * The fields whose references may also read `item` and `index`, being run per item (a map's
   * `node` template and its graph template's `input`); absent for kinds without one.
   */
  readonly itemFields?: readonly string[];
  /** Checks beyond the schema. Returns the node as it will run, or undefined after reporting problems. */
  check(node: N, check: NodeCheck): N | undefined;
  /** Absent when the planner may not write this kind. */
  readonly planner?: PlannerEntry;
  /** Whether its retries may run with overrides of its own fields (`retry.vary`, `graph/retry-variants.ts`). */
  readonly variesOnRetry: boolean;
  /**
   * Whether it may stand in for a node not started in time: a TTL's `fallback` with
   * `onExpire: "downgrade"` (`graph/task-ttl.ts`).
   */
  readonly mayBeFallback: boolean;
  /**
   * In a window run, whether a node of this kind that sets no `onError` hands the run back to the
   * planner when it fails (`onError: "replan"`): its failure is news for the next window.
   */
  readonly replansInWindow: boolean;
}

/** What expansion offers a kind that expands: the nodes of a nested graph, and reference renaming. */
export interface ExpandHelpers {
  /** A nested graph (validated with its parent) expanded into executable nodes, recursively. */
  expand(graph: GraphOf): { nodes: AnyNode[]; edges: [string, string][] };
  /** `node` with each reference in its reference fields renamed by `rename(root, path)`. */
  renameReferences(node: AnyNode, rename: (root: string, path: readonly string[]) => string): AnyNode;
}

/** The executable nodes and edges that replace a node, and where the outer graph's edges attach. */
export interface Expansion {
  readonly nodes: AnyNode[];
  readonly edges: [string, string][];
  /** The node that edges into the replaced node now point to. */
  readonly entry: string;
  /** The node that edges out of the replaced node now leave from; it keeps the replaced node's id. */
  readonly exit: string;
}

/** A kind that expands into other nodes before the run starts (and never executes itself). */
export interface ExpandingKindSpec<N extends NodeBase> extends NodeKindSpec<N> {
  expand(node: N, helpers: ExpandHelpers): Expansion;
}

/** A kind whose nodes a worker executes, one node job each. */
export interface ExecutableKindSpec<N extends NodeBase> extends NodeKindSpec<N> {
  /** Whether failed attempts are retried by error class; the node's job gets 1 + its retries attempts. */
  readonly retryable: boolean;
  /** The node's own retry counts per error class, overriding the deployment's. */
  retry(node: N): NodeRetry | undefined;
  /** Whether each execution charges one tool call to the run, checked against the budget before it runs. */
  readonly chargesToolCall: boolean;
  /** Whether a spent tool-time budget stops it before it runs (waiting is not work). */
  readonly usesToolTime: boolean;
  /** The limit of a call when the node sets no `timeoutMs`: the tool or the model default, or per call. */
  readonly defaultTimeout: 'tool' | 'model' | 'per-call';
  /** The node's own call limit, if it has one. */
  timeoutMs(node: N): number | undefined;
  /**
   * Whether a node released by another may run handed off, in the job of the node that released it
   * (`executor/handoff.ts`); a kind that parks by nature (a wait for its signal, a loop between
   * iterations) always gets a job of its own.
   */
  readonly mayRunHandedOff: boolean;
  /**
   * The one tool call each execution makes, as the graph declares it (its args may hold
   * references), for a kind that makes exactly one; undefined when its calls are known only as it
   * runs. Flow control may ask for such a call's capacity before the node starts.
   */
  declaredToolCall(node: N): { readonly tool: string; readonly args: Record<string, unknown> } | undefined;
  /** Its label in events and metrics: the tool it calls, or its kind. */
  label(node: N): string;
  /** Whether a failure is data for the dependents (`{error}` as output) instead of the end of the run. */
  continuesOnFailure(node: N): boolean;
  /** Whether a failure hands a task run back to the planner. */
  replansOnFailure(node: N): boolean;
  /** What the final execution charges the run (kinds that charge as they go return nothing). */
  charge(snapshot: NodeSnapshot): UsageCharge;
  /** Runs one execution of the node. */
  run(run: NodeRun<N>): Promise<NodeSnapshot>;
}

/**
 * A model call's outcome; a successful one with what it cost in integer nano-dollars (absent when
 * its model has no price).
 */
export type ModelOutcome =
  { ok: true; result: ChatResult; costNanoUsd?: number } | { ok: false; error: NodeErrorData };
export type BeforeToolCall = { ok: true; args: unknown } | { ok: false; error: NodeErrorData };

/** Which call of an execution a tool call is, and the secrets its declared args reference. */
export interface ToolCallOptions {
  /**
   * Which call of the node's execution: `0` for a tool node's one call (the default), the
   * iteration for a loop's tool body, `<iteration>.<call>` for an agent's calls. What makes the
   * call's `Idempotency-Key` differ from every other call's and stay the same across its retries.
   */
  readonly index?: string;
  /** The model's id for the call, when a model asked for it (an agent's calls). */
  readonly callId?: string;
  /**
   * The `{"$secret"}` references of the args as the graph declares them, found before references
   * were resolved: only these places are filled in, at call time, with the tenant's secrets.
   */
  readonly secrets?: readonly SecretRef[];
}

/** Usage of the run so far, as a runner tracks it between iterations. */
export interface RunUsageSoFar {
  readonly toolCalls: number;
  readonly toolTimeMs: number;
  readonly tokens: number;
  /** What the run's priced model calls cost, in nano-dollars. */
  readonly costNanoUsd: number;
}

/** What a loop iteration over a nested graph asks for: a child run of its own. */
export interface ChildRunRequest {
  readonly graph: GraphOf;
  readonly input: unknown;
  readonly timeoutSeconds: number;
  readonly budget: Budget;
}

/** What a loop iteration reads of its child run (a subset of the run document). */
export interface ChildRunState {
  readonly runId: string;
  readonly status: string;
  readonly createdAt: string;
  readonly finishedAt: string | null;
  readonly output: unknown;
  readonly error: { code: string; message: string } | null;
  readonly usage: {
    toolCalls: number;
    toolTimeMs: number;
    promptTokens: number;
    completionTokens: number;
    modelCalls: number;
    costUsd: number;
    unpricedModelCalls: number;
  };
}

/** The harness as a runner sees it: one execution of one node. */
export interface NodeRun<N extends NodeBase> {
  readonly node: N;
  readonly runId: string;
  readonly generation: number;
  readonly timeoutSeconds: number;
  /** 1-based attempt number of this execution. */
  readonly attempt: number;
  readonly startedAt: string;
  /** The run's usage when this execution began, its budget and deadline, and loop progress so far. */
  readonly usage: RunUsageSoFar;
  readonly budget: Budget;
  readonly deadlineAt: number | null;
  readonly progress: readonly unknown[];
  readonly tools: ToolRegistry;
  /** The tools the run's agent may use (its allowlist), read when asked; undefined: every tool in `tools`. */
  allowedTools(): ReadonlySet<string> | undefined;
  /** Each value inserted into a prompt, and each tool result an agent sees, is cut to this. */
  readonly modelInputChars: number;
  /** Aborted when the run is cancelled, fails elsewhere or times out. */
  readonly signal: AbortSignal;
  readonly log: Logger;
  /** What references read: `input` and the snapshots of the node's dependencies. */
  readonly scope: Readonly<Record<string, unknown>>;
  /** `value` with its references filled in from the scope. */
  resolve(value: unknown): unknown;
  /**
   * Keeps what the node's call is made with on its snapshot (`input`), so the node can be inspected
   * and run again alone: a tool's args after the hooks (secrets as their `{"$secret"}` references),
   * a model call's rendered prompts. A large one goes to the blob store like an output.
   */
  recordInput(value: unknown): void;
  /** A final snapshot of this execution, with the attempts recorded before it. */
  snapshot(
    status: NodeSnapshot['status'],
    result: { output?: unknown; error?: NodeErrorData; usage?: NodeUsage },
  ): NodeSnapshot;
  /** A failed execution: retried later (this throws to BullMQ), cancelled, or a failed snapshot. */
  fail(error: NodeErrorData, usage?: NodeUsage): Promise<NodeSnapshot>;
  /**
   * Calls a tool under the tightest of the node's timeout, the deadline and the tool-time budget,
   * with the declared secrets filled in; their values are scrubbed from the outcome.
   */
  callTool(tool: Tool, args: unknown, toolTimeUsedMs: number, call?: ToolCallOptions): Promise<ToolOutcome>;
  /**
   * Plugin hooks around a tool call: may rewrite or block it, or wait for an approval. `request`
   * says where in the node the call was asked (an agent's turn), so each turn's approval is its own.
   */
  beforeToolCall(tool: string, args: unknown, request?: string): Promise<BeforeToolCall>;
  afterToolCall(tool: string, args: unknown, outcome: ToolOutcome): Promise<void>;
  /**
   * Calls the model under the node's limits, the token and money budgets and the tenant's daily cap
   * (a spent money budget may park the job for a budget decision), streaming text to the run's events.
   */
  callModel(call: Omit<ChatCall, 'signal' | 'onDelta'>, used?: RunUsageSoFar): Promise<ModelOutcome>;
  /** The signal's payload once it arrived, or `delivered: false` after the timeout; parks meanwhile. */
  awaitSignal(signal: string, timeoutSeconds: number): Promise<{ delivered: boolean; payload: unknown }>;
  /** Parks the node job in the delayed set until `until` (ms); never returns. */
  park(until: number): Promise<never>;
  /**
   * Sleeps to `wakeAt` (ms; the node's first call's is kept, whatever later calls give), parking
   * the job until then. Answers the wake time kept, and `woke: false` when the run's deadline came
   * first.
   */
  sleepUntil(wakeAt: number): Promise<{ wakeAt: number; woke: boolean }>;
  /** Records loop iteration `n` once, charging it; answers the run's usage after it. */
  recordIteration(n: number, iteration: unknown, charge: UsageCharge): Promise<RunUsageSoFar>;
  /** Steering messages sent to this run, oldest first. */
  steering(): Promise<string[]>;
  /** Appends an event of this node to the run's stream. */
  event(type: string, data: unknown): Promise<void>;
  /** The child run of iteration `n`, if it was started. */
  childRun(n: number): Promise<ChildRunState | null>;
  /**
   * Runs `items` through the node's item template, at most `concurrency` at once, and answers their
   * snapshots in item order once all settled (undefined for one that never completed); parks the
   * job meanwhile (never returns while items run). With `stopOnFailure`, no item starts after one failed.
   */
  mapItems(
    items: readonly unknown[],
    options: { concurrency: number; stopOnFailure: boolean },
  ): Promise<(NodeSnapshot | undefined)[]>;
  /** Starts the child run of iteration `n` (once) under this node's job. */
  startChildRun(n: number, request: ChildRunRequest): Promise<string>;
  /** The child run of iteration `n` once settled; parks the job until then (never returns while it runs). */
  settledChildRun(n: number): Promise<ChildRunState | null>;
}
