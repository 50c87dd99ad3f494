/**
 * The run as clients and every layer see it: statuses, node snapshots and attempts, live node
 * states, budgets and usage, events, and the run document. Types and schemas only.
 */
import { z } from 'zod';
import { RunError } from '../errors/run-error.js';
import { Edge } from '../graph/schema.js';
import { AttemptRecord, Budget, LiveNodeState, NodeSnapshot, OnBudget, Sha256Hex } from './node-snapshot.js';
import { Thinking } from './thinking.js';
import { WaitRecord } from './signal.js';
import { RunWebhookView } from './webhook.js';

export * from './node-snapshot.js';
export * from './signal.js';

export { RunError };

export * from './wait-limits.js';

export const RunStatus = z.enum(['queued', 'running', 'succeeded', 'failed', 'cancelled', 'timed_out']);
export type RunStatus = z.infer<typeof RunStatus>;

export const TERMINAL_RUN_STATUSES: ReadonlySet<RunStatus> = new Set([
  'succeeded',
  'failed',
  'cancelled',
  'timed_out',
]);
export const isTerminal = (status: RunStatus): boolean => TERMINAL_RUN_STATUSES.has(status);

/** Where a map node's items stand, as in its `map.progress` events. */
export const MapProgress = z.object({
  done: z.number().int().nonnegative(),
  failed: z.number().int().nonnegative(),
  running: z.number().int().nonnegative(),
  total: z.number().int().nonnegative(),
});
export type MapProgress = z.infer<typeof MapProgress>;

/** Fields every node of the run document has beside its state. */
const NodeViewFields = {
  id: z.string(),
  /** The signals and approvals it waited for, oldest first. */
  waits: z.array(WaitRecord).optional(),
  /** Time its calls spent held back by flow control, in all. */
  throttledMs: z.number().nonnegative().optional(),
  /** A map node's items (its latest execution of them): present once it started them. */
  map: MapProgress.optional(),
};

/** A node in the run document: its snapshot once final, its live state before, `pending` until queued. */
export const NodeView = z.union([
  NodeSnapshot.extend(NodeViewFields),
  LiveNodeState.extend({ ...NodeViewFields, attempts: z.array(AttemptRecord) }),
  z.object({ ...NodeViewFields, status: z.literal('pending'), attempts: z.array(AttemptRecord) }),
]);
export type NodeView = z.infer<typeof NodeView>;

/** What a run has used so far. */
export const RunUsage = z.object({
  toolCalls: z.number().int().nonnegative(),
  toolTimeMs: z.number().nonnegative(),
  promptTokens: z.number().int().nonnegative(),
  completionTokens: z.number().int().nonnegative(),
  totalTokens: z.number().int().nonnegative(),
  modelCalls: z.number().int().nonnegative(),
  /** What the priced model calls cost, in USD (exact sums of nano-dollars, shown as dollars). */
  costUsd: z.number().nonnegative(),
  /** Model calls whose model has no price: not in `costUsd`. */
  unpricedModelCalls: z.number().int().nonnegative(),
});
export type RunUsage = z.infer<typeof RunUsage>;

/** Most tags a run may carry. */
export const MAX_RUN_TAGS = 10;

/** A run's tag: a label to find it by (`GET /v1/runs?tag=`); part of a Redis key name. */
export const RunTag = z
  .string()
  .regex(/^[A-Za-z0-9_.:=/-]{1,64}$/, 'a tag is 1–64 letters, digits or _ . : = / -');
export type RunTag = z.infer<typeof RunTag>;

/** A rerun's origin: the run it forked from and the node it ran again from. */
export const RerunOf = z.object({ runId: z.string(), from: z.string() });
export type RerunOf = z.infer<typeof RerunOf>;

/** The id of a schedule or a trigger: part of a Redis key name. */
export const OriginId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'an id is 1–64 letters, digits, _ or -');

/**
 * What started a run that no API call started: a schedule's firing, or a trigger with the events
 * it consumed (docs/triggers.md). Ids only; both are part of Redis key names (the search indexes).
 */
