import { z } from 'zod';

/**
 * Node ids are short, URL- and key-safe names. A dot never appears, so `runId.nodeId` is
 * unambiguous; a slash never appears either, because nested graphs name their nodes `parent/child`.
 */
export const NodeId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must match [A-Za-z0-9_-]{1,64}');
export type NodeId = z.infer<typeof NodeId>;

/**
 * After its retries a failed node fails the run (`fail`), passes `{error}` downstream
 * (`continue`), or, in a task run, hands the run back to the planner (`replan`).
 */
export const OnError = z.enum(['fail', 'continue', 'replan']);
export type OnError = z.infer<typeof OnError>;

const Retries = z.number().int().min(0).max(10);

/** Per-node override of how many times a failure of each class is retried. */
export const NodeRetry = z.strictObject({
  network: Retries.optional(),
  timeout: Retries.optional(),
  rate_limited: Retries.optional(),
  server: Retries.optional(),
  auth: Retries.optional(),
  validation: Retries.optional(),
  internal: Retries.optional(),
});
export type NodeRetry = z.infer<typeof NodeRetry>;

const Args = z.record(z.string(), z.unknown());
const TimeoutMs = z.number().int().positive().max(600_000);

/** Fields every executable node may carry. */
const Common = {
  id: NodeId,
  timeoutMs: TimeoutMs.optional(),
  retry: NodeRetry.optional(),
  onError: OnError.optional(),
};

export const ToolNode = z.strictObject({
  ...Common,
  kind: z.literal('tool'),
  tool: z.string().min(1).max(128),
  args: Args.default({}),
});
export type ToolNode = z.infer<typeof ToolNode>;

/**
 * A model call. The model sees the system prompt, this prompt and the outputs it references
 * (`{{dep.output…}}`) — nothing else of the run. With `schema` (a JSON schema) the answer is
 * structured and validated; without, the output is `{text}`.
 */
export const LlmNode = z.strictObject({
  ...Common,
  kind: z.literal('llm'),
  prompt: z.string().min(1).max(200_000),
  system: z.string().max(200_000).optional(),
  schema: z.record(z.string(), z.unknown()).optional(),
  model: z.string().min(1).max(200).optional(),
});
export type LlmNode = z.infer<typeof LlmNode>;

/**
 * An exit condition, checked by the harness on each iteration's snapshot (`{status, output,
 * error}`): exactly one operator.
 */
export const Condition = z
  .strictObject({
    path: z.string().min(1),
    equals: z.unknown().optional(),
    in: z.array(z.unknown()).optional(),
    exists: z.boolean().optional(),
    gte: z.number().optional(),
    lte: z.number().optional(),
  })
  .refine((c) => ['equals', 'in', 'exists', 'gte', 'lte'].filter((k) => k in c).length === 1, {
    message: 'give exactly one of equals, in, exists, gte, lte',
  });
export type Condition = z.infer<typeof Condition>;

/** Waits for a named signal (`POST /v1/runs/:id/signals/:name`); holds no worker slot meanwhile. */
export const WaitNode = z.strictObject({
  id: NodeId,
  kind: z.literal('wait'),
  signal: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must match [A-Za-z0-9_.-]{1,64}'),
  timeoutSeconds: z
    .number()
    .positive()
    .max(30 * 24 * 3600)
    .default(3600),
  onTimeout: z.enum(['fail', 'continue']).default('fail'),
});
export type WaitNode = z.infer<typeof WaitNode>;

/** A loop body that calls one tool per iteration. */
export const ToolBody = z.strictObject({ tool: z.string().min(1).max(128), args: Args.default({}) });
export type ToolBody = z.infer<typeof ToolBody>;

/**
 * A loop body that runs a nested graph per iteration, as a child run. `graph` is checked by the
 * validator, recursively; `input` is what the nested graph reads as `input.*`.
 */
export const GraphBody = z.strictObject({ graph: z.unknown(), input: z.unknown().optional() });
export interface GraphBody {
  graph: Graph;
  input?: unknown;
}

/**
 * A loop body that is the classic tool-calling agent: each iteration one model call, then the
 * tools it asked for; the harness stops when the model asks for none or maxIterations is reached.
 */
export const AgentBody = z.strictObject({
  agent: z.strictObject({
    prompt: z.string().min(1).max(200_000),
    system: z.string().max(200_000).optional(),
    /** Tools the agent may call; all the agent's allowed tools when omitted. */
    tools: z.array(z.string().min(1).max(128)).max(64).optional(),
    model: z.string().min(1).max(200).optional(),
  }),
});
export type AgentBody = z.infer<typeof AgentBody>;

/**
 * A bounded loop: the only place a loop may live. Repeats its body until the exit condition
 * holds or maxIterations is reached, both checked by the harness.
 */
export const LoopNode = z.strictObject({
  ...Common,
  kind: z.literal('loop'),
  /** A tool call (`{tool, args}`), a nested graph (`{graph, input}`) or an agent (`{agent}`). */
  body: z.union([ToolBody, GraphBody, AgentBody]),
  /** Stop as soon as an iteration satisfies this; without it the loop runs maxIterations times. */
  until: Condition.optional(),
  maxIterations: z.number().int().min(1).max(50),
  /** Pause between iterations; the worker slot is released meanwhile. */
  intervalMs: z.number().int().min(0).max(3_600_000).default(0),
});
export type LoopNode = Omit<z.infer<typeof LoopNode>, 'body'> & { body: LoopBody };

export type LoopBody = ToolBody | GraphBody | AgentBody;
export const isGraphBody = (body: LoopBody): body is GraphBody => 'graph' in body;
export const isAgentBody = (body: LoopBody): body is AgentBody => 'agent' in body;

/**
 * A nested graph, expanded into namespaced nodes (`parent/child`) before the run starts; its
 * output is its sinks' outputs. `graph` is checked by the validator, recursively, like any graph.
 */
export const SubgraphNode = z.strictObject({
  id: NodeId,
  kind: z.literal('graph'),
  graph: z.unknown(),
  /** What the nested graph reads as `input.*`; may reference the parent graph's nodes. */
  input: z.unknown().optional(),
});
export interface SubgraphNode {
  id: string;
  kind: 'graph';
  graph: Graph;
  input?: unknown;
}

export type GraphNode = ToolNode | LlmNode | WaitNode | LoopNode | SubgraphNode;
/** What remains after nested graphs are expanded: the nodes a worker executes. */
export type ExecutableNode = ToolNode | LlmNode | WaitNode | LoopNode;

/** The schema of each node kind. */
export const NODE_SCHEMAS = {
  tool: ToolNode,
  llm: LlmNode,
  wait: WaitNode,
  loop: LoopNode,
  graph: SubgraphNode,
} as const;
export type NodeKind = keyof typeof NODE_SCHEMAS;

export const Edge = z.tuple([NodeId, NodeId]);
export type Edge = z.infer<typeof Edge>;

export interface Graph {
  nodes: GraphNode[];
  edges: Edge[];
}

/** A graph whose nested graphs are expanded: what a run executes. */
export interface ExecutableGraph {
  nodes: ExecutableNode[];
  edges: [string, string][];
}