export interface RunOrigin {
  readonly scheduleId?: string;
  readonly triggerId?: string;
  /** The ids of the events a trigger's run consumed, oldest first. */
  readonly eventIds?: readonly string[];
}

/** A run as a search lists it (`GET /v1/runs`): what it is, where it stands, what it used. */
export const RunListing = z.object({
  runId: z.string(),
  status: RunStatus,
  agentId: z.string(),
  /** As stored (tenant-scoped); the API shows it as the client named it. */
  sessionKey: z.string().nullable(),
  /** The first 200 characters of a task run's task. */
  task: z.string().nullable(),
  createdAt: z.string(),
  startedAt: z.string().nullable(),
  finishedAt: z.string().nullable(),
  /** From `startedAt` (`createdAt` for a run that never started) to `finishedAt`; null until settled. */
  durationMs: z.number().nonnegative().nullable(),
  /** Nodes of its plan (0 while a task run waits for its plan), and how many of them succeeded and failed. */
  nodes: z.object({
    total: z.number().int().nonnegative(),
    succeeded: z.number().int().nonnegative(),
    failed: z.number().int().nonnegative(),
  }),
  usage: RunUsage,
  tags: z.array(z.string()),
  rerunOf: RerunOf.nullable(),
  /** The schedule whose firing started the run. */
  scheduleId: z.string().nullable(),
  /** The trigger an event matched to start the run. */
  triggerId: z.string().nullable(),
});
export type RunListing = z.infer<typeof RunListing>;

/** The stream families clients follow: each event type belongs to one, with a phase. */
export const EVENT_FAMILIES = [
  'lifecycle',
  'plan',
  'node',
  'tool',
  'assistant',
  'usage',
  'budget',
  'environment',
] as const;
export type EventFamily = (typeof EVENT_FAMILIES)[number];

/** Family and phase of an event type (`run.finished` → lifecycle/end or error, `tool.start` → tool/start…). */
export function familyOf(type: string, data: unknown): { family: EventFamily; phase: string } {
  const [head = '', tail = ''] = type.split('.');
  switch (head) {
    case 'run': {
      if (tail === 'finished') {
        const status = (data as { status?: string } | undefined)?.status;
        return { family: 'lifecycle', phase: status === 'succeeded' ? 'end' : 'error' };
      }
      return { family: 'lifecycle', phase: tail === 'decided' ? 'update' : 'start' };
    }
    case 'plan':
    case 'replan':
      return { family: 'plan', phase: tail || 'created' };
    case 'tool':
      return { family: 'tool', phase: tail };
    case 'assistant':
      return { family: 'assistant', phase: tail };
    case 'usage':
      return { family: 'usage', phase: 'update' };
    case 'budget':
      return { family: 'budget', phase: tail };
    case 'node':
      return { family: 'node', phase: tail };
    default:
      return { family: 'environment', phase: tail || head };
  }
}

/** One entry of a run's event stream. */
export const RunEvent = z.object({
  /** Its place in the run's stream (1, 2, 3, …): the SSE id. */
  seq: z.number().int().nonnegative(),
  type: z.string(),
  family: z.enum(EVENT_FAMILIES).optional(),
  phase: z.string().optional(),
  /** Epoch milliseconds (Redis server time). */
  ts: z.number(),
  runId: z.string(),
  nodeId: z.string().optional(),
  data: z.unknown().optional(),
});
export type RunEvent = z.infer<typeof RunEvent>;

/**
 * One window of a window-mode run: the plan generation it was installed as, the nodes the planner
 * added, the outputs the next window's planner is shown, and why the planner was asked.
 */
export const WindowRecord = z.object({
  /** The run generation the window ran as. */
  generation: z.number().int().nonnegative(),
  /** Ids of the nodes this window added, in the planner's order. */
  nodes: z.array(z.string()),
  /** Nodes whose outputs the next window's planner is shown. */
  observe: z.array(z.string()),
  /** The planner said the task is done once this window's nodes are. */
  goalReached: z.boolean(),
  /** Why the planner was asked: `start`, `window_drained`, a node's failure, `environment_changed`. */
  reason: z.string(),
  /** The fingerprint of what this window's planner was given (as `PlanningRecord.inputSha256`). */
  inputSha256: Sha256Hex.optional(),
  /** The planner calls of this window (a repair included). */
  usage: z.object({
    promptTokens: z.number().int().nonnegative(),
    completionTokens: z.number().int().nonnegative(),
    modelCalls: z.number().int().nonnegative(),
  }),
});
export type WindowRecord = z.infer<typeof WindowRecord>;

/** How a plan was made, recorded with the run so it can be replayed. */
export const PlanningRecord = z.object({
  plannerModel: z.string(),
  promptVersion: z.string(),
  /**
   * The fingerprint of what the planner was given for this plan generation: the hex sha256 of the
   * canonical JSON (RFC 8785) of its call's messages (system prompt with catalog, lessons and
   * workspace; the task, input and, replanning, what completed). Absent when no planner was asked
   * (a plan cache hit: `cachedFrom`'s record has it). Each generation's is in its `plan` event.
   */
  inputSha256: Sha256Hex.optional(),
  toolCatalogVersion: z.string(),
  /** The run generation the plan was made for. */
  planVersion: z.number().int().nonnegative(),
  /** The session environment version the plan was made from (0 outside sessions). */
  environmentVersion: z.number().int().nonnegative(),
  /** The agent's lessons version the plan was made with, and the lessons its prompt stated. */
  lessonsVersion: z.number().int().nonnegative().optional(),
  lessons: z.array(z.string()).optional(),
  /**
   * A first plan with the plan cache on: `hit` when it came from the cache (no planner call),
   * `miss` when the planner was asked. Absent for replans and with the cache off.
   */
  cache: z.enum(['hit', 'miss']).optional(),
  /** On a hit: the run the cached plan was made for. */
  cachedFrom: z.string().optional(),
  /** Window mode: every window so far, oldest first (the last one is the current plan's). */
  windows: z.array(WindowRecord).optional(),
});
export type PlanningRecord = z.infer<typeof PlanningRecord>;

/**
 * A run's graph as the document shows it: as submitted or planned, nested graphs unexpanded. It
 * was validated before it was stored (`Graph` in `nodes/` names its kinds); here a node is any kind.
 */
export const DocumentGraph = z.object({
  nodes: z.array(z.looseObject({ id: z.string(), kind: z.string() })),
  edges: z.array(Edge),
});

/** A skill file an agent run's prompt left out, and why (see `workspace/skills.ts`). */
export const SkillRefusal = z.object({
  /** Relative to the agent's workspace folder: `skills/<file>.md`. */
  file: z.string(),
  /** The skill's name, when its front matter got that far. */
  skill: z.string().optional(),
  /** The tool it needs that the agent may not use, when that is why. */
  tool: z.string().optional(),
  reason: z.string(),
});
export type SkillRefusal = z.infer<typeof SkillRefusal>;

/** The skills an agent run's prompt was made with: their hash, names, and the files refused. */
export const SkillsRecord = z.object({
  /** `sha256:` of the loaded skills in prompt order (name, description, tools, body). */
  hash: z.string(),
  /** The skills' names, in the order the prompt holds them. */
  loaded: z.array(z.string()),
  refused: z.array(SkillRefusal),
});
export type SkillsRecord = z.infer<typeof SkillsRecord>;

/** What the API returns for a run. */
export const RunDocument = z.object({
  runId: z.string(),
  status: RunStatus,
  createdAt: z.string(),
  startedAt: z.string().nullable(),
  /** Set once the run has settled: its outcome is decided and every node is final. */
  finishedAt: z.string().nullable(),
  /** The graph as submitted or planned; null while a task run waits for its plan. */
  graph: DocumentGraph.nullable(),
  /** The task of a task run. */
  task: z.string().nullable(),
  /** The model a task run (or session message) asked for; null: the deployment's. */
  model: z.string().nullable(),
  /** The reasoning effort a task run asked for, as given; null: none. */
  thinking: Thinking.nullable(),
  agentId: z.string(),
  /** The tenant the run belongs to (the tenant of the key that made it). */
  tenant: z.string(),
  /** The session whose lane the run belongs to. */
  sessionKey: z.string().nullable(),
  /** While a session run waits for its turn: its place in the lane (1 = next). */
  lanePosition: z.number().int().positive().nullable(),
  /** How the current plan was made (task runs). */
  planning: PlanningRecord.nullable(),
  replans: z.number().int().nonnegative(),
  input: z.unknown(),
  timeoutSeconds: z.number().int().positive(),
  budget: Budget,
  /** What a model call does when the money budget is spent: fail, or pause for a decision. */
  onBudget: OnBudget,
  usage: RunUsage,
  /** Bumped by every resume; node jobs of older generations are discarded. */
  generation: z.number().int().nonnegative(),
  metadata: z.record(z.string(), z.unknown()).nullable(),
  /** 1 (lowest) to 10: which waiting calls flow control serves first. */
  priority: z.number().int().min(1).max(10),
  /** Labels given at creation, to find the run by. */
  tags: z.array(z.string()),
  /** For a rerun: the run it forked from and the node it ran again from. */
  rerunOf: RerunOf.nullable(),
  /** The schedule whose firing started the run (docs/triggers.md). */
  scheduleId: z.string().nullable(),
  /** The trigger an event matched to start the run, and the events it consumed, oldest first. */
  triggerId: z.string().nullable(),
  eventIds: z.array(z.string()).nullable(),
  /**
   * The version tag of the configuration the run was accepted under (`TETRALOOP_CONFIG_VERSION`,
   * `version:` of the config file); null for a run from before versions were recorded.
   */
  configVersion: z.string().nullable().optional(),
  /**
   * An agent run's skills (loop mode, or a session's loop run) as its prompt was made with them;
   * null for other runs, and for an agent run not prepared yet.
   */
  skills: SkillsRecord.nullable().optional(),
  /** Where the run's own events are posted, and its recent delivery attempts; never a secret. */
  webhook: RunWebhookView.nullable(),
  /** Every executable node (nested graphs expanded), by id. */
  nodes: z.record(z.string(), NodeView),
  /** Sink node outputs keyed by node id, once the run succeeded. */
  output: z.record(z.string(), z.unknown()).nullable(),
  error: RunError.nullable(),
  /**
   * Present when the document was read from the archive (`TETRALOOP_ARCHIVE_DIR`) because the run's
   * Redis record had expired: when it was archived. Its blobs are read in; its events are archived
   * beside it (`tetraloop archive export`).
   */
  archivedAt: z.string().optional(),
});
export type RunDocument = z.infer<typeof RunDocument>;

export type TaskMode = 'dag' | 'loop' | 'window';

/**
 * How a window-mode run is planned: at most `size` nodes per window, at most `maxWindows` windows,
 * and how long a window may run before what it has not started goes back to the planner
 * (`cycleBudgetMs`; none when unset or 0).
 */
export interface WindowSettings {
  readonly size: number;
  readonly maxWindows: number;
  readonly cycleBudgetMs?: number;
}

/** What a task run asks for, kept with the run so the plan loop can plan and replan it. */
/** A loop-mode run's agent iterations when the request sets no `maxIterations`. */
export const DEFAULT_LOOP_ITERATIONS = 10;

export interface TaskSpec {
  readonly task: string;
  /**
   * `loop` runs work the task with the agent loop and are never planned or replanned; `window`
   * runs are planned a few nodes at a time. @defaultValue "dag"
   */
  readonly mode?: TaskMode;
  /** Window mode: most nodes per window and most windows (`maxReplans` is `maxWindows - 1`). */
  readonly window?: WindowSettings;
  readonly agentId: string;
  /** @defaultValue DEFAULT_TENANT */
  readonly tenant?: string;
  readonly overrides?: string;
  readonly maxReplans: number;
  /** The run's `model`: the agent's (loop mode, in its graph) or the planner's (dag mode). */
  readonly model?: string;
  /** The run's `thinking` (its schema: model/thinking.ts), as for `model`. */
  readonly thinking?: unknown;
  /** The tenant secrets the request grants the nodes a model writes for it (names; never values). */
  readonly secrets?: readonly string[];
  /** Loop mode: the agent loop's most iterations (its graph is made when the run is prepared). */
  readonly maxIterations?: number;
}
